"""Exercises: a spec (the expected answer), visible cases, and how to run a student's function.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from helpers.errors import InputError


@dataclass
class Case:
    """One visible test case: the arguments the function is called with."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass
class Exercise:
    """A checkable exercise.

    `spec(*args, **kwargs)` gives the expected answer of a case; `run(fn, case)` runs the
    student's function on it (default: call it; kernels override this to launch them).
    `compare` is 'exact' (integers, shapes, dtypes), 'close' (rtol/atol) or a function
    (got, expected) -> None that raises AssertionError with a message.
    """

    id: str
    title: str
    spec: Callable[..., Any]
    cases: Callable[[], list[Case]]
    hint: str
    compare: str | Callable[[Any, Any], None] = "exact"
    rtol: float = 1e-5
    atol: float = 1e-6
    run: Callable[[Callable, Case], Any] | None = None
    perf: Callable[[Callable], tuple[float, float, str]] | None = None
    plot: bool = True

    def run_case(self, fn: Callable, case: Case) -> Any:
        """The student's answer for one case."""
        if self.run is not None:
            return self.run(fn, case)
        return fn(*case.args, **case.kwargs)

    def expected(self, case: Case) -> Any:
        """The spec's answer for one case."""
        return self.spec(*case.args, **case.kwargs)


_REGISTRY: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    """Add exercises to the registry (called by each module in helpers.grading.exercises)."""
    for ex in exercises:
        _REGISTRY[ex.id] = ex


def get(exercise_id: str) -> Exercise:
    """Find an exercise by id such as 'lab04.per_channel', importing its lab module on demand."""
    if not isinstance(exercise_id, str) or "." not in exercise_id:
        raise InputError(f"exercise ids look like 'lab04.per_channel'; got {exercise_id!r}.")
    if exercise_id not in _REGISTRY:
        lab = exercise_id.split(".", 1)[0]
        try:
            importlib.import_module(f"helpers.grading.exercises.{lab}")
        except ModuleNotFoundError:
            pass
    if exercise_id not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY)) or "none loaded"
        raise InputError(f"no exercise called {exercise_id!r}. Check the spelling; known: {known}.")
    return _REGISTRY[exercise_id]


def all_ids() -> list[str]:
    """Ids of every exercise registered so far."""
    return sorted(_REGISTRY)
