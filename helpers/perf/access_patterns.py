"""Which bytes a warp touches, and what that costs, drawn without a GPU (GPU-Puzzles' show() spirit).

Global memory moves 32-byte sectors (four to a 128-byte line): a warp pays for every sector its
lanes touch. Shared memory has 32 banks of 4-byte words: lanes that hit different words of one bank
wait for each other. Index functions map a lane (0..31, plus warp * 32) to an element index.

Serves: core — used by chapters 3, 4, 11 and labs 02, 03, 11–13.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from helpers.errors import InputError

SECTOR = 32
LINE = 128
BANKS = 32
WORD = 4
WARP = 32


def warp_addresses(index: Callable[[int], int | None], warp: int = 0, itemsize: int = 4) -> np.ndarray:
    """Byte addresses the 32 lanes of `warp` access (index(thread) gives an element, None = idle lane)."""
    if not callable(index):
        raise InputError("index must be a function thread -> element index, e.g. lambda t: 2 * t.")
    if itemsize not in (1, 2, 4, 8, 16):
        raise InputError(f"itemsize must be 1, 2, 4, 8 or 16 bytes, got {itemsize!r}.")
    out = []
    for lane in range(WARP):
        e = index(warp * WARP + lane)
        out.append(-1 if e is None else int(e) * itemsize)
    return np.array(out, dtype=np.int64)


def sectors(addresses: Iterable[int], itemsize: int = 4) -> int:
    """Distinct 32-byte sectors covered by accesses of `itemsize` bytes at these addresses (-1 = idle)."""
    return len(_units(addresses, itemsize, SECTOR))


def lines(addresses: Iterable[int], itemsize: int = 4) -> int:
    """Distinct 128-byte lines covered by the accesses."""
    return len(_units(addresses, itemsize, LINE))


def _units(addresses: Iterable[int], itemsize: int, unit: int) -> set[int]:
    """The set of `unit`-byte blocks the accesses overlap."""
    out: set[int] = set()
    for a in addresses:
        if a >= 0:
            out.update(range(a // unit, (a + itemsize - 1) // unit + 1))
    return out


def efficiency(addresses: Iterable[int], itemsize: int = 4) -> float:
    """Useful bytes ÷ bytes moved in sectors (1.0 = perfectly coalesced)."""
    addrs = [a for a in addresses if a >= 0]
    if not addrs:
        return 1.0
    return len(set(addrs)) * itemsize / (sectors(addrs, itemsize) * SECTOR)


def bank_conflict_degree(byte_addresses: Iterable[int]) -> int:
    """Shared-memory replays of one warp access: the most distinct words any bank serves (1 = none)."""
    per_bank: dict[int, set[int]] = {}
    for a in byte_addresses:
        if a >= 0:
            word = a // WORD
            per_bank.setdefault(word % BANKS, set()).add(word)
    return max((len(w) for w in per_bank.values()), default=1)


def stride_rows(strides: Sequence[int], itemsize: int = 4) -> list[dict]:
    """For each stride: sectors and lines one warp needs, and the fraction of moved bytes used."""
    rows = []
    for s in strides:
        addrs = warp_addresses(lambda t, s=s: t * s, itemsize=itemsize)
        rows.append({"stride": s, "sectors": sectors(addrs, itemsize), "lines": lines(addrs, itemsize),
                     "useful": round(efficiency(addrs, itemsize), 3)})
    return rows


def tile_column_conflicts(pitch: int, rows: int = 32) -> int:
    """Bank-conflict degree when 32 lanes read one column of a float32 tile with `pitch` columns."""
    if not isinstance(pitch, (int, np.integer)) or pitch < 1:
        raise InputError(f"pitch must be a positive number of columns, got {pitch!r}.")
    return bank_conflict_degree([r * pitch * WORD for r in range(min(rows, WARP))])


def summarize(trace: Any) -> dict[str, float]:
    """From a helpers.kernels.simtrace Trace: sectors per global request (yours and ideal), worst bank conflict."""
    glob = trace.requests("global").values()
    shared = trace.requests("shared").values()
    moved = [sectors([a.offset for a in r], r[0].size) for r in glob]
    ideal = [math.ceil(len({a.offset for a in r}) * r[0].size / SECTOR) for r in glob]
    conflicts = [bank_conflict_degree(a.offset for a in r) for r in shared]
    return {
        "global_requests": len(moved),
        "sectors_per_request": float(np.mean(moved)) if moved else 0.0,
        "ideal_sectors_per_request": float(np.mean(ideal)) if ideal else 0.0,
        "shared_requests": len(conflicts),
        "worst_bank_conflict": max(conflicts, default=1),
        "mean_bank_conflict": float(np.mean(conflicts)) if conflicts else 1.0,
    }


def draw_warp(index: Callable[[int], int | None], title: str, itemsize: int = 4, warps: int = 1,
              ax: Any = None) -> Any:
    """Draw which 4-byte words the lanes of the first `warps` warps touch, with sector and line edges."""
    import matplotlib.pyplot as plt

    from helpers import plots

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 1.2 + 0.5 * warps))
    total_sectors = 0
    for w in range(warps):
        addrs = warp_addresses(index, w, itemsize)
        total_sectors += sectors(addrs, itemsize)
        for lane, a in enumerate(addrs):
            if a >= 0:
                ax.barh(w, itemsize, left=a, height=0.8, color=plots.PALETTE[lane % 4],
                        edgecolor="white", linewidth=0.3)
        for s in sorted(_units(addrs, itemsize, SECTOR)):
            ax.barh(w, SECTOR, left=s * SECTOR, height=0.95, fill=False, edgecolor="0.3", linewidth=0.6)
    lo, hi = ax.get_xlim()
    for x in range(int(lo // LINE) * LINE, int(hi) + 1, LINE):
        ax.axvline(x, color=plots.PALETTE[3], lw=1.2, ls=":", zorder=3)
    ax.set_xlim(lo, hi)
    ax.set(yticks=range(warps), yticklabels=[f"warp {w}" for w in range(warps)], xlabel="byte address (B)",
           ylabel="warp (32 lanes)",
           title=f"{title}: {total_sectors} sectors for {warps * WARP * itemsize} useful bytes")
    plots.label_device(ax, "any GPU", "computed from the index")
    ax.grid(False)
    ax.invert_yaxis()
    ax.figure.tight_layout()
    return ax.figure


def draw_banks(byte_addresses: Sequence[int], title: str, ax: Any = None) -> Any:
    """Draw one warp's shared-memory words as (bank, row) cells; stacked cells in a bank are conflicts."""
    import matplotlib.pyplot as plt

    from helpers import plots

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 2.6))
    words = sorted({a // WORD for a in byte_addresses if a >= 0})
    depth: dict[int, int] = {}
    for wd in words:
        b = wd % BANKS
        ax.add_patch(plt.Rectangle((b, depth.get(b, 0)), 0.9, 0.9, color=plots.PALETTE[0]))
        depth[b] = depth.get(b, 0) + 1
    worst = max(depth.values(), default=1)
    ax.set(xlim=(0, BANKS), ylim=(max(worst, 2), 0), xlabel="bank (4-byte words)", ylabel="words queued (count)",
           title=f"{title}: {worst}-way bank conflict" if worst > 1 else f"{title}: conflict-free")
    plots.label_device(ax, "any GPU", "computed from the addresses")
    ax.grid(False)
    ax.figure.tight_layout()
    return ax.figure
