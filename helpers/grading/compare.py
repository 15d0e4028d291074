"""Compare a student's answer with the expected one and explain the first difference.

Runs in the student's notebook (self-check) and, for grading, in the grader's own process on
plain data sent back from the student's kernel.

Serves: the labs (self-checks) and instructors (batch grading).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class BadAnswer(Exception):
    """The student's function answered with the wrong kind of thing (its message says what was expected)."""


def compare(got: Any, expected: Any, rule: str, rtol: float, atol: float) -> None:
    """Compare by rule 'exact' or 'close'; raise AssertionError describing the first difference."""
    compare_arrays(got, expected, rule == "exact", rtol, atol)


def as_numpy(x: Any) -> Any:
    """Convert torch tensors (and numba/cupy device arrays) to numpy; leave other values alone."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if hasattr(x, "get") and hasattr(x, "__cuda_array_interface__"):
        return x.get()
    return x


def _plain(v: Any) -> Any:
    """A numpy scalar as the plain Python number (prints as -20, not np.int8(-20))."""
    return v.item() if isinstance(v, np.generic) else v


def _first_differences(got: np.ndarray, exp: np.ndarray, bad: np.ndarray, limit: int = 5) -> str:
    """Lines 'index: yours vs expected' for the first `limit` differing elements."""
    idx = np.argwhere(bad)[:limit]
    lines = [f"    at {tuple(int(i) for i in ix)}: yours {_plain(got[tuple(ix)])!r} "
             f"vs expected {_plain(exp[tuple(ix)])!r}" for ix in idx]
    return "\n".join(lines)


def compare_arrays(got: Any, exp: Any, exact: bool, rtol: float, atol: float) -> None:
    """Raise AssertionError describing how `got` differs from `exp` (shape, dtype, values)."""
    got, exp = as_numpy(got), as_numpy(exp)
    if not isinstance(exp, np.ndarray):
        if isinstance(exp, (tuple, list)) and isinstance(got, (tuple, list)):
            if len(got) != len(exp):
                raise AssertionError(f"you returned {len(got)} values; expected {len(exp)}.")
            for i, (g, e) in enumerate(zip(got, exp)):
                try:
                    compare_arrays(g, e, exact, rtol, atol)
                except AssertionError as err:
                    raise AssertionError(f"return value #{i}: {err}") from None
            return
        if not exact:
            try:
                g = float(got)
            except (TypeError, ValueError):
                raise AssertionError(f"expected a number like {exp!r}, got {type(got).__name__} "
                                     f"{got!r:.80}. Did you forget to return it?") from None
            if not np.isclose(g, float(exp), rtol=rtol, atol=atol):
                raise AssertionError(f"yours {got!r} vs expected {exp!r}")
        elif got != exp:
            raise AssertionError(f"yours {got!r} vs expected {exp!r}")
        return
    if not isinstance(got, np.ndarray):
        hint = " Did you forget to return it?" if got is None else ""
        raise AssertionError(f"expected an array of shape {exp.shape}, got {type(got).__name__}.{hint}")
    if got.shape != exp.shape:
        raise AssertionError(f"shape: yours {got.shape} vs expected {exp.shape}.")
    if exact and got.dtype != exp.dtype:
        raise AssertionError(f"dtype: yours {got.dtype} vs expected {exp.dtype}.")
    if exact:
        bad = got != exp
    else:
        bad = ~np.isclose(got.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        n, total = int(bad.sum()), bad.size
        raise AssertionError(
            f"{n} of {total} elements differ. First differences:\n{_first_differences(got, exp, bad)}"
        )
