"""What is inside an SM: CUDA cores and Tensor Cores per SM by compute capability, SIMT and warps.

The per-SM counts come from NVIDIA's CUDA C++ Programming Guide ("Compute Capabilities")
and the architecture whitepapers; the device query reads the running GPU through
``helpers.device.gpu_info()``.

Serves: core — used by chapter 2.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

from helpers.device import GPUInfo, gpu_info
from helpers.errors import InputError
from helpers.validation import require_int_range

WARP_SIZE = 32
SCHEDULERS_PER_SM = 4  # four warp schedulers (SM sub-partitions) per SM since Maxwell


@dataclass(frozen=True)
class SMLayout:
    """The execution units of one SM of one compute capability."""

    arch: str
    fp32_cores: int  # "CUDA cores": FP32 lanes per SM
    tensor_cores: int  # Tensor Cores per SM (0 = none)
    tensor_core_gen: int
    tensor_core_types: str


SM_LAYOUT: dict[tuple[int, int], SMLayout] = {
    (6, 0): SMLayout("Pascal (GP100)", 64, 0, 0, "none"),
    (6, 1): SMLayout("Pascal", 128, 0, 0, "none (INT8 via dp4a on CUDA cores)"),
    (7, 0): SMLayout("Volta", 64, 8, 1, "FP16"),
    (7, 5): SMLayout("Turing", 64, 8, 2, "FP16, INT8, INT4"),
    (8, 0): SMLayout("Ampere (A100)", 64, 4, 3, "FP16, BF16, TF32, INT8, INT4, FP64"),
    (8, 6): SMLayout("Ampere (GA10x)", 128, 4, 3, "FP16, BF16, TF32, INT8, INT4"),
    (8, 7): SMLayout("Ampere (Orin)", 128, 4, 3, "FP16, BF16, TF32, INT8, INT4"),
    (8, 9): SMLayout("Ada", 128, 4, 4, "FP8, FP16, BF16, TF32, INT8, INT4"),
    (9, 0): SMLayout("Hopper", 128, 4, 4, "FP8, FP16, BF16, TF32, INT8, FP64"),
    (10, 0): SMLayout("Blackwell (B200)", 128, 4, 5, "FP4, FP6, FP8, FP16, BF16, TF32, INT8, FP64"),
    (12, 0): SMLayout("Blackwell (GeForce)", 128, 4, 5, "FP4, FP6, FP8, FP16, BF16, TF32, INT8"),
}


def sm_layout(cc: tuple[int, int]) -> SMLayout:
    """CUDA cores and Tensor Cores per SM for a compute capability such as (9, 0)."""
    if not (isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(v, int) for v in cc)):
        raise InputError(f"compute capability must be a (major, minor) tuple such as (9, 0); got {cc!r}.")
    if cc not in SM_LAYOUT:
        known = ", ".join(f"{a}.{b}" for a, b in SM_LAYOUT)
        raise InputError(f"no SM layout stored for compute capability {cc[0]}.{cc[1]}; known: {known}.")
    return SM_LAYOUT[cc]


def sm_layout_rows(highlight: tuple[int, int] | None = None) -> list[dict]:
    """The per-SM layout of every stored compute capability, `current` set on `highlight`."""
    return [{"CC": f"{a}.{b}", "architecture": l.arch, "CUDA cores / SM": l.fp32_cores,
             "Tensor Cores / SM": l.tensor_cores, "TC generation": l.tensor_core_gen or None,
             "Tensor Core types": l.tensor_core_types, "current": (a, b) == highlight}
            for (a, b), l in SM_LAYOUT.items()]


def device_query_rows(info: GPUInfo | None = None) -> list[dict]:
    """The device query as (property, value, meaning) rows, for this GPU or a given GPUInfo."""
    info = info or gpu_info()
    if info is None:
        return cpu_query_rows()
    layout = SM_LAYOUT.get(info.compute_capability)
    cores = layout.fp32_cores if layout else None
    tcs = layout.tensor_cores if layout else None
    bw = info.peak_memory_bandwidth_gbs

    def row(prop: str, value: object, meaning: str) -> dict:
        return {"property": prop, "value": value, "meaning": meaning}

    return [
        row("name", info.name, ""),
        row("compute capability", f"{info.cc:.1f}", layout.arch if layout else "not in the table"),
        row("SMs", info.sm_count, "streaming multiprocessors: the GPU's 'cores'"),
        row("CUDA cores / SM", cores, "FP32 lanes; a warp instruction uses 32 of them"),
        row("CUDA cores (total)", cores * info.sm_count if cores else None, "what datasheets add up"),
        row("Tensor Cores / SM", tcs, layout.tensor_core_types if layout else ""),
        row("Tensor Cores (total)", tcs * info.sm_count if tcs is not None else None, ""),
        row("warp size", info.warp_size, "threads that execute one instruction together (SIMT)"),
        row("max threads / SM", info.max_threads_per_sm,
            f"= {info.max_threads_per_sm // WARP_SIZE} resident warps, {SCHEDULERS_PER_SM} schedulers"),
        row("registers / SM", info.registers_per_sm, f"{info.registers_per_sm * 4 // 1024} KiB register file"),
        row("shared memory / SM (KiB)", info.shared_memory_per_sm // 1024, "on-chip, shared by a block"),
        row("L2 cache (MiB)", round(info.l2_bytes / 2**20, 1), "shared by all SMs; benchmarks must exceed it"),
        row("memory (GiB)", round(info.memory_bytes / 2**30, 1), "HBM/GDDR"),
        row("peak DRAM bandwidth (GB/s)", round(bw) if bw else None, "from memory clock × bus width"),
        row("SM clock (MHz)", info.clock_mhz, ""),
    ]


def cpu_flags() -> set[str]:
    """The CPU feature flags from /proc/cpuinfo (empty where that file does not exist)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_query_rows() -> list[dict]:
    """The CPU's counterpart of the device query: cores and the SIMD units that matter for inference."""
    flags = cpu_flags()
    simd = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8") if f in flags]
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    return [
        {"property": "CPU", "value": platform.processor() or platform.machine(), "meaning": ""},
        {"property": "cores visible", "value": os.cpu_count(), "meaning": "each runs its own instruction stream"},
        {"property": "FP32 SIMD lanes / instruction", "value": lanes,
         "meaning": "the CPU's 'warp': one instruction, many lanes"},
        {"property": "SIMD / matrix extensions", "value": ", ".join(simd) or "none found",
         "meaning": "avx512_vnni = INT8 dot products (the CPU's dp4a); amx = matrix tiles"},
    ]


def divergence_passes(take_branch: list[bool]) -> int:
    """Passes a warp needs for an if/else when lanes disagree: 1 if all agree, else 2 (SIMT)."""
    if not take_branch or len(take_branch) > WARP_SIZE:
        raise InputError(f"give one flag per thread of a warp: 1..{WARP_SIZE} booleans, got {len(take_branch)}.")
    return 1 if all(take_branch) or not any(take_branch) else 2


def warps_for(threads: int) -> int:
    """Warps a block of `threads` threads occupies (partial warps still cost a whole warp)."""
    require_int_range(threads, 1, 1024, "threads")
    return -(-threads // WARP_SIZE)


def peak_fp32_tflops(sm_count: int, fp32_cores: int, clock_mhz: float) -> float:
    """FP32 peak from first principles: SMs × cores × 2 FLOPs (FMA) × clock."""
    require_int_range(sm_count, 1, 10_000, "sm_count")
    require_int_range(fp32_cores, 1, 1024, "fp32_cores")
    if not clock_mhz or clock_mhz <= 0:
        raise InputError(f"clock_mhz must be positive, got {clock_mhz!r}.")
    return sm_count * fp32_cores * 2 * clock_mhz * 1e6 / 1e12
