"""Plain data on the wire: numbers, strings, lists, dicts and numpy arrays as JSON (never pickles).

What a student's kernel sends back to the grader, what the grader sends in, and the visible cases
shipped with the labs all use this one format. Decoding builds only plain Python values and numpy
arrays, so a crafted message can at worst be wrong data, never code.

Serves: the labs (self-checks) and instructors (batch grading).
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np

from helpers.errors import InputError

MAX_BYTES = 64 << 20  # a message larger than this is refused
_KINDS = "biufc?"  # numeric and bool dtypes only: no object arrays


def _enc(x: Any) -> Any:
    """A JSON-ready version of x (tagged dicts for arrays, tuples, bytes and odd floats)."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in _KINDS:
            raise InputError(f"cannot send an array of dtype {x.dtype}; return numbers, not objects.")
        a = np.ascontiguousarray(x)
        return {"$array": [a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode()]}
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"$float": repr(x)}
    if isinstance(x, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(x)).decode()}
    if isinstance(x, tuple):
        return {"$tuple": [_enc(v) for v in x]}
    if isinstance(x, list):
        return [_enc(v) for v in x]
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise InputError("dict keys must be strings to travel as plain data.")
        return {"$dict": {k: _enc(v) for k, v in x.items()}}
    raise InputError(f"cannot send a {type(x).__name__} as plain data; return numbers, strings, "
                     f"lists or numpy arrays.")


def _dec(x: Any) -> Any:
    """Inverse of _enc."""
    if isinstance(x, list):
        return [_dec(v) for v in x]
    if not isinstance(x, dict):
        return x
    if len(x) != 1:
        raise InputError("malformed plain-data message.")
    (tag, v), = x.items()
    if tag == "$array":
        dtype, shape, data = v
        dt = np.dtype(str(dtype))
        if dt.kind not in _KINDS:
            raise InputError(f"refused an array of dtype {dt}.")
        return np.frombuffer(base64.b64decode(data), dtype=dt).reshape([int(s) for s in shape]).copy()
    if tag == "$float":
        return float(v)
    if tag == "$bytes":
        return base64.b64decode(v)
    if tag == "$tuple":
        return tuple(_dec(e) for e in v)
    if tag == "$dict":
        return {str(k): _dec(e) for k, e in v.items()}
    raise InputError(f"unknown tag {tag!r} in a plain-data message.")


def dumps(x: Any, indent: int | None = None) -> str:
    """Encode plain data as a JSON string."""
    return json.dumps(_enc(x), allow_nan=False, indent=indent, separators=None if indent else (",", ":"))


def roundtrip(x: Any) -> Any:
    """x as it arrives after travelling as plain data (tuples stay tuples, numpy scalars become numbers)."""
    return loads(dumps(x))


def loads(text: str | bytes) -> Any:
    """Decode a JSON string made by dumps() (refusing anything too large or not plain)."""
    if len(text) > MAX_BYTES:
        raise InputError(f"a plain-data message of {len(text):,} bytes is over the {MAX_BYTES:,} limit.")
    return _dec(json.loads(text))
