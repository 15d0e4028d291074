"""Weight-only GEMM on tensor cores in CUDA C (``wo_gemm.cu``, compiled with cupy): W4A16 per group, W8A16 per channel.

    p = prepare(weight_only.quantize_w4(w16, 128))   # offline: the fragment layout of helpers.quant.wo_layout
    y = gemm(x, p)                                   # x (M, K) FP16 on the GPU, M = 1..64; y (M, N) FP16
    y = gemm(x, p, split_k=4, config="b")            # a launch chosen by hand; pick() chooses otherwise

The GEMV (``wo_gemv``) wins at batch 1-2; from batch 4 on this kernel reuses each dequantised weight for all M rows
on tensor cores. `pick(scheme, n, k, m)` returns the (config, split) of a measured table (``use_table``, written by
``python -m helpers.kernels.wo_gemm_check --out DIR``) or, without one, a rule that fills the SMs. `fill_split` is the
split-K whose blocks fill every SM's resident blocks (``wo_gemm_occupancy.blocks_per_sm``: the driver's occupancy,
or an estimate from the registers and shared memory an instance needs); the check times it beside the rule's.
Launches go to torch's current stream (CUDA-graph capturable); a split launch adds FP32 partial sums into a
per-(device, M x N) workspace that the last block (or a second pass) zeroes again, so two streams must not run the same
shape at once.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from helpers.errors import InputError
from helpers.kernels.cuda_source import HERE, cupy_module, torch_stream
from helpers.quant import weight_only as wo
from helpers.quant import wo_layout

SCHEMES = ("w4a16", "w8a16")
MAX_M = 64
MAX_SPLIT = 32  # slices of K a launch may have (wo_gemm.cu sets no limit; filling the SMs at N = 4096 takes > 16)
SMS = 132  # H100 SXM; the rules below ask the device when there is one


@dataclass(frozen=True)
class Config:
    """A compile-time launch shape: column tiles of 32 a block (`warps`), D tiles of 32 inputs a stage, pipeline
    stages, and `kw` warps a column tile (each multiplies D / kw consecutive tiles of every stage; their sums meet in
    shared memory)."""

    warps: int
    d: int
    stages: int
    kw: int = 1

    @property
    def threads(self) -> int:
        """Threads a block: 32 for each warp, kw warps for each of the `warps` column tiles."""
        return 32 * self.warps * self.kw


# D as effective_d allows; d, e and g put two warps on each column tile, which gives an SM twice the warps for the
# same grid (chapter 12's GEMM_PROFILE: at small M the GEMM's schedulers idle for want of warps); the measured table
# chooses among all six per case
CONFIGS = {"a": Config(4, 4, 3), "b": Config(8, 2, 4), "c": Config(4, 8, 3),
           "d": Config(4, 8, 3, kw=2), "e": Config(2, 8, 3, kw=2), "g": Config(4, 4, 3, kw=2)}
SHARED_BYTES = 48 * 1024  # static shared memory of a block at most
MAX_LOADS = 8  # 16-byte weight loads a lane keeps in flight per stage at most (registers)


def activation_bytes(stages: int, mt: int, d: int) -> int:
    """Shared memory of the activation buffers: STAGES x 16 MT rows x (32 D + 8) FP16 (xs in wo_gemm.cu)."""
    return stages * 16 * mt * (32 * d + 8) * 2


def reduction_bytes(c: Config) -> int:
    """Shared memory where a column tile's kw warps add their FP32 sums (red in wo_gemm.cu): none for kw = 1."""
    return (c.kw - 1) * c.warps * 16 * 32 * 4


def effective_d(config: str, bits: int, mt: int) -> int:
    """The config's D, halved until a stage's activations (and the kw warps' reduction buffer) fit the shared memory
    and a warp's loads the registers; never below kw (each of a column tile's warps takes D / kw tiles)."""
    c = CONFIGS[config]
    d, pieces = c.d, 1 if bits == 4 else 2
    while d > c.kw and (activation_bytes(c.stages, mt, d) + reduction_bytes(c) > SHARED_BYTES
                        or d // c.kw * pieces > MAX_LOADS):
        d //= 2
    return d


@dataclass(frozen=True)
class GemmWeight:
    """A weight in the fragment layout: bits, codes (flat), scales (W4 FP16 (K/G, N_pad), W8 FP32 (N_pad,)), shape."""

    bits: int
    data: torch.Tensor
    scale: torch.Tensor
    n: int
    k: int
    group: int = 0

    @property
    def n_pad(self) -> int:
        """N rounded up to the 32-column tile."""
        return wo_layout.padded(self.n)

    @property
    def scheme(self) -> str:
        """'w4a16' or 'w8a16'."""
        return f"w{self.bits}a16"

    @property
    def nbytes(self) -> int:
        """Bytes one call reads for the weight: codes plus scales."""
        return self.data.numel() * self.data.element_size() + self.scale.numel() * self.scale.element_size()

    def clone(self) -> "GemmWeight":
        """An independent copy in its own memory (timing reads several copies, so that L2 does not serve them)."""
        return replace(self, data=self.data.clone(), scale=self.scale.clone())


def prepare(weight: Any) -> GemmWeight:
    """A W4Weight (group 32, 64, 128, ...) or W8Weight (helpers.quant.weight_only) in the GEMM's fragment layout."""
    if isinstance(weight, wo.W8Weight):
        q = weight.q
        n_pad = wo_layout.padded(q.shape[0])
        s = torch.zeros(n_pad, dtype=torch.float32, device=q.device)
        s[: q.shape[0]] = weight.scale.float()
        return GemmWeight(8, wo_layout.gemm_w8(q), s, *q.shape)
    if isinstance(weight, wo.W4Weight):
        g = wo_layout.require_group(weight.group_size, "the W4 GEMM")
        q = wo.unpack_int4(weight.packed)
        return GemmWeight(4, wo_layout.gemm_w4(q), wo_layout.gemm_scales_w4(weight.scale), *q.shape, g)
    raise InputError(f"weight must be a W4Weight or W8Weight (helpers.quant.weight_only), got {type(weight).__name__}; "
                     "quantize it first, e.g. prepare(quantize_w4(w, 128)).")


def row_tiles(m: int) -> int:
    """Row tiles of 16 the kernel instance needs for M activation rows."""
    return -(-m // 16)


SWAP_MAX_M = 8  # up to this many rows the kernel can make the weights the mma's A operand and the rows its B (n = 8)
# Swapped operands at M <= SWAP_MAX_M (wo_gemm.cu, SWAP), on since wo_gemm_swap_check measured them on an H100
# (2026-12-07, two runs): W4A16 1.09x the plain launches at M = 4 and 1.13x at M = 8, each range above 1; W8A16 1.03x
# (above 1 in one run, not resolved in the other). Late scaling beside the plain swap: not resolved either way
# (README, chapter 12's tensor-core GEMM).
SWAPPED = [True]
LATE_SCALE = [True]  # swapped W4: scale each group's sums in FP32 instead of every weight in FP16 (wo_gemm.cu, LATE)


def swapped(m: int) -> bool:
    """True where the instance for M rows swaps the mma's operands (SWAPPED and M <= SWAP_MAX_M): 2 mma's per 16
    inputs instead of 4, where a 16-row A tile would hold at least 8 rows of zeros."""
    return SWAPPED[0] and m <= SWAP_MAX_M


def kernel_name(bits: int, m: int, config: str) -> str:
    """The template instance a launch uses, e.g. 'wo_gemm<4, 2, 4, 4, 3>'; with SWAPPED on and M <= 8 the swapped
    instance, e.g. 'wo_gemm<4, 1, 4, 4, 3, 1, true, true>' (W4 with LATE_SCALE: late-scaled too)."""
    c = CONFIGS[config]
    mt = row_tiles(m)
    late = ", true" if bits == 4 and LATE_SCALE[0] else ""
    kw = f", {c.kw}, true{late}" if swapped(m) else f", {c.kw}" if c.kw > 1 else ""
    return f"wo_gemm<{bits}, {mt}, {c.warps}, {effective_d(config, bits, mt)}, {c.stages}{kw}>"


def all_kernel_names() -> list[str]:
    """Every instance the course launches: 2 schemes x (swapped at M <= 8, then 1-4 row tiles) x the configs (without
    repeats)."""
    return list(dict.fromkeys(kernel_name(b, m, c) for b in (4, 8) for m in (SWAP_MAX_M, 16, 32, 48, 64)
                              for c in CONFIGS))


# ---- dispatch by measurement ----

_TABLE: dict[str, dict] = {}


def table_key(scheme: str, n: int, k: int, m: int) -> str:
    """The key of one measured case, e.g. 'w4a16 4096x4096 m8'."""
    return f"{scheme} {n}x{k} m{m}"


def use_table(path: str | Path) -> int:
    """Load a measured table (pick.json of wo_gemm_check); return how many cases it holds."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read the measured table {path}: {err}; write it with "
                         "python -m helpers.kernels.wo_gemm_check --out DIR.") from None
    set_table(rows)
    return len(rows)


def set_table(rows: dict[str, dict]) -> dict[str, dict]:
    """Dispatch by this measured table from now on ({table_key: {'config', 'split', ...}}, as
    ``wo_gemm_check.measure_table`` returns it); the table in use before, to put back with set_table."""
    before = dict(_TABLE)
    _TABLE.clear()
    _TABLE.update(rows)
    return before


@functools.cache
def sm_count() -> int:
    """Streaming multiprocessors of the current GPU (SMS without one)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return SMS


def column_blocks(n: int, config: str) -> int:
    """Blocks one slice of K launches: N padded to 32 columns a warp, WARPS warps a block."""
    return -(-wo_layout.padded(n) // (32 * CONFIGS[config].warps))


def most_split(k: int, config: str) -> int:
    """The largest split-K that leaves every slice at least 2 pipeline stages of the config's D (and <= MAX_SPLIT)."""
    return max(1, min(MAX_SPLIT, k // 32 // (2 * CONFIGS[config].d)))


def rule_split(n: int, k: int, config: str, sms: int = SMS) -> int:
    """Split-K that makes about two blocks per SM when the columns alone make fewer (at least 2 stages a slice)."""
    return max(1, min(most_split(k, config), round(2 * sms / column_blocks(n, config))))


def fill_split(n: int, k: int, config: str, blocks_per_sm: int, sms: int = SMS) -> int:
    """Split-K whose blocks fill the SMs' resident blocks in one wave (sms x blocks_per_sm), within most_split.

    At small M the GEMM's warps seldom wait for their loads but leave the SM's schedulers idle for want of warps to
    interleave (Nsight Compute, chapter 12's GEMM_PROFILE); more blocks give them more, and cost partial sums, so
    the check times the split that fills every SM's resident blocks beside the rule's two a SM.
    """
    if isinstance(blocks_per_sm, bool) or not isinstance(blocks_per_sm, int) or blocks_per_sm < 1:
        raise InputError(f"blocks_per_sm must be a whole number >= 1, got {blocks_per_sm!r}; take it from "
                         "wo_gemm_occupancy.blocks_per_sm(bits, m, config).")
    return max(1, min(most_split(k, config), sms * blocks_per_sm // column_blocks(n, config)))


def pick(scheme: str, n: int, k: int, m: int) -> tuple[str, int]:
    """(config, split) for one case: the measured table's fastest where it has the case, else config 'a' and the rule."""
    row = _TABLE.get(table_key(scheme, n, k, m))
    if row and row.get("config") in CONFIGS:
        return row["config"], int(row["split"])
    return "a", rule_split(n, k, "a", sm_count())


def measured(scheme: str, n: int, k: int, m: int) -> dict | None:
    """The measured table's row of the case, or None."""
    return _TABLE.get(table_key(scheme, n, k, m))


def fastest(scheme: str, n: int, k: int, m: int) -> str | None:
    """Which course kernel the measured table found fastest for the case ('gemm', 'gemv', 'triton'), or None."""
    row = measured(scheme, n, k, m)
    return row.get("fastest") if row else None


# ---- the launch ----

_functions: dict[str, Any] = {}
_workspaces: dict[tuple, torch.Tensor] = {}
MAX_BLOCKS_X = 4096  # column blocks a split launch may have (one arrival counter each)
FUSED_FINISH = [True]  # split-K finishes in the kernel's last block (False: a second pass, wo_gemm_finish)


@functools.cache
def source() -> str:
    """The CUDA source text of ``wo_gemm.cu``."""
    return (HERE / "wo_gemm.cu").read_text(encoding="utf-8")


def compile_kernels(names: list[str] | None = None) -> None:
    """Compile the named instances (default: all) and the finishing pass in one cupy module."""
    todo = [n for n in dict.fromkeys(names or all_kernel_names()) if n not in _functions]
    if not todo:
        return
    from helpers.device import require_gpu

    require_gpu("compiling wo_gemm.cu")
    mod = cupy_module().RawModule(code=source(), options=("--std=c++17", "-lineinfo"), name_expressions=todo)
    for n in todo:
        _functions[n] = mod.get_function(n)
    _functions.setdefault("wo_gemm_finish", mod.get_function("wo_gemm_finish"))


def compiled(name: str) -> Any:
    """The compiled cupy function of one instance (e.g. kernel_name(4, 8, 'a')), compiling it first if needed."""
    compile_kernels([name])
    return _functions[name]


def _launch_inputs(x: Any, p: Any, out: Any) -> tuple[int, torch.Tensor, torch.Tensor]:
    """Validate a call's activations, prepared weight and `out`; return M, x contiguous and 16-byte aligned, and y
    (`out` or a new FP16 (M, N))."""
    if not isinstance(p, GemmWeight):
        raise InputError(f"the weight must come from wo_gemm.prepare(...), got {type(p).__name__}; "
                         "e.g. prepare(quantize_w4(w, 128)).")
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float16 or x.ndim != 2 or x.shape[1] != p.k:
        raise InputError(f"x must be FP16 activations (M, K) with K={p.k}, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}.")
    m = x.shape[0]
    if not 1 <= m <= MAX_M:
        raise InputError(f"the GEMM takes M = 1..{MAX_M} activation rows, got {m}; split the batch.")
    if x.device != p.data.device:
        raise InputError(f"x is on {x.device} but the weight on {p.data.device}; prepare the weight from a tensor on "
                         f"{x.device} (or move x there).")
    if out is not None and (not isinstance(out, torch.Tensor) or out.dtype != torch.float16 or out.device != x.device
                            or tuple(out.shape) != (m, p.n) or not out.is_contiguous()):
        raise InputError(f"out must be a contiguous FP16 tensor ({m}, {p.n}) on {x.device}, got "
                         f"{getattr(out, 'dtype', type(out).__name__)} {tuple(getattr(out, 'shape', ()))}.")
    if not x.is_cuda:
        from helpers.errors import NoGPUError

        raise NoGPUError("the CUDA weight-only GEMM (x must be a CUDA tensor)")
    x = x.contiguous()
    if x.data_ptr() % 16:
        x = x.clone()  # the kernels load aligned pieces of x (cp.async: 16 bytes)
    return m, x, out if out is not None else torch.empty((m, p.n), dtype=torch.float16, device=x.device)


def _ptr(t: torch.Tensor | None) -> np.uint64:
    """A device pointer as the kernel argument (0 for None)."""
    return np.uint64(0 if t is None else t.data_ptr())


def _workspace(device: torch.device, numel: int) -> torch.Tensor:
    """The zeroed FP32 workspace of split launches (each call leaves it zero)."""
    key = (device, numel)
    if key not in _workspaces:
        _workspaces[key] = torch.zeros(numel, dtype=torch.float32, device=device)
    return _workspaces[key]


def _counters(device: torch.device) -> torch.Tensor:
    """The zeroed arrival counters of fused split-K (the last block resets its own)."""
    key = (device, "arrived")
    if key not in _workspaces:
        _workspaces[key] = torch.zeros(MAX_BLOCKS_X, dtype=torch.int32, device=device)
    return _workspaces[key]


def gemm(x: torch.Tensor, p: GemmWeight, split_k: int | None = None, config: str | None = None,
         out: torch.Tensor | None = None, fused_finish: bool | None = None) -> torch.Tensor:
    """y = x W^T for FP16 x (M, K), M = 1..64, and a prepared weight; FP16 y (M, N).

    With split_k > 1 the slices' sums meet in an FP32 workspace; fused_finish (default FUSED_FINISH) lets the last
    block convert them, otherwise a second kernel does.
    """
    m0 = x.shape[0] if isinstance(x, torch.Tensor) and x.ndim == 2 else 1
    chosen = pick(p.scheme, p.n, p.k, m0) if isinstance(p, GemmWeight) else ("a", 1)
    config = chosen[0] if config is None else config
    split_k = chosen[1] if split_k is None else split_k
    if isinstance(p, GemmWeight) and config not in CONFIGS:
        raise InputError(f"config must be one of {', '.join(CONFIGS)}, got {config!r}.")
    if isinstance(split_k, bool) or not isinstance(split_k, int) or not 1 <= split_k <= MAX_SPLIT:
        raise InputError(f"split_k must be a whole number 1..{MAX_SPLIT}, got {split_k!r}.")
    m, x, y = _launch_inputs(x, p, out)
    name = kernel_name(p.bits, m, config)
    compile_kernels([name])
    c = CONFIGS[config]
    ws = _workspace(x.device, m * p.n) if split_k > 1 else None
    fused = FUSED_FINISH[0] if fused_finish is None else bool(fused_finish)
    blocks = -(-p.n_pad // (32 * c.warps))
    arrived = _counters(x.device) if ws is not None and fused and blocks <= MAX_BLOCKS_X else None
    gshift = max(p.group, 1).bit_length() - 1
    with torch_stream():
        _functions[name]((blocks, split_k), (c.threads,),
                         (_ptr(p.data), _ptr(p.scale), _ptr(x), _ptr(y), _ptr(ws), _ptr(arrived), np.int32(m),
                          np.int32(p.n), np.int32(p.n_pad), np.int32(p.k), np.int32(gshift)))
        if ws is not None and arrived is None:
            _functions["wo_gemm_finish"]((min(1024, -(-m * p.n // 256)),), (256,), (_ptr(ws), _ptr(y), np.int32(m * p.n)))
    return y


def dense(p: GemmWeight) -> torch.Tensor:
    """The float32 weight (N, K) the kernel multiplies by: W4 fp16(q * s) per element, W8 q * s (scale in FP32)."""
    from helpers.kernels import wo_gemm_twin as twin

    return torch.from_numpy(twin.np_dense(p.bits, p.data.cpu().numpy(), p.scale.cpu().numpy(), p.n, p.k, p.group)) \
        .to(p.data.device)


def reference(x: torch.Tensor, p: GemmWeight, weight: torch.Tensor | None = None) -> torch.Tensor:
    """What the kernel computes, in float32 PyTorch on x's device, rounded to FP16 at the end; `weight` is
    ``dense(p)`` where the caller already has it (the twin makes it on the CPU: 0.3-0.6 s for a 4096×4096 weight on
    a 2-core machine, and several times that for LLaMA-7B's larger matrices)."""
    return (x.float() @ (dense(p) if weight is None else weight).T).to(torch.float16)
