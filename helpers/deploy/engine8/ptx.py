"""What a compiled GEMM kernel runs, read from its PTX: the tensor-core instruction, how many groups of MMAs it keeps
in flight while it issues the next, and how its operand tiles reach shared memory.

    kernel = kernels.gemm(a, w, scale, config=cfg, compiled=True)   # on a GPU
    row = ptx.describe(kernel.asm["ptx"])
    # {'instruction': 'wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8', 'MMA groups in flight': 0,
    #  'tile loads': 'TMA'}

Hopper's ``wgmma`` is asynchronous: a warpgroup issues a group of MMAs, may issue the next before the first finishes,
and waits with ``wgmma.wait_group N`` until at most N groups are pending. A kernel whose only wait is ``wait_group
0`` finishes every group before it starts the next, so its tensor cores idle while the next tile's MMAs are set up;
one that waits with N = 1 keeps a group in flight. That is a property of the compiled code, not of the format, so the
chapter reads it from the PTX of the kernels the tuner kept.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import re

_MMA = re.compile(r"\b(wgmma\.mma_async[\w.]*|mma\.sync[\w.]*)")
_WAIT = re.compile(r"\bwgmma\.wait_group\.sync\.aligned\s+(\d+)")
_LOADS = (("TMA", re.compile(r"\bcp\.async\.bulk\.tensor")), ("cp.async", re.compile(r"\bcp\.async\.c[ag]\b")),
          ("ld.global", re.compile(r"\bld\.global")))


def instruction(ptx: str) -> str:
    """The kernel's tensor-core MMA instruction (the most frequent one), or 'none'."""
    found = _MMA.findall(ptx)
    return max(set(found), key=found.count) if found else "none"


def in_flight(ptx: str) -> int:
    """How many groups of asynchronous MMAs the kernel lets stay pending while it issues more: the largest N of its
    ``wgmma.wait_group N`` (0: it waits for each group; synchronous ``mma.sync`` or no MMA: 0)."""
    return max((int(n) for n in _WAIT.findall(ptx)), default=0)


def tile_loads(ptx: str) -> str:
    """How operand tiles reach shared memory: 'TMA' (one bulk tensor copy a tile), 'cp.async' (each thread's
    asynchronous copies) or 'ld.global' (through registers)."""
    return next((name for name, pattern in _LOADS if pattern.search(ptx)), "none")


def describe(ptx: str) -> dict[str, object]:
    """instruction, MMA groups in flight and tile loads of one kernel's PTX."""
    return {"instruction": instruction(ptx), "MMA groups in flight": in_flight(ptx), "tile loads": tile_loads(ptx)}
