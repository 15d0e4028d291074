"""Let "Run All" go on in an unfinished lab: a demo cell that needs a student's function asks
``ready(fn, ...)`` first, which says "not done yet" for an untouched stub instead of letting it raise.

A stub is recognised from its code, without calling it (so a stub numba kernel is never compiled for
a GPU, where its ``raise`` would be silently ignored): the only name it uses is NotImplementedError.

Serves: the labs (demo cells of every lab).
"""

from __future__ import annotations

from types import CodeType
from typing import Any


def _code(fn: Any) -> CodeType | None:
    """The code object of a function, a numba kernel or device function (its Python function), else None."""
    for attr in ("py_func", "fn"):  # numba's dispatcher and its simulator's kernel keep the Python function
        inner = getattr(fn, attr, None)
        if callable(inner) and hasattr(inner, "__code__"):
            return inner.__code__
    return getattr(fn, "__code__", None)


def is_stub(fn: Any) -> bool:
    """True for an untouched lab stub: its body only raises NotImplementedError."""
    code = _code(fn)
    return code is not None and set(code.co_names) == {"NotImplementedError"}


def ready(*fns: Any) -> bool:
    """True when none of `fns` is an untouched stub; else print which one to finish first and return False."""
    todo = [getattr(fn, "__name__", None) or getattr(getattr(fn, "py_func", None), "__name__", "your function")
            for fn in fns if is_stub(fn)]
    if todo:
        names = ", ".join(todo)
        print(f"… not done yet: finish {names} above first, then run this cell again.")
    return not todo
