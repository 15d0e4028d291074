"""The students' copy of each lab's exercises: visible cases with their expected answers, hints, and
references to the functions that call and compare (in the lab's ``kit.py`` or the check engine), but no spec and
no hidden case. Written from the answer key by ``python -m instructors.batch generate``.

Serves: the labs (self-checks without the answer key) and instructors (lab generation).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from helpers.cli import write_beside
from helpers.errors import InputError
from helpers.grading import wire
from helpers.grading.exercise import (
    LABS,
    Exercise,
    answer_key_module,
    is_answer_key,
    lab_package,
    path_for,
)
from instructors import keys


def ref(fn: Callable | None) -> str | None:
    """'module:qualname' of a shipped function (never one from the answer key)."""
    if fn is None:
        return None
    module, name = getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")
    if not module.startswith("helpers.") or is_answer_key(module) or "<" in name:
        raise InputError(f"{module}.{name} cannot be shipped to students: run/compare/perf functions must be "
                         f"module-level functions in the lab's kit.py (or the check engine, or core helpers), not in its "
                         f"answer key.")
    return f"{module}:{name}"


def student_record(ex: Exercise) -> dict:
    """What the students' copy holds about one exercise."""
    compare = ex.compare if isinstance(ex.compare, str) else ref(ex.compare)
    cases = [{"label": c.label, "args": tuple(c.args), "kwargs": dict(c.kwargs), "expected": ex.expected(c)}
             for c in ex.visible()]
    return {"id": ex.id, "title": ex.title, "hints": ex.all_hints(), "compare": compare,
            "callable_compare": not isinstance(ex.compare, str), "rtol": ex.rtol, "atol": ex.atol,
            "run": ref(ex.run), "perf": ref(ex.perf), "plot": ex.plot, "cases": cases}


def lab_exercises(lab: str) -> list[Exercise]:
    """The exercises of one lab, from its answer-key module, in registration order."""
    from helpers.grading.exercise import _REGISTRY

    key = answer_key_module(lab)
    if key is None:
        raise InputError(f"no lab called {lab!r} under helpers/labs/.")
    importlib.import_module(key)
    return [ex for ex in _REGISTRY.values() if ex.id.split(".", 1)[0] == lab]


def answer_key_labs() -> list[str]:
    """Labs that have an answer-key module."""
    return [lab for lab in keys.labs() if lab_package(lab)]


def render(lab: str) -> str:
    """The JSON text of one lab's student records."""
    try:
        return wire.dumps([student_record(ex) for ex in lab_exercises(lab)], indent=1) + "\n"
    except Exception as err:
        raise InputError(f"{lab}: cannot write its visible cases ({type(err).__name__}: {err}). Cases must be "
                         f"plain data; see docs/instructors.md, 'Writing a lab'.") from err


def write_all(labs: Path = LABS) -> list[Path]:
    """Write every lab's visible cases; return the paths."""
    out = []
    for lab in answer_key_labs():
        p = path_for(lab, labs)
        with write_beside(p) as tmp:  # never a half-written file, and the file's mode kept
            tmp.write_text(render(lab), encoding="utf-8")
        out.append(p)
    return out


def _canonical(records: list[dict], measured: set[str]) -> str:
    """Records as plain-data JSON, with the expected answers of measured exercises left out (not re-measured)."""
    out = [dict(r, cases=[dict(c, expected=None) for c in r["cases"]]) if r["id"] in measured else r
           for r in records]
    return wire.dumps(out)


def _stored(path: Path, measured: set[str]) -> str | None:
    """A stored file's records in _canonical form; None when it is not a list of records (so: stale)."""
    try:
        records = wire.loads(path.read_text(encoding="utf-8"))
        return _canonical(records, measured)
    except (InputError, KeyError, TypeError, ValueError, AttributeError):
        return None


def stale(labs: Path = LABS) -> list[Path]:
    """Stored visible cases that differ from what write_all() would write (measured answers not re-measured)."""
    out = []
    for lab in answer_key_labs():
        p = path_for(lab, labs)
        exercises = lab_exercises(lab)
        measured = {ex.id for ex in exercises if ex.measured}
        fresh = [student_record(_unmeasured(ex) if ex.id in measured else ex) for ex in exercises]
        if not p.is_file() or _stored(p, measured) != _canonical(fresh, measured):
            out.append(p)
    return out


def _unmeasured(ex: Exercise) -> Exercise:
    """A copy of ex whose cases carry a placeholder answer (so the spec is not run)."""
    import dataclasses

    cases = [dataclasses.replace(c, expected=None) for c in ex.visible()]
    return dataclasses.replace(ex, cases=lambda: cases)
