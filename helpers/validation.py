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
    if hasattr(x, "detach"):  # a torch tensor, any dtype and device
        import torch

        ok = torch.isfinite(x.detach()) if x.is_floating_point() else torch.ones_like(x, dtype=torch.bool)
    else:
        ok = np.isfinite(np.asarray(x))
    if not ok.all():
        bad = int((~ok).sum())
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
    """Require one of the listed values (4.0 or True does not stand in for the whole number 4 or 1)."""
    try:
        ok = bool(value in choices)
    except (TypeError, ValueError, RuntimeError):  # an array or tensor, compared with each choice
        ok = False
    for kind in ((bool, np.bool_), (float, np.floating)):
        if ok and isinstance(value, kind):
            ok = any(isinstance(c, kind) for c in choices)
    if not ok:
        raise InputError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}.")


def require_tensor(x: Any, name: str = "x") -> None:
    """Require a torch tensor (these helpers do not take numpy arrays or lists)."""
    import torch

    if not isinstance(x, torch.Tensor):
        raise InputError(f"{name} must be a torch tensor, got {type(x).__name__}. "
                         f"Convert it first: torch.as_tensor({name}) (torch.from_numpy for a numpy array).")


def require_size(value: Any, name: str, low: int = 1) -> int:
    """Require a whole number >= low (a bool or a float is refused); return it as an int."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InputError(f"{name} must be a whole number >= {low}, got {value!r}. Pass e.g. {name}={max(low, 1)}.")
    return int(value)


def require_real(value: Any, name: str, low: float = -np.inf, high: float = np.inf) -> float:
    """Require a finite real number in low..high inclusive (not a bool, not text); return it as a float."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not ok or not np.isfinite(value) or not low <= value <= high:
        raise InputError(f"{name} must be a finite number in [{low:g}, {high:g}], got {value!r}. "
                         "Pass a plain number in that range.")
    return float(value)


def require_values_in(x: Any, low: int, high: int, name: str, fix: str) -> None:
    """Require every value of an array or tensor to lie in low..high (integer codes, token ids)."""
    if int(np.prod(tuple(x.shape))) and (int(x.min()) < low or int(x.max()) > high):
        raise InputError(f"{name} holds values outside {low}..{high} (min {int(x.min())}, max {int(x.max())}); {fix}")


def require_callable(fn: Any, name: str, example: str) -> None:
    """Require something that can be called, e.g. a function or a lambda."""
    if not callable(fn):
        raise InputError(f"{name} must be a function, got {type(fn).__name__}. Pass e.g. {name}={example}.")


def require_float_tensor(x: Any, name: str, ndims: tuple[int, ...], what: str) -> None:
    """Require a non-empty floating-point torch tensor with one of `ndims` dimensions (`what` names its axes)."""
    require_tensor(x, name)
    if x.ndim not in ndims:
        raise InputError(f"{name} must be {what}, got shape {tuple(x.shape)}. "
                         "Reshape it first, e.g. with .reshape(...).")
    if not x.is_floating_point():
        raise InputError(f"{name} must be a floating-point torch tensor, got dtype {x.dtype}. "
                         f"Convert it first with {name}.float().")
    require_nonempty(x, name)


def require_activations(x: Any, k: int, name: str = "x") -> None:
    """Require a layer's input (..., K): a non-empty floating-point torch tensor whose last axis has k values."""
    require_float_tensor(x, name, tuple(range(1, 9)), f"a layer's input (..., K={k})")
    if x.shape[-1] != k:
        raise InputError(f"{name} has {x.shape[-1]} values along its last axis but the weight reads K={k}; "
                         "pass the layer's input (..., K), not its output.")


def require_int_tensor(x: Any, name: str, ndims: tuple[int, ...], fix: str) -> None:
    """Require a non-empty integer (not bool) torch tensor with one of `ndims` dimensions."""
    require_tensor(x, name)
    if x.ndim not in ndims or x.is_floating_point() or x.is_complex() or str(x.dtype) == "torch.bool":
        raise InputError(f"{name} must be a {' or '.join(map(str, ndims))}-D integer tensor, got {x.dtype} "
                         f"{tuple(x.shape)}; {fix}")
    require_nonempty(x, name)


def require_power_of_two(value: Any, name: str, high: int) -> int:
    """Require a power of 2 in 1..high (tile sizes, warps); return it as an int."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 < value <= high \
            or value & (value - 1):
        raise InputError(f"{name} must be a power of 2 up to {high} (tiles and warps come in powers of 2), "
                         f"got {value!r}; e.g. {name}=4.")
    return int(value)


def require_vector(t: Any, name: str, n: int, dtype: Any, device: Any, fix: str, contiguous: bool = False) -> None:
    """Require a torch tensor of n values, of `dtype` (None: any float), on `device`; metadata only (no GPU sync)."""
    require_tensor(t, name)
    ok = t.numel() == n and t.device == device and (t.is_contiguous() or not contiguous)
    if not ok or not (t.dtype == dtype if dtype is not None else t.is_floating_point()):
        want = f"a {'contiguous ' if contiguous else ''}{str(dtype or 'float').replace('torch.', '')} tensor"
        raise InputError(f"{name} must be {want} of {n} values on {device}, got {t.dtype} {tuple(t.shape)} on "
                         f"{t.device}; {fix}")


def require_instance(obj: Any, cls: type, name: str, fix: str) -> None:
    """Require an instance of `cls` (e.g. a quantized weight); `fix` says how to build one."""
    if not isinstance(obj, cls):
        raise InputError(f"{name} must be a {cls.__name__}, got {type(obj).__name__}; {fix}")
