"""Theoretical occupancy: how many warps an SM can hold for a kernel, and which resource limits it.

Follows the CUDA occupancy calculator: blocks per SM are limited by threads, by the block slots,
by registers (allocated per warp in units of 256) and by shared memory (in units of 128 bytes,
plus 1 KiB the runtime reserves per block on compute capability 8.0 and later).

Serves: core — used by chapters 3, 4, 11, 12 and lab 13.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from helpers.errors import InputError


@dataclass(frozen=True)
class SMLimits:
    """Per-SM resources of one GPU generation."""

    name: str
    max_threads: int = 2048
    max_blocks: int = 32
    registers: int = 65536
    max_registers_per_thread: int = 255
    register_unit: int = 256  # registers are allocated per warp in these units
    shared_bytes: int = 233472  # usable by blocks (H100/H200: 228 KiB)
    max_shared_per_block: int = 232448  # 227 KiB opt-in
    shared_unit: int = 128
    reserved_shared_per_block: int = 1024
    warp_size: int = 32


HOPPER = SMLimits("H100/H200 (cc 9.0)")


def limits_for_device() -> SMLimits:
    """The SM limits of GPU 0 from its attributes (Hopper's when there is no GPU)."""
    from helpers.device import gpu_info

    info = gpu_info()
    if info is None:
        return HOPPER
    return SMLimits(info.name, max_threads=info.max_threads_per_sm or HOPPER.max_threads,
                    registers=info.registers_per_sm or HOPPER.registers,
                    shared_bytes=info.shared_memory_per_sm or HOPPER.shared_bytes)


@dataclass(frozen=True)
class Occupancy:
    """Blocks and warps per SM for one launch configuration, and the limiting resource."""

    threads_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limiter: str

    @property
    def fraction(self) -> float:
        """Active warps ÷ the most the SM can hold."""
        return self.warps_per_sm / self.max_warps


def occupancy(threads_per_block: int, registers_per_thread: int = 32, shared_per_block: int = 0,
              limits: SMLimits = HOPPER) -> Occupancy:
    """Theoretical occupancy of a kernel launched with these resources per block."""
    if not isinstance(threads_per_block, int) or not 1 <= threads_per_block <= 1024:
        raise InputError(f"threads_per_block must be an integer in 1..1024, got {threads_per_block!r}.")
    if not isinstance(registers_per_thread, int) or not 1 <= registers_per_thread <= limits.max_registers_per_thread:
        raise InputError(f"registers_per_thread must be in 1..{limits.max_registers_per_thread}, "
                         f"got {registers_per_thread!r}.")
    if not isinstance(shared_per_block, int) or not 0 <= shared_per_block <= limits.max_shared_per_block:
        raise InputError(f"shared_per_block must be in 0..{limits.max_shared_per_block} bytes, "
                         f"got {shared_per_block!r}.")
    warps = math.ceil(threads_per_block / limits.warp_size)
    max_warps = limits.max_threads // limits.warp_size
    regs_per_warp = math.ceil(registers_per_thread * limits.warp_size / limits.register_unit) \
        * limits.register_unit
    smem = math.ceil((shared_per_block + limits.reserved_shared_per_block) / limits.shared_unit) \
        * limits.shared_unit
    by = {
        "threads": max_warps // warps,
        "block slots": limits.max_blocks,
        "registers": limits.registers // (regs_per_warp * warps),
        "shared memory": limits.shared_bytes // smem if shared_per_block else limits.max_blocks,
    }
    limiter = min(by, key=lambda k: by[k])
    blocks = by[limiter]
    return Occupancy(threads_per_block, blocks, blocks * warps, max_warps, limiter)


def table(configs: list[tuple[int, int, int]], limits: SMLimits = HOPPER) -> list[dict]:
    """Rows of threads / registers / shared bytes -> blocks per SM, occupancy and limiter."""
    rows = []
    for threads, regs, smem in configs:
        o = occupancy(threads, regs, smem, limits)
        rows.append({"threads/block": threads, "registers/thread": regs, "shared B/block": smem,
                     "blocks/SM": o.blocks_per_sm, "occupancy": round(o.fraction, 3), "limited by": o.limiter})
    return rows
