"""How the reference run schedules the notebooks with `--jobs N`: which may run beside which, and why.

Every notebook and solution is in PLAN with its kind and the reason (tests/tools/test_report_plan.py checks
that each is classified, and that no notebook called HIDDEN times anything):

- TIMING: times kernels or models on the GPU; runs one at a time, never beside other GPU work.
- ALONE: times on the CPU too (ONNX Runtime, the host's bandwidth), which any neighbour would slow; nothing
  runs beside it.
- HIDDEN: computes accuracy or quantization only and teaches the same without a GPU (it records nothing, and
  uses no GPU path); runs beside the TIMING notebooks with the GPU hidden (CUDA_VISIBLE_DEVICES=) and few threads.
- GPU: computes accuracy on the GPU and records it as the card's (with the GPU hidden its records would be
  a CPU's); runs beside other GPU notebooks, in a phase where nothing is timed.

The phases (`phases(paths, jobs)`): 1. the TIMING notebooks one after another, the HIDDEN ones beside them on
jobs - 1 lanes; 2. the GPU notebooks, `jobs` at a time; 3. the ALONE notebooks, one after another, nothing beside.
With `--jobs 1` every notebook runs alone, in course order, the GPU visible (the run as it was).

Serves: tooling — `make gpu-report` (helpers.tools.report --jobs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TIMING, ALONE, HIDDEN, GPU = "timing", "alone", "hidden", "gpu"
KINDS = {TIMING: "times on the GPU: one at a time, never beside other GPU work",
         ALONE: "times on the CPU too: nothing beside it",
         HIDDEN: "accuracy or quantization only, the same without a GPU: beside the timing, GPU hidden",
         GPU: "accuracy on the GPU, recorded as the card's: beside each other, nothing timed meanwhile"}

PLAN: dict[str, tuple[str, str]] = {
    "00_start_here": (TIMING, "times a GEMM with bench.timeit"),
    "01_why_gpu_inference": (ALONE, "times the host CPU's bandwidth on all cores, and models on CPU and GPU"),
    "02_gpu_architecture": (TIMING, "GEMM throughput and the measured roofline"),
    "03_memory_hierarchy": (TIMING, "copy, stride, offset, transpose and stencil bandwidths"),
    "04_warp_execution": (TIMING, "block-size, shared-memory, reduction and divergence timings"),
    "05_quantization_fundamentals": (TIMING, "times INT8 copies and GEMMs (ch05.copy, ch05.gemm)"),
    "05b_quantization_explorer": (HIDDEN, "quantization math on a CPU array; records nothing"),
    "06_calibration": (TIMING, "times the calibrators (ch06.calib_ms)"),
    "07_ptq": (GPU, "PTQ accuracies stored as the card's (ptq.*, ch07.*); times nothing"),
    "08_qat": (GPU, "QAT accuracies stored as the card's (qat.*, ch08.*); times nothing"),
    "09_deployment": (ALONE, "deploy backends timed on the GPU (workloads.time_variants) and ONNX Runtime on the host CPU"),
    "10_beyond_int8": (TIMING, "FP8, sparsity, layouts, dynamic quantization and pipeline timings"),
    "11_troubleshooting": (TIMING, "performance diagnosis timings and the Nsight Compute profile"),
    "12_language_models": (TIMING, "GEMV, GEMM-sweep and decode benches"),
    "lab00_warmup_quantize": (HIDDEN, "numpy quantization exercises; no speed check, records nothing"),
    "lab01_roofline_and_timing": (TIMING, "times with CUDA events"),
    "lab02_coalescing_and_transpose": (TIMING, "speed checks of the student's kernels (perf=)"),
    "lab03_divergence_and_reduction": (TIMING, "speed checks of the student's kernels (perf=)"),
    "lab04_per_channel_and_requant": (HIDDEN, "numpy quantization exercises; no speed check, records nothing"),
    "lab05_entropy_calibration": (HIDDEN, "calibration exercises on arrays; no speed check, records nothing"),
    "lab06_ptq_sensitivity": (HIDDEN, "PTQ cases on a small CPU model; no speed check, records nothing"),
    "lab07_qat": (HIDDEN, "QAT exercises on a small CPU model; no speed check, records nothing"),
    "lab08_deploy": (TIMING, "times the deployed backends with bench.timeit_interleaved"),
    "lab09_troubleshoot": (ALONE, "its speed check times two ONNX Runtime models on the CPU"),
    "lab10_llm_quantization": (HIDDEN, "weight-only quantization exercises on arrays; records nothing"),
    "lab11_gemm_kernels": (TIMING, "GEMM kernel speed checks and the lab's bench (lab11.*)"),
    "lab12_histogram_kernels": (TIMING, "histogram kernel speed checks (lab12.*)"),
    "lab13_weight_only_gemv": (TIMING, "times the student's GEMV beside FP16 and the course's (lab13.*)"),
}

SIDE_THREADS_MIN = 1
KEEP_FOR_TIMING = 4  # CPU cores left to the timing lane while the hidden notebooks run beside it


@dataclass(frozen=True)
class Phase:
    """Notebooks that run in one phase: `lanes` at a time (`main` one after another, `side` beside them)."""

    title: str
    main: tuple[Path, ...]
    side: tuple[Path, ...] = ()
    lanes: int = 1  # how many of `main` run at once
    side_lanes: int = 0


def kind(path: Path) -> str:
    """The PLAN kind of one notebook (a notebook missing from PLAN runs as TIMING: alone on the GPU)."""
    return PLAN.get(path.stem, (TIMING, ""))[0]


def phases(paths: list[Path], jobs: int) -> list[Phase]:
    """The run's phases for `jobs` parallel notebooks (one phase, in course order, for jobs = 1)."""
    if jobs <= 1:
        return [Phase("one at a time, in course order", tuple(paths))]
    by = {k: tuple(p for p in paths if kind(p) == k) for k in KINDS}
    plan = [Phase("timing notebooks, one at a time", by[TIMING], by[HIDDEN], 1, jobs - 1),
            Phase(f"GPU accuracy notebooks, {jobs} at a time; nothing timed meanwhile", by[GPU], lanes=jobs),
            Phase("notebooks that also time the CPU, one at a time, nothing beside them", by[ALONE])]
    return [p for p in plan if p.main or p.side]


def side_env(jobs: int) -> dict[str, str]:
    """The environment of a notebook run beside the timing: no GPU, and a share of the cores the timing lane leaves."""
    threads = str(max(SIDE_THREADS_MIN, ((os.cpu_count() or 2) - KEEP_FOR_TIMING) // max(1, jobs - 1)))
    return {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads, "NUMBA_NUM_THREADS": threads}
