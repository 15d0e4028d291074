"""check(), hint() and verify(): the students' instant feedback, and the strict check of hidden tests.

In a notebook, ``check("lab00.quantize", quantize_int8)`` prints one verdict and never raises, so
"Run All" goes on: ✓ with the cases passed, ✗ with the case, the first differences, a picture and
the first hint, or "not done yet" for an untouched stub. A student's own exception is shown with
the student's lines only. Outside a notebook (tests, scripts) a wrong answer raises CheckFailed.
``verify`` runs the visible and hidden cases and raises on any failure: nbgrader's autograder and
nbval use it; the course's own grader does not run it (it computes verdicts in its own process).

Serves: the labs (self-checks) and instructors (nbgrader's hidden tests).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.errors import InputError
from helpers.grading import wire
from helpers.grading.compare import BadAnswer
from helpers.grading.exercise import Case, Exercise, get
from helpers.grading.unfinished import is_stub

PASS, FAIL, TODO, ERROR = "pass", "fail", "todo", "error"
_COURSE = str(Path(__file__).resolve().parents[1])
_SYSTEM = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
_PASSED: dict[str, Callable] = {}  # exercise -> the function object that last passed its visible cases


class CheckFailed(AssertionError):
    """The student's function gave a wrong answer (the message says where and why)."""


@dataclass
class Verdict:
    """The outcome of one check: status pass, fail, todo (a stub) or error (the student's code raised)."""

    exercise: str
    passed: bool
    message: str
    case: str = ""
    got: Any = None
    expected: Any = None
    status: str = PASS


def student_frames(exc: BaseException) -> str:
    """The lines of a traceback that are the student's own code (not the course's, Python's or numba's)."""
    lines = []
    for fr in traceback.extract_tb(exc.__traceback__):
        name = fr.filename or ""
        if name.startswith(_COURSE) or name.startswith(_SYSTEM) or "site-packages" in name or name.startswith("<frozen"):
            continue
        where = "your cell" if "ipykernel" in name or name.startswith("<ipython") else Path(name).name
        lines.append(f"  {where}, line {fr.lineno}, in {fr.name}: {(fr.line or '').strip()}")
    return "\n".join(lines[-4:])


def _raised(exc: BaseException) -> str:
    """'ExcType: message' plus the student's frames."""
    frames = student_frames(exc)
    return f"{type(exc).__name__}: {exc}" + (f"\n{frames}" if frames else "")


def verdict(ex: Exercise, fn: Callable, cases: list[Case] | None = None) -> Verdict:
    """Run every case (default: the visible ones) in this process; stop at the first that fails."""
    if not callable(fn):
        return Verdict(ex.id, False, f"check() needs your function, got {type(fn).__name__}. "
                       f"Pass the function itself, without calling it.", status=FAIL)
    if is_stub(fn):  # an untouched stub: no need to build the cases' inputs to know
        return Verdict(ex.id, False, "not done yet", status=TODO)
    from tqdm.auto import tqdm

    kind = "visible " if cases is None else ""
    cases = ex.visible() if cases is None else cases
    slow = ex.measured and len(cases) > 1  # each case measures a model twice (yours, the reference): show progress
    for case in tqdm(cases, desc=f"checking {ex.id}, case by case", leave=False, disable=not slow):
        expected = wire.roundtrip(ex.expected(case))
        try:
            got = wire.roundtrip(ex.answer(fn, case))
        except NotImplementedError:
            return Verdict(ex.id, False, "not done yet", case.label, status=TODO)
        except (BadAnswer, InputError) as err:
            return Verdict(ex.id, False, str(err), case.label, status=FAIL)
        except Exception as exc:  # noqa: BLE001 - a student's function may raise anything
            return Verdict(ex.id, False, f"your function raised {_raised(exc)}", case.label, status=ERROR)
        try:
            ex.judge(got, expected)
        except AssertionError as err:
            return Verdict(ex.id, False, str(err), case.label, got, expected, status=FAIL)
    return Verdict(ex.id, True, f"all {len(cases)} {kind}case(s) pass")


def render(ex: Exercise, v: Verdict, fn: Any = None) -> str:
    """The text a student sees for a verdict."""
    head = f"{ex.id} ({ex.title})"
    more = f'  Stuck? hint("{ex.id}")' if ex.all_hints() else ""
    if v.status == PASS:
        return f"✓ {head}: {v.message}."
    if v.status == TODO:
        name = getattr(fn, "__name__", "your function")
        return f"… {head}: not done yet. Write {name} where it says YOUR CODE HERE, then run this cell again.{more}"
    where = f" on case '{v.case}'" if v.case else ""
    first = ex.all_hints()[:1]
    closer = f'  (closer: hint("{ex.id}", 2))' if len(ex.all_hints()) > 1 else ""
    hint_line = f"\nHint: {first[0]}{closer}" if first else ""
    return f"✗ {head}{where}:\n{v.message}{hint_line}"


def _in_notebook() -> bool:
    """True inside an IPython/Jupyter session (show verdicts; never stop 'Run All')."""
    shell = sys.modules.get("IPython")
    ip = getattr(shell, "get_ipython", lambda: None)() if shell else None
    return ip is not None


def _maybe_plot(v: Verdict, title: str) -> None:
    """Draw yours / expected / difference for a failed array answer (GPU-Puzzles style)."""
    import numpy as np

    got, exp = v.got, v.expected
    if not (isinstance(got, np.ndarray) and isinstance(exp, np.ndarray)) or got.shape != exp.shape:
        return
    if got.ndim not in (1, 2) or got.size > 65536 or got.dtype.kind not in "biuf":
        return
    from helpers.grading.feedback import plot_difference

    plot_difference(got, exp, title=title)


def _perf(ex: Exercise, fn: Callable) -> tuple[bool, str]:
    """On a GPU, the exercise's speed check: (ok, line); elsewhere (True, a note)."""
    from helpers.device import has_gpu

    if not has_gpu():
        return True, "  (speed check skipped: it runs only on a GPU)"
    assert ex.perf is not None
    ratio, needed, detail = ex.perf(fn)
    ok = ratio >= needed
    return ok, f"{'✓' if ok else '✗'} speed: yours ÷ reference = {ratio:.2f} (need ≥ {needed:.2f}). {detail}"


def check(exercise_id: str, fn: Callable, *, plot: bool = True, perf: bool = True,
          cases: list[Case] | None = None) -> Verdict | None:
    """Check `fn` against exercise `exercise_id` on its visible cases (or `cases`) and show the verdict.

    In a notebook it prints and returns nothing. Elsewhere it returns the Verdict, and raises
    CheckFailed for a wrong answer (NotImplementedError for a stub).
    """
    __tracebackhide__ = True  # pytest shows the verdict, not this function's frame
    ex = get(exercise_id)
    if cases is not None and (not isinstance(cases, list) or not all(isinstance(c, Case) for c in cases)):
        raise InputError("cases must be a list of helpers.grading.Case objects.")
    v = verdict(ex, fn, cases)
    if v.passed and cases is None:
        _PASSED[ex.id] = fn
    text = render(ex, v, fn)
    lines = [text]
    if v.passed and perf and ex.perf is not None:
        ok, line = _perf(ex, fn)
        lines.append(line)
        if not ok:
            v = Verdict(ex.id, False, f"correct, but slower than the reference. {line}", status=FAIL)
    if _in_notebook():
        print("\n".join(lines))
        if v.status == FAIL and plot and ex.plot:
            _maybe_plot(v, f"{ex.id} ({v.case})")
        return None
    if v.status == TODO:
        raise NotImplementedError(text)
    if not v.passed:
        raise CheckFailed("\n".join(lines))
    print("\n".join(lines))
    return v


def verify(exercise_id: str, fn: Callable) -> None:
    """Run the visible and hidden cases; raise CheckFailed at the first failure (needs the answer key)."""
    __tracebackhide__ = True
    ex = get(exercise_id)
    if ex.spec is None:
        raise InputError(f"{exercise_id}: the hidden cases are not in this copy of the course (they stay with "
                         f"your instructor). Use check() instead.")
    seen = _PASSED.get(ex.id) is fn  # the same function object just passed the visible cases
    v = verdict(ex, fn, ([] if seen else ex.visible()) + list(ex.hidden() if ex.hidden else []))
    if not v.passed:
        raise CheckFailed(render(ex, v, fn))


def hint(exercise_id: str, level: int = 1) -> None:
    """Print hint number `level` of an exercise (1 names the idea; each level gets closer)."""
    ex = get(exercise_id)
    hints = ex.all_hints()
    if not isinstance(level, int) or level < 1:
        raise InputError(f"hint levels start at 1; got {level!r}.")
    if not hints:
        print(f"{exercise_id} has no hints.")
    elif level > len(hints):
        print(f"{exercise_id} has {len(hints)} hint(s); here is the last one:\n{hints[-1]}")
    else:
        nxt = f'\n(closer: hint("{exercise_id}", {level + 1}))' if level < len(hints) else ""
        print(f"Hint {level}/{len(hints)} for {exercise_id}: {hints[level - 1]}{nxt}")
