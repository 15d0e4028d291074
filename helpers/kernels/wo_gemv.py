"""Weight-only GEMV in CUDA C (``wo_gemv.cu``, compiled with cupy): W8A16 per channel, W4A16 per group, FP16; batch 1-8.

    w = prepare(weight_only.quantize_w4(w16, 128))     # offline: the magic W4 layout, FP16 group scales
    y = gemv(x, w)                                     # x (K,) or (M, K) FP16 on the GPU, M <= 8; y FP16
    y = gemv(x, w, norm_eps=1e-5, glu=True)            # fused RMSNorm of x and SwiGLU (gate rows, then up rows)
    y = gemv(x, w, residual=r)                         # fused residual add

`STEPS` is chapter 12's path from the naive kernel to the fast one; `step_config(step)` gives the layout and
launch of each step, so that the same weight can be timed through all of them. Launches go to torch's current
stream, so calls can be captured in a CUDA graph. `reference` is the exact float32 result the kernels must match.

Serves: core — used by chapter 12 and lab 13.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from helpers.errors import InputError
from helpers.kernels import pdl as pdl_launch
from helpers.kernels.cuda_source import HERE, cupy_module, torch_stream
from helpers.quant import weight_only as wo
from helpers.quant import wo_layout
from helpers.validation import require_choice, require_int_range

LAYOUTS = ("magic", "natural")
MAX_BATCH = 8
MAX_SPLIT = 16  # MAX_SPLIT in wo_gemv.cu
STEPS = ("naive", "vector loads", "magic conversion", "rows per warp", "split-K")


@dataclass(frozen=True)
class WoWeight:
    """A weight prepared for the CUDA kernels: bits (4, 8, 16), layout, device data, scales, shape, group."""

    bits: int
    layout: str
    data: torch.Tensor  # magic W4 int32 (N, K/8) | natural W4 uint8 (N, K/2) | W8 uint8/int8 (N, K) | FP16 (N, K)
    scale: torch.Tensor | None  # W4 FP16 (N, K/G) | W8 float32 (N,) | None
    n: int
    k: int
    group: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes one GEMV reads for the weight: codes plus scales."""
        extra = 0 if self.scale is None else self.scale.numel() * self.scale.element_size()
        return self.data.numel() * self.data.element_size() + extra

    def clone(self) -> "WoWeight":
        """An independent copy in its own memory (timing reads several copies, so that L2 does not serve them)."""
        return WoWeight(self.bits, self.layout, self.data.clone(), None if self.scale is None else self.scale.clone(),
                        self.n, self.k, self.group)


@dataclass(frozen=True)
class Config:
    """A launch: rows per block (R), warps per block that split K (S), magic conversion or not; naive = step 0."""

    rows: int = 4
    split: int = 4
    magic: bool = True
    naive: bool = False


def prepare(weight: Any, layout: str = "magic") -> WoWeight:
    """A W8Weight, W4Weight (group 32, 64, 128, ...) or FP16 tensor (N, K) in a kernel layout ('magic' or 'natural')."""
    require_choice(layout, LAYOUTS, "layout")
    if isinstance(weight, wo.W8Weight):
        q = weight.q
        data = wo_layout.magic_w8(q) if layout == "magic" else wo_layout.require_codes(q, -128, 127, 16, "INT8").contiguous()
        return WoWeight(8, layout, data, weight.scale.float().contiguous(), *q.shape)
    if isinstance(weight, wo.W4Weight):
        g = weight.group_size
        if g < 32 or g & (g - 1):
            raise InputError(f"the CUDA W4 kernels need group_size a power of two >= 32 (one lane's 16-byte load is 32 "
                             f"codes of one group); got {g}. Quantize with quantize_w4(w, 32), 64 or 128.")
        q = wo.unpack_int4(weight.packed)
        data = wo_layout.magic_w4(q) if layout == "magic" else wo_layout.natural_w4(q)
        return WoWeight(4, layout, data, weight.scale.half().contiguous(), *q.shape, weight.group_size)
    if isinstance(weight, torch.Tensor) and weight.ndim == 2 and weight.is_floating_point():
        if weight.shape[1] % 8:
            raise InputError(f"K={weight.shape[1]} must be a multiple of 8 for the FP16 kernel (16-byte loads).")
        return WoWeight(16, "magic", weight.half().contiguous(), None, *weight.shape)
    raise InputError(f"weight must be a W8Weight, a W4Weight (helpers.quant.weight_only) or a 2-D FP16 tensor, got "
                     f"{type(weight).__name__}. Quantize it first, e.g. prepare(quantize_w4(w, 128)).")


def step_config(step: str, rows: int = 4, split: int = 4) -> tuple[str, Config]:
    """(layout, Config) of one step of chapter 12's path; the last two take the rows and split they name."""
    require_choice(step, STEPS, "step")
    return {"naive": ("natural", Config(1, 1, False, True)), "vector loads": ("natural", Config(1, 1, False)),
            "magic conversion": ("magic", Config(1, 1)), "rows per warp": ("magic", Config(rows, 1)),
            "split-K": ("magic", Config(rows, split))}[step]


# The fastest (rows, split) per (bits, N, K) of a batch-1 sweep on an H200 (2026-12-01; chapter 12's benchmark,
# `--tune`), for LLaMA-7B/70B layers and the decode step's fused shapes; other shapes take the rule below.
TUNED: dict[tuple[int, int, int], tuple[int, int]] = {
    (4, 4096, 4096): (4, 4), (8, 4096, 4096): (2, 4), (16, 4096, 4096): (2, 8),
    (4, 11008, 4096): (4, 4), (8, 11008, 4096): (2, 4), (16, 11008, 4096): (2, 8),
    (4, 4096, 11008): (4, 4), (8, 4096, 11008): (2, 4), (16, 4096, 11008): (2, 4),
    (4, 28672, 8192): (4, 2), (8, 28672, 8192): (2, 8), (16, 28672, 8192): (2, 8),
    (4, 8192, 28672): (4, 2), (8, 8192, 28672): (2, 8), (16, 8192, 28672): (2, 8),
    (4, 12288, 4096): (8, 2), (8, 12288, 4096): (4, 2), (16, 12288, 4096): (2, 8),  # q, k, v with RMSNorm
    (4, 22016, 4096): (4, 2), (8, 22016, 4096): (2, 2), (16, 22016, 4096): (2, 8),  # gate and up with SwiGLU
}
FALLBACK = {4: (4, 4), 8: (2, 4), 16: (2, 8)}


def config_for(bits: int, n: int, k: int, batch: int = 1, magic: bool = True) -> Config:
    """The launch used for a (bits, N, K) weight at `batch` when none is given: the tuned (rows, split) of this shape,
    else FALLBACK; <= 2 rows above batch 2."""
    rows, split = TUNED.get((bits, n, k), FALLBACK[bits])
    if batch > 2:
        rows = min(rows, 2)
    return Config(rows, split, magic or bits == 16)


def default_config(w: WoWeight, batch: int = 1) -> Config:
    """The launch used when none is given (``config_for`` of the weight's bits, shape and layout)."""
    return config_for(w.bits, w.n, w.k, batch, w.layout == "magic")


def _check_2d(t: Any, name: str, m: int, n: int, device: torch.device) -> None:
    """t must be a contiguous FP16 tensor of m * n values on `device`."""
    if not isinstance(t, torch.Tensor) or t.dtype != torch.float16 or t.numel() != m * n or t.device != device \
            or not t.is_contiguous():
        raise InputError(f"{name} must be a contiguous FP16 tensor of {m} x {n} values on {device}, got "
                         f"{getattr(t, 'dtype', type(t).__name__)} {tuple(getattr(t, 'shape', ()))}.")


def _check(x: Any, w: WoWeight, cfg: Config, glu: bool, residual: Any, out: Any) -> tuple[int, int]:
    """Validate a call; return (batch M, outputs per row)."""
    if not isinstance(w, WoWeight):
        raise InputError(f"w must come from prepare(...), got {type(w).__name__}.")
    if not isinstance(cfg, Config):
        raise InputError(f"config must be a wo_gemv.Config, got {type(cfg).__name__}.")
    require_int_range(cfg.rows, 1, 8, "config.rows")
    require_int_range(cfg.split, 1, MAX_SPLIT, "config.split")
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float16 or x.ndim not in (1, 2) or x.shape[-1] != w.k:
        raise InputError(f"x must be FP16 activations (K,) or (M, K) with K={w.k}, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}.")
    m = 1 if x.ndim == 1 else x.shape[0]
    require_int_range(m, 1, MAX_BATCH, "x.shape[0] (the batch)")
    if w.data.device != x.device:
        raise InputError(f"x is on {x.device} but the weight on {w.data.device}; prepare the weight from a tensor "
                         f"on {x.device} (or move x there).")
    if cfg.naive and (m != 1 or glu or residual is not None or w.bits == 16 or w.layout != "natural"):
        raise InputError("the naive kernel (step 0) takes a natural-layout W8/W4 weight, batch 1, no fusions.")
    if cfg.magic != (w.layout == "magic") and w.bits != 16:
        raise InputError(f"config.magic={cfg.magic} needs the {'magic' if cfg.magic else 'natural'} layout; the "
                         f"weight is {w.layout}. Use prepare(weight, layout='{'magic' if cfg.magic else 'natural'}').")
    if glu and (cfg.rows % 2 or w.n % 2):
        raise InputError(f"glu=True needs an even number of weight rows and config.rows even (gate and up rows "
                         f"pair up); got N={w.n}, rows={cfg.rows}.")
    n_out = w.n // 2 if glu else w.n
    per_block = cfg.rows // 2 if glu else cfg.rows
    if n_out % per_block:
        raise InputError(f"config.rows={cfg.rows} does not tile the {n_out} outputs; pick rows dividing them.")
    if residual is not None:
        _check_2d(residual, "residual", m, n_out, x.device)
    if out is not None:
        _check_2d(out, "out", m, n_out, x.device)
    if not x.is_cuda:
        from helpers.errors import NoGPUError

        raise NoGPUError("the CUDA weight-only GEMV (x must be a CUDA tensor)")
    return m, n_out


def describe(w: WoWeight, cfg: Config) -> str:
    """A kernel and launch in words, the same in every table: 'w4a16 g128 magic r4 s4' or 'w8a16 naive'."""
    kind = {16: "fp16", 8: "w8a16", 4: f"w4a16 g{w.group}"}[w.bits]
    if cfg.naive:
        return f"{kind} naive"
    return f"{kind} {'magic' if cfg.magic else 'plain'} r{cfg.rows} s{cfg.split}"


def kernel_name(bits: int, cfg: Config, batch: int = 1, norm: bool = False) -> str:
    """The name of the kernel a launch uses: 'wo_naive_w4' or a template instance 'wo_gemv<4, true, 4, 1, false>'."""
    if cfg.naive:
        return f"wo_naive_w{bits}"
    return f"wo_gemv<{bits}, {str(cfg.magic).lower()}, {cfg.rows}, {batch}, {str(norm).lower()}>"


_functions: dict[str, Any] = {}


def compile_kernels(names: list[str]) -> None:
    """Compile the named kernels of wo_gemv.cu in one cupy module (one compiler run instead of one per kernel)."""
    todo = [n for n in dict.fromkeys(names) if n not in _functions]
    if not todo:
        return
    from helpers.device import require_gpu

    require_gpu("compiling wo_gemv.cu")
    templates = [n for n in todo if "<" in n]
    mod = cupy_module().RawModule(code=_source(), options=("--std=c++17", "-lineinfo"), name_expressions=templates)
    for n in todo:
        _functions[n] = mod.get_function(n)


def compiled(name: str) -> Any:
    """The compiled cupy function of one instance (``kernel_name``), compiling it first if needed."""
    compile_kernels([name])
    return _functions[name]


@functools.cache
def _source() -> str:
    """The CUDA source text."""
    return (HERE / "wo_gemv.cu").read_text(encoding="utf-8")


def _ptr(t: torch.Tensor | None) -> np.uint64:
    """A device pointer as the kernel argument (0 for None)."""
    return np.uint64(0 if t is None else t.data_ptr())


def gemv(x: torch.Tensor, w: WoWeight, *, norm_eps: float | None = None, residual: torch.Tensor | None = None,
         glu: bool = False, config: Config | None = None, out: torch.Tensor | None = None,
         pdl: bool = False) -> torch.Tensor:
    """y = W x for FP16 activations x (K,) or (M, K), M <= 8; optional fused RMSNorm of x, SwiGLU and residual add.
    pdl: launch with programmatic dependent launch where the GPU has it (``helpers.kernels.pdl``), so that the
    kernel's first weight loads may overlap the end of the kernel before (chapter 12 measures whether that pays)."""
    cfg = config or default_config(w, 1 if getattr(x, "ndim", 1) == 1 else x.shape[0])
    m, n_out = _check(x, w, cfg, glu, residual, out)
    y = out if out is not None else torch.empty((n_out,) if x.ndim == 1 else (m, n_out), dtype=torch.float16,
                                                device=x.device)
    name = kernel_name(w.bits, cfg, m, norm_eps is not None)
    fn = compiled(name)
    if not cfg.naive and 32 * cfg.split > fn.max_threads_per_block:
        raise InputError(f"config.split={cfg.split} asks for {32 * cfg.split} threads a block, but {name} uses "
                         f"{fn.num_regs} registers a thread, which allows {fn.max_threads_per_block}; use split <= "
                         f"{fn.max_threads_per_block // 32} (or fewer rows) for batch {m}.")
    with torch_stream():
        if cfg.naive:
            args: tuple = (_ptr(w.data), _ptr(w.scale), _ptr(x), _ptr(y), np.int32(w.n), np.int32(w.k))
            if w.bits == 4:
                args += (np.int32(w.group),)
            fn(((w.n + 3) // 4,), (32, 4), args)
        else:
            per_block = cfg.rows // 2 if glu else cfg.rows
            args = (_ptr(w.data), _ptr(w.scale), _ptr(x.contiguous()), _ptr(residual), _ptr(y), np.int32(n_out),
                    np.int32(w.k), np.int32(max(w.group, 1).bit_length() - 1), np.int32(int(glu)),
                    np.float32(1e-5 if norm_eps is None else norm_eps))
            if pdl and pdl_launch.supported():
                pdl_launch.launch(fn, (n_out // per_block,), (32, cfg.split), args)
            else:
                fn((n_out // per_block,), (32, cfg.split), args)
    return y


def dense(w: WoWeight) -> torch.Tensor:
    """The float32 weight (N, K) that a prepared weight stands for (codes times scales)."""
    if w.bits == 16:
        return w.data.float()
    if w.bits == 8:
        q = w.data.to(torch.int16) - 128 if w.layout == "magic" else w.data.to(torch.int16)
        return q.float() * w.scale[:, None].float()
    words = w.data.cpu().numpy()
    codes = wo_layout.np_unpack_magic_w4(words) if w.layout == "magic" else wo_layout.np_natural_w4(words)
    q = torch.from_numpy(codes).to(w.data.device).float()
    return q * w.scale.float().repeat_interleave(w.group, dim=1)


def reference(x: torch.Tensor, w: WoWeight, *, norm_eps: float | None = None, residual: torch.Tensor | None = None,
              glu: bool = False) -> torch.Tensor:
    """What the kernels compute, in float32 PyTorch on x's device, rounded to FP16 at the end."""
    v = x.float().reshape(-1, w.k)
    if norm_eps is not None:
        v = v * torch.rsqrt(v.pow(2).mean(dim=1, keepdim=True) + norm_eps)
    y = v @ dense(w).T
    if glu:
        y = torch.nn.functional.silu(y[:, : w.n // 2]) * y[:, w.n // 2:]
    if residual is not None:
        y = y + residual.float().reshape(y.shape)
    return y.reshape(*x.shape[:-1], y.shape[-1]).to(torch.float16)
