"""check(): run an exercise's visible cases on a student's function and give a specific verdict.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helpers.errors import InputError
from helpers.grading.compare import as_numpy, compare_arrays
from helpers.grading.exercise import Case, Exercise, get


class CheckFailed(AssertionError):
    """The student's function gave a wrong answer (the message says where and why)."""


@dataclass
class Verdict:
    """The outcome of one check."""

    exercise: str
    passed: bool
    message: str
    case: str = ""
    got: Any = None
    expected: Any = None


def _compare(ex: Exercise, got: Any, expected: Any) -> None:
    """Compare with the exercise's rule; raise AssertionError on a difference."""
    if callable(ex.compare):
        ex.compare(got, expected)
    else:
        compare_arrays(got, expected, ex.compare == "exact", ex.rtol, ex.atol)


def _student_error(exc: BaseException) -> str:
    """The last frame and message of an exception raised inside the student's code."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (line {tb[-1].lineno}: {tb[-1].line})" if tb and tb[-1].line else ""
    return f"{type(exc).__name__}: {exc}{where}"


def verdict(ex: Exercise, fn: Callable, cases: list[Case] | None = None) -> Verdict:
    """Run every case (default: the visible ones); stop at the first failure.

    NotImplementedError propagates, so that an untouched stub reads as 'not done yet'.
    """
    if not callable(fn):
        return Verdict(ex.id, False, f"check() needs your function, got {type(fn).__name__}. "
                       f"Pass the function itself, without calling it.")
    kind = "visible " if cases is None else ""
    if cases is None:
        cases = ex.cases()
    for case in cases:
        expected = ex.expected(case)
        try:
            got = ex.run_case(fn, case)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - a student's function may raise anything
            return Verdict(ex.id, False, f"your function raised {_student_error(exc)}", case.label)
        try:
            _compare(ex, got, expected)
        except AssertionError as err:
            return Verdict(ex.id, False, str(err), case.label, as_numpy(got), as_numpy(expected))
    return Verdict(ex.id, True, f"all {len(cases)} {kind}case(s) pass")


def _maybe_plot(v: Verdict) -> None:
    """Draw yours / expected / difference for a failed array answer (GPU-Puzzles style)."""
    import numpy as np

    got, exp = v.got, v.expected
    if not (isinstance(got, np.ndarray) and isinstance(exp, np.ndarray)) or got.shape != exp.shape:
        return
    if got.ndim not in (1, 2) or got.size > 65536 or got.dtype.kind not in "biuf":
        return
    from helpers.grading.feedback import plot_difference

    plot_difference(got, exp, title=f"{v.exercise} ({v.case})")


def check(exercise_id: str, fn: Callable, *, plot: bool = True, perf: bool = True,
          cases: list[Case] | None = None) -> Verdict:
    """Check `fn` against exercise `exercise_id`; print the verdict and raise CheckFailed if wrong.

    `cases` replaces the exercise's visible cases (hidden tests pass their own).

    On a machine with a GPU, a performance check (if the exercise has one) then compares your
    kernel with the reference kernel, timed in the same run, as a ratio.
    """
    __tracebackhide__ = True  # IPython and pytest show the verdict, not this function's frame
    ex = get(exercise_id)
    if cases is not None and (not isinstance(cases, list) or not all(isinstance(c, Case) for c in cases)):
        raise InputError("cases must be a list of helpers.grading.Case objects.")
    v = verdict(ex, fn, cases)
    if not v.passed:
        if plot and ex.plot:
            _maybe_plot(v)
        where = f" on case '{v.case}'" if v.case else ""
        raise CheckFailed(f"✗ {ex.id} ({ex.title}){where}:\n{v.message}\nHint: {ex.hint}")
    print(f"✓ {ex.id} ({ex.title}): {v.message}.")
    if perf and ex.perf is not None:
        from helpers.device import has_gpu

        if has_gpu():
            ratio, needed, detail = ex.perf(fn)
            ok = ratio >= needed
            mark = "✓" if ok else "✗"
            print(f"{mark} speed: yours ÷ reference = {ratio:.2f} (need ≥ {needed:.2f}). {detail}")
            if not ok:
                raise CheckFailed(f"✗ {ex.id}: correct, but {ratio:.2f}× the reference speed "
                                  f"(need ≥ {needed:.2f}). Hint: {ex.hint}")
        else:
            print("  (speed check skipped: it runs only on a GPU)")
    return v
