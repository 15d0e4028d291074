"""Size accounting: bytes of FP32 vs INT8 weights and activations, counted and measured.

Serves: core — used by chapter 5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from helpers.errors import InputError
from helpers.validation import require_choice, require_int_range

BYTES_PER = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def tensor_bytes(numel: int, dtype: str = "fp32") -> float:
    """Bytes of `numel` values stored as `dtype` ('fp32', 'fp16', 'bf16', 'fp8', 'int8', 'int4')."""
    require_choice(dtype, tuple(BYTES_PER), "dtype")
    require_int_range(int(numel), 0, 2**62, "numel")
    return numel * BYTES_PER[dtype]


def weight_bytes(shapes: Mapping[str, Sequence[int]], dtype: str = "int8", per_channel: bool = True,
                 scale_dtype: str = "fp32") -> dict[str, float]:
    """Weights' bytes per layer as `dtype`, including one scale per output channel (or per tensor)."""
    if not shapes:
        raise InputError("shapes is empty: pass {layer name: weight shape}.")
    out = {}
    for name, shape in shapes.items():
        n = int(np.prod(shape))
        scales = (shape[0] if per_channel and len(shape) > 1 else 1) if dtype not in ("fp32",) else 0
        out[name] = tensor_bytes(n, dtype) + tensor_bytes(scales, scale_dtype)
    return out


def model_size_table(shapes: Mapping[str, Sequence[int]], activation_numel: int = 0,
                     dtypes: Sequence[str] = ("fp32", "int8", "int4")) -> list[dict[str, Any]]:
    """Rows of total weight and activation bytes per dtype, with the ratio to FP32."""
    rows = []
    base = None
    for dt in dtypes:
        w = sum(weight_bytes(shapes, dt).values())
        a = tensor_bytes(activation_numel, dt)
        base = base or (w + a)
        rows.append({"dtype": dt, "weights_kB": w / 1e3, "activations_kB": a / 1e3,
                     "fp32_over_this": base / (w + a)})
    return rows


def shapes_of(weights: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """{name: shape} of a dict of arrays or a torch state_dict (weights only, 2-D and up)."""
    return {k: tuple(v.shape) for k, v in weights.items() if len(getattr(v, "shape", ())) >= 2}


def measured_copy_ratio(numel: int = 1 << 26, repeats: int = 20, device: str = "cpu") -> dict[str, float]:
    """Time to copy `numel` values as FP32 and as INT8 (same count): bytes, GB/s and the time ratio.

    Times are the 10th percentile of the repeats: robust to other processes on a shared machine.
    """
    from helpers.bench import bandwidth_gbs, timeit

    require_int_range(numel, 1, 2**34, "numel")
    require_choice(device, ("cpu", "cuda"), "device")
    out: dict[str, float] = {}
    for name in ("fp32", "int8"):
        if device == "cpu":  # numpy's copy is a plain memcpy
            src = np.ones(numel, dtype=np.float32 if name == "fp32" else np.int8)
            dst = np.empty_like(src)
            t = timeit(lambda: np.copyto(dst, src), backend="cpu", warmup=3, repeats=repeats)
        else:
            import torch

            src = torch.ones(numel, dtype=torch.float32 if name == "fp32" else torch.int8, device=device)
            dst = torch.empty_like(src)
            t = timeit(lambda: dst.copy_(src), backend="torch", warmup=3, repeats=repeats)
        nbytes = numel * (4 if name == "fp32" else 1)
        seconds = t.percentile_s(10)
        out[f"{name}_bytes"] = float(nbytes)
        out[f"{name}_ms"] = seconds * 1e3
        out[f"{name}_gbs"] = bandwidth_gbs(2 * nbytes, seconds)
    out["fp32_over_int8_time"] = out["fp32_ms"] / out["int8_ms"]
    out["fp32_over_int8_bytes"] = out["fp32_bytes"] / out["int8_bytes"]
    return out
