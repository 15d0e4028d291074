"""The warp-flat weight-only GEMM on tensor cores (``wo_flat.cu``): every warp streams its own equal run of weight
tiles, with no shared memory and no block barrier; the same prepared weights and answer as ``wo_gemm``.

    p = wo_gemm.prepare(weight_only.quantize_w4(w16, 128))
    y = gemm(x, p)                     # x (M, K) FP16 on the GPU, M = 1..64; y (M, N) FP16
    y = gemm(x, p, "f4", blocks=264)   # a config and a grid chosen by hand
    y = run(x, p)                      # the measured table's choice between this family and wo_gemm's launches

The work is U = (N_pad / 32) x (K / 32) units (a column tile of 32 outputs x a chunk of 32 inputs), column-tile-major;
warp w of W owns units [w U / W, (w + 1) U / W) (`runs`). The grid holds as many warps as the SMs keep resident
(`blocks_per_sm`: the driver's occupancy, or an estimate without a GPU), never more than there are units. A warp
whose run covers a whole column tile writes FP16; partial tiles meet in the FP32 workspace of ``wo_gemm`` and a
per-tile arrival counter (`segments` lists each warp's pieces; the warp that completes a tile converts it and zeroes
workspace and counter). A config is the 16-byte loads a lane keeps in flight (the ring) and whether M <= 8 runs
with the operands swapped (weights as the mma's 16-row operand, tokens as its 8 columns). Launches go to torch's
current stream (CUDA-graph capturable); two streams must not run the same shape at once.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from helpers.errors import InputError
from helpers.kernels import wo_gemm as G
from helpers.kernels.occupancy import HOPPER, occupancy
from helpers.quant import wo_layout

WARPS = 4  # warps a block: the block only packs independent warps
SWAP_MAX_M = 8  # the swapped operands hold 8 tokens


@dataclass(frozen=True)
class FlatConfig:
    """A compile-time shape: 16-byte weight loads a lane keeps in flight (W8 loads 2 a unit), and whether the
    operands are swapped at M <= 8."""

    loads: int
    swap: bool


CONFIGS = {"f4": FlatConfig(4, False), "f8": FlatConfig(8, False), "s4": FlatConfig(4, True),
           "s8": FlatConfig(8, True)}
DEFAULT = "s8"


def _require_config(config: Any) -> FlatConfig:
    """The config's shape, or InputError."""
    if config not in CONFIGS:
        raise InputError(f"the flat GEMM's config must be one of {', '.join(CONFIGS)}, got {config!r}.")
    return CONFIGS[config]


def ring_units(bits: int, config: str) -> int:
    """Units a lane's ring holds: the config's loads over the 16-byte pieces of a unit (1 for W4, 2 for W8)."""
    return max(1, _require_config(config).loads // (1 if bits == 4 else 2))


def swapped(config: str, m: int) -> bool:
    """True when the instance for M rows runs with the operands swapped (a swapping config and M <= 8)."""
    return _require_config(config).swap and m <= SWAP_MAX_M


def kernel_name(bits: int, m: int, config: str) -> str:
    """The template instance a launch uses, e.g. 'wo_flat<4, 1, true, 8, 4>'."""
    swap = swapped(config, m)
    return f"wo_flat<{bits}, {G.row_tiles(m)}, {'true' if swap else 'false'}, {ring_units(bits, config)}, {WARPS}>"


def all_kernel_names() -> list[str]:
    """Every instance the course launches: 2 schemes x (swapped at M <= 8, 4 row tiles) x the configs, once each."""
    return list(dict.fromkeys(kernel_name(b, m, c) for b in (4, 8) for m in (1, 16, 32, 48, 64) for c in CONFIGS))


# ---- the work split (the kernel's arithmetic, checked on the CPU) ----

def unit_count(n: int, k: int) -> int:
    """Units of the weight: column tiles of 32 (N padded) x chunks of 32 inputs."""
    return wo_layout.padded(n) // 32 * (k // 32)


def runs(units: int, warps: int) -> list[tuple[int, int]]:
    """Each warp's run [u0, u1) of units, as wo_flat.cu computes it (64-bit products, floor division)."""
    return [(w * units // warps, (w + 1) * units // warps) for w in range(warps)]


def segments(u0: int, u1: int, nch: int) -> list[tuple[int, int, int]]:
    """The pieces of one run that the kernel flushes: (column tile, first chunk, chunks), in order."""
    out, u = [], u0
    while u < u1:
        tile, c = divmod(u, nch)
        chunks = min(nch - c, u1 - u)
        out.append((tile, c, chunks))
        u += chunks
    return out


def grid_blocks(n: int, k: int, per_sm: int, sms: int) -> int:
    """Blocks of a launch: per_sm blocks on each of the sms SMs, but no more warps than units."""
    return max(1, min(per_sm * sms, -(-unit_count(n, k) // WARPS)))


# ---- how many blocks an SM holds ----
BOOKKEEPING_REGISTERS = 33  # indices, pointers, the load cursor, x addresses (fitted to ptxas for W4; tested)


def estimated_registers(bits: int, m: int, config: str) -> int:
    """Registers a thread needs by count: the ring (4 a 16-byte load, W4 2 more a unit for its scales), then 12 for
    the swapped operands (8 FP32 sums, 2 activations, the scales in FP16 pairs) or 37 a row tile (16 FP32 sums, 8
    activations, and what the compiler keeps beside them), plus BOOKKEEPING_REGISTERS. ptxas decides; on a GPU
    blocks_per_sm asks the driver."""
    mt, units = G.row_tiles(m), ring_units(bits, config)
    ring = 4 * units * (1 if bits == 4 else 2) + (2 * units if bits == 4 else 0)
    data = ring + (12 if swapped(config, m) else 37 * mt)
    return min(HOPPER.max_registers_per_thread, data + BOOKKEEPING_REGISTERS)


def estimated_blocks_per_sm(bits: int, m: int, config: str) -> int:
    """Blocks an SM holds by the estimate (the occupancy calculator; no shared memory)."""
    return max(1, occupancy(32 * WARPS, estimated_registers(bits, m, config), 0).blocks_per_sm)


@functools.cache
def _driver_blocks_per_sm(name: str) -> int:
    """The driver's occupancy of a compiled instance."""
    compile_kernels([name])
    return int(G.cupy_module().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        _functions[name].kernel.ptr, 32 * WARPS, 0))


def blocks_per_sm(bits: int, m: int, config: str) -> tuple[int, str]:
    """(blocks of the instance one SM holds at once, who says so: 'driver' on a GPU, else 'estimate')."""
    if bits not in (4, 8) or not 1 <= m <= G.MAX_M:
        raise InputError(f"blocks_per_sm takes bits 4 or 8 and M = 1..{G.MAX_M}, got {bits!r}, {m!r}.")
    _require_config(config)
    if not torch.cuda.is_available():
        return estimated_blocks_per_sm(bits, m, config), "estimate"
    return _driver_blocks_per_sm(kernel_name(bits, m, config)), "driver"


# ---- the launch ----

_functions: dict[str, Any] = {}
_counters: dict[tuple, torch.Tensor] = {}


def compile_kernels(names: list[str]) -> None:
    """Compile the named instances in one cupy module."""
    todo = [n for n in dict.fromkeys(names) if n not in _functions]
    if not todo:
        return
    from helpers.device import require_gpu

    require_gpu("compiling wo_flat.cu")
    mod = G.cupy_module().RawModule(code=G.source("wo_flat"), options=("--std=c++17", "-lineinfo"),
                                    name_expressions=todo)
    for n in todo:
        _functions[n] = mod.get_function(n)


def _arrived(device: torch.device, tiles: int) -> torch.Tensor:
    """The zeroed per-column-tile arrival counters (the warp that completes a tile resets its own)."""
    key = (device, tiles)
    if key not in _counters:
        _counters[key] = torch.zeros(tiles, dtype=torch.int32, device=device)
    return _counters[key]


def gemm(x: torch.Tensor, p: G.GemmWeight, config: str | None = None, blocks: int | None = None,
         out: torch.Tensor | None = None) -> torch.Tensor:
    """y = x W^T for FP16 x (M, K), M = 1..64, and a weight of ``wo_gemm.prepare``; FP16 y (M, N).

    config: one of CONFIGS (default DEFAULT); blocks: the grid (default: every resident block, `grid_blocks`).
    """
    config = DEFAULT if config is None else config
    _require_config(config)
    if blocks is not None and (isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1):
        raise InputError(f"blocks must be a whole number >= 1 (the grid), got {blocks!r}.")
    m, x, y = G.launch_inputs(x, p, out)
    name = kernel_name(p.bits, m, config)
    compile_kernels([name])
    if blocks is None:
        blocks = grid_blocks(p.n, p.k, blocks_per_sm(p.bits, m, config)[0], G.sm_count())
    ws = G.workspace(x.device, (SWAP_MAX_M if swapped(config, m) else m) * p.n_pad)
    arrived = _arrived(x.device, p.n_pad // 32)
    gshift = max(p.group, 1).bit_length() - 1
    with G.launch_stream():
        _functions[name]((blocks,), (32 * WARPS,),
                         (G.pointer(p.data), G.pointer(p.scale), G.pointer(x), G.pointer(y), G.pointer(ws), G.pointer(arrived),
                          np.int32(m), np.int32(p.n), np.int32(p.n_pad), np.int32(p.k), np.int32(gshift)))
    return y


# ---- dispatch by measurement ----

def choice(scheme: str, n: int, k: int, m: int) -> tuple[str, str, int] | None:
    """('flat', config, blocks per SM) where the measured table found this family faster than wo_gemm's launch
    for the case; ('gemm', config, split) where it found wo_gemm's; None without a measured row."""
    row = G.measured(scheme, n, k, m)
    if not row:
        return None
    flat = row.get("flat")
    if flat and flat.get("config") in CONFIGS and ("us" not in row or flat["us"] < row["us"]):
        return "flat", flat["config"], int(flat["blocks"])
    return ("gemm", row["config"], int(row["split"])) if row.get("config") in G.CONFIGS else None


def run(x: torch.Tensor, p: G.GemmWeight) -> torch.Tensor:
    """y = x W^T by the measured table's faster family for the case (``wo_gemm.gemm`` without a row)."""
    m = x.shape[0] if isinstance(x, torch.Tensor) and x.ndim == 2 else 1
    chosen = choice(p.scheme, p.n, p.k, m) if isinstance(p, G.GemmWeight) else None
    if chosen and chosen[0] == "flat":
        return gemm(x, p, chosen[1], grid_blocks(p.n, p.k, chosen[2], G.sm_count()))
    return G.gemm(x, p)


CHECK_GRIDS = (None, 1, 3)  # the full grid, and tiny ones whose warps cross column tiles or own whole ones


def check_launches(bits: int, m: int) -> list[tuple[str, int | None]]:
    """The launches (config, blocks) a correctness check runs at M: each distinct instance on every CHECK_GRIDS."""
    names: dict[str, str] = {}
    for c in CONFIGS:
        names.setdefault(kernel_name(bits, m, c), c)
    return [(c, b) for c in names.values() for b in CHECK_GRIDS]


def candidates(bits: int, m: int) -> list[tuple[str, int]]:
    """The launches (config, blocks per SM) one case times: every config at full occupancy (each instance once),
    and the 8-load configs at half of it."""
    out: dict[str, tuple[str, int]] = {}
    for c in CONFIGS:
        out.setdefault(kernel_name(bits, m, c), (c, blocks_per_sm(bits, m, c)[0]))
    for c in ("s8", "f8"):
        per_sm = blocks_per_sm(bits, m, c)[0]
        if per_sm > 1:
            out.setdefault(kernel_name(bits, m, c) + " half", (c, per_sm // 2))
    return list(out.values())
