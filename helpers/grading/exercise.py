"""Exercises: how to call a student's function, how to compare its answer, and (in the answer key
only) the spec that computes the expected answer and the hidden cases.

Where an exercise comes from, in order: the registry; the answer key
``helpers.grading.exercises.labNN`` (instructors only: not in the students' copy); folders named in
$GRADING_EXERCISES (``labNN.py`` files, e.g. a test fixture); the students' visible cases
``helpers/grading/visible/labNN.json``, which carry their expected values but no spec.

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
FOLDER = Path(__file__).resolve().parent / "visible"  # the students' copy: visible cases, no specs
ANSWER_KEY = "helpers.grading.exercises"


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


def load_lab(lab: str) -> None:
    """Register a lab's exercises from the answer key if present, else an extra folder, else the visible cases."""
    try:
        importlib.import_module(f"helpers.grading.exercises.{lab}")
        return
    except ModuleNotFoundError as err:
        if err.name not in (f"helpers.grading.exercises.{lab}", "helpers.grading.exercises"):
            raise
    for folder in filter(None, os.environ.get(EXTRA_VAR, "").split(os.pathsep)):
        if _import_file(lab, Path(folder)):
            return
    load(lab)


def resolve(reference: str | None) -> Callable | None:
    """The function a ref() names (only inside the course package)."""
    if reference is None:
        return None
    module, _, name = reference.partition(":")
    if not module.startswith("helpers.") or module.startswith(ANSWER_KEY):
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


def path_for(lab: str, folder: Path = FOLDER) -> Path:
    """Where a lab's visible cases are stored."""
    return folder / f"{lab}.json"


def load(lab: str, folder: Path = FOLDER) -> None:
    """Register a lab's exercises from its stored visible cases (the students' copy)."""
    path = path_for(lab, folder)
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
