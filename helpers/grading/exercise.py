"""Exercises: how to call a student's function, how to compare its answer, and (in the answer key
only) the spec that computes the expected answer and the hidden cases.

Each lab is one package, ``helpers/labs/labNN_<topic>/``. Where an exercise comes from, in order: the
registry; the lab's answer key ``instructors.keys.labNN_<topic>`` (the instructors' package, beside ``helpers``
in their checkout only: never in the students' copy); folders named in $GRADING_EXERCISES (``labNN.py`` files,
e.g. a test fixture); the students' visible cases ``helpers/labs/labNN_<topic>/visible.json``, which carry their
expected values but no spec.

This module is the one place in ``helpers`` that looks for the instructors' package: by name, at run time
(``answer_keys_present``, ``load_lab``), never with an import statement.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.errors import InputError
from helpers.grading import wire

EXTRA_VAR = "GRADING_EXERCISES"
COURSE = Path(__file__).resolve().parents[2]  # the folder that holds this helpers package
LABS = COURSE / "helpers" / "labs"  # one package per lab
INSTRUCTORS = "instructors"  # the instructors' package: beside helpers/ in their checkout, never in the students' copy
KEYS_PACKAGE = "instructors.keys"  # a lab's answer key: instructors/keys/labNN_<topic>.py
VISIBLE_FILE = "visible.json"  # a lab's visible cases, with expected answers but no spec


def lab_package(lab: str, labs: Path = LABS) -> str | None:
    """'lab05_entropy_calibration' for 'lab05': the lab's package folder under helpers/labs, or None."""
    if not (isinstance(lab, str) and len(lab) == 5 and lab.startswith("lab") and lab[3:].isdigit()):
        return None
    found = sorted(p.name for p in labs.glob(f"{lab}_*") if (p / "__init__.py").is_file())
    return found[0] if found else None


def answer_key_module(lab: str) -> str | None:
    """The dotted name of a lab's answer key, e.g. 'instructors.keys.lab05_entropy_calibration'."""
    pkg = lab_package(lab)
    return f"{KEYS_PACKAGE}.{pkg}" if pkg else None


def is_answer_key(module: str) -> bool:
    """True for any module of the instructors' package (answer keys, grader): never loaded by a student's reference."""
    return module == INSTRUCTORS or module.startswith(INSTRUCTORS + ".")


def answer_keys_present() -> bool:
    """True where the instructors' package that Python finds lies beside this helpers package (their checkout or
    install); False in the students' copy and in a graded kernel's copy, even when the grader's own install is on
    the path."""
    try:
        spec = importlib.util.find_spec(INSTRUCTORS)
    except (ImportError, ValueError, OSError):  # OSError: an install's finder may point into a closed checkout
        return False
    return spec is not None and spec.origin is not None and Path(spec.origin).resolve().parents[1] == COURSE


class _Missing:
    """Marks a case whose expected value is not stored (the spec computes it)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass
class Case:
    """One test case: plain-data arguments, and (in the students' copy) the expected answer."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Any = MISSING


@dataclass
class Exercise:
    """A checkable exercise.

    `run(fn, *args, **kwargs)` calls the student's function on a case's plain arguments and returns
    plain data (default: `fn(*args, **kwargs)`); `spec(*args, **kwargs)` returns the expected plain
    answer. `compare` is 'exact', 'close' (rtol/atol) or a function (got, expected) that raises
    AssertionError with a message. `hint` names the idea; `hints` get closer, one level each.
    `hidden` gives the cases only the grader uses.
    """

    id: str
    title: str
    spec: Callable[..., Any] | None = None
    cases: Callable[[], list[Case]] | None = None
    hint: str = ""
    compare: str | Callable[[Any, Any], None] = "exact"
    rtol: float = 1e-5
    atol: float = 1e-6
    run: Callable[..., Any] | None = None
    perf: Callable[[Callable], tuple[float, float, str]] | None = None
    plot: bool = True
    hidden: Callable[[], list[Case]] | None = None
    hints: tuple[str, ...] = ()
    measured: bool = False  # the expected answer is a measurement (an accuracy): slow to recompute

    def all_hints(self) -> list[str]:
        """Every hint, the gentlest first."""
        return [h for h in (self.hint, *self.hints) if h]

    def visible(self) -> list[Case]:
        """The visible cases."""
        return list(self.cases()) if self.cases else []

    def answer(self, fn: Callable, case: Case) -> Any:
        """The student's answer for one case (raises whatever the student's code raises)."""
        if self.run is not None:
            return self.run(fn, *case.args, **case.kwargs)
        return fn(*case.args, **case.kwargs)

    def expected(self, case: Case) -> Any:
        """The expected answer: stored with the case, else computed by the spec."""
        if case.expected is not MISSING:
            return case.expected
        if self.spec is None:
            raise InputError(f"{self.id}: the case '{case.label}' has no stored answer and this copy of the "
                             f"course has no answer key. Check with the exercise's own cases.")
        return self.spec(*case.args, **case.kwargs)

    def judge(self, got: Any, expected: Any) -> None:
        """Raise AssertionError (with the first difference) unless `got` is right."""
        from helpers.grading.compare import compare

        if callable(self.compare):
            self.compare(got, expected)
        else:
            compare(got, expected, self.compare, self.rtol, self.atol)


_REGISTRY: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    """Add exercises to the registry (called by each answer-key module, and by the students' copy)."""
    for ex in exercises:
        _REGISTRY[ex.id] = ex


def _import_file(lab: str, folder: Path) -> bool:
    """Import folder/<lab>.py (an extra exercise module); True when it exists."""
    path = folder / f"{lab}.py"
    if not path.is_file():
        return False
    name = f"_grading_extra_{lab}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return True


def _import_key(key: str) -> bool:
    """Import an answer key by its dotted name; False when it or a package above it is missing (a key that is there
    but needs a missing module raises)."""
    try:
        importlib.import_module(key)
    except ModuleNotFoundError as err:
        if not err.name or not (key == err.name or key.startswith(err.name + ".")):
            raise
        return False
    return True


def load_lab(lab: str) -> None:
    """Register a lab's exercises from its answer key if present, else an extra folder, else the visible cases.

    The answer key is imported by its dotted name, ``instructors.keys.<lab package>``, where
    ``answer_keys_present()``: this function is where ``helpers`` reaches into the instructors' package.
    """
    key = answer_key_module(lab)
    if key is not None and answer_keys_present() and _import_key(key):
        return
    for folder in filter(None, os.environ.get(EXTRA_VAR, "").split(os.pathsep)):
        if _import_file(lab, Path(folder)):
            return
    load(lab)


def resolve(reference: str | None) -> Callable | None:
    """The function a ref() names (only inside the course package)."""
    if reference is None:
        return None
    module, _, name = reference.partition(":")
    if not module.startswith("helpers.") or is_answer_key(module):
        raise InputError(f"refused to load {reference!r}: not a course function.")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def from_record(r: dict) -> Exercise:
    """An Exercise (no spec, no hidden cases) from a student record."""
    cases = [Case(c["label"], tuple(c["args"]), dict(c["kwargs"]), c["expected"]) for c in r["cases"]]
    hints = list(r["hints"]) or [""]
    return Exercise(id=r["id"], title=r["title"], cases=lambda: cases, hint=hints[0], hints=tuple(hints[1:]),
                    compare=resolve(r["compare"]) if r["callable_compare"] else r["compare"],  # type: ignore[arg-type]
                    rtol=r["rtol"], atol=r["atol"], run=resolve(r["run"]), perf=resolve(r["perf"]), plot=r["plot"])


def path_for(lab: str, labs: Path = LABS) -> Path:
    """Where a lab's visible cases are stored: helpers/labs/labNN_<topic>/visible.json."""
    pkg = lab_package(lab, labs)
    if pkg is None:
        raise InputError(f"no lab called {lab!r}: each lab is a folder helpers/labs/{lab}_<topic>/ with an __init__.py.")
    return labs / pkg / VISIBLE_FILE


def load(lab: str, labs: Path = LABS) -> None:
    """Register a lab's exercises from its stored visible cases (the students' copy)."""
    if lab_package(lab, labs) is None:
        return
    path = path_for(lab, labs)
    if path.is_file():
        register(*(from_record(r) for r in wire.loads(path.read_text(encoding="utf-8"))))


def get(exercise_id: str) -> Exercise:
    """Find an exercise by id such as 'lab04.per_channel_scale', loading its lab on demand."""
    if not isinstance(exercise_id, str) or "." not in exercise_id:
        raise InputError(f"exercise ids look like 'lab04.per_channel_scale'; got {exercise_id!r}.")
    if exercise_id not in _REGISTRY:
        load_lab(exercise_id.split(".", 1)[0])
    if exercise_id not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY)) or "none loaded"
        raise InputError(f"no exercise called {exercise_id!r}. Check the spelling; known: {known}.")
    return _REGISTRY[exercise_id]


def all_ids() -> list[str]:
    """Ids of every exercise registered so far."""
    return sorted(_REGISTRY)
