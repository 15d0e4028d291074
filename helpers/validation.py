"""Argument checks shared by every public helper, each raising a clear InputError.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.errors import InputError


def _dtype_name(x: Any) -> str:
    """The dtype of an array or tensor as text."""
    return str(getattr(x, "dtype", type(x).__name__))


def _is_float(x: Any) -> bool:
    """True for numpy or torch floating-point arrays."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        return False
    if hasattr(dt, "is_floating_point"):
        return bool(dt.is_floating_point)
    return np.issubdtype(dt, np.floating)


def require_array(x: Any, name: str = "x") -> None:
    """Require a numpy array or torch tensor."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise InputError(
            f"{name} must be a numpy array or torch tensor, got {type(x).__name__}. "
            f"Wrap it: np.asarray({name}) or torch.as_tensor({name})."
        )


def require_float(x: Any, name: str = "x") -> None:
    """Require a floating-point array or tensor."""
    require_array(x, name)
    if not _is_float(x):
        raise InputError(
            f"{name} must be floating point, got dtype {_dtype_name(x)}. "
            f"Convert it first, e.g. {name}.astype(np.float32) or {name}.float()."
        )


def require_dtype(x: Any, dtypes: tuple[str, ...], name: str = "x") -> None:
    """Require one of the named dtypes (compared by their text, e.g. 'int8')."""
    require_array(x, name)
    got = _dtype_name(x).replace("torch.", "")
    if got not in dtypes:
        raise InputError(f"{name} must have dtype {' or '.join(dtypes)}, got {got}. "
                         f"Convert it first, e.g. {name}.astype(np.{dtypes[0]}) (after quantizing, for integers).")


def require_nonempty(x: Any, name: str = "x") -> None:
    """Require at least one element."""
    require_array(x, name)
    if int(np.prod(tuple(x.shape))) == 0:
        raise InputError(f"{name} is empty (shape {tuple(x.shape)}). Pass at least one element.")


def require_finite(x: Any, name: str = "x") -> None:
    """Require no NaN or Inf values."""
    values = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).sum())
        raise InputError(
            f"{name} holds {bad} NaN or Inf value(s); a scale computed from them is meaningless. "
            f"Find where they come from, or clean them with np.nan_to_num / torch.nan_to_num."
        )


def require_ndim(x: Any, ndims: tuple[int, ...], name: str = "x") -> None:
    """Require one of the given numbers of dimensions."""
    require_array(x, name)
    if len(x.shape) not in ndims:
        want = " or ".join(str(n) for n in ndims)
        raise InputError(f"{name} must have {want} dimension(s), got shape {tuple(x.shape)}. "
                         "Reshape it first, e.g. with .reshape(...).")


def normalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    """Turn a possibly negative axis into a positive one, or raise for an axis out of range."""
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise InputError(
            f"{name}={axis} is out of range for a {ndim}-dimensional input; "
            f"use a value in {-ndim}..{ndim - 1}."
        )
    return int(axis) % ndim


def require_int_range(value: int, low: int, high: int, name: str) -> None:
    """Require an integer in low..high inclusive."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise InputError(f"{name} must be an integer in {low}..{high}, got {value!r}. "
                         f"Pass a whole number from {low} to {high}.")


def require_positive(value: Any, name: str) -> float:
    """Require a finite number > 0; return it as a float."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not np.isfinite(v) or v <= 0:
        raise InputError(f"{name} must be a finite number > 0, got {value!r}. Pass a positive value "
                         "(compute it from finite data).")
    return v


def require_choice(value: Any, choices: tuple, name: str) -> None:
    """Require one of the listed values."""
    if value not in choices:
        raise InputError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}.")
