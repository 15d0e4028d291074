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
jobs - 1 lanes, and from the start the cache prefill (PREFILL); 2. the GPU notebooks, `jobs` at a time; 3. the ALONE
notebooks, one after another, nothing beside.
With `--jobs 1` every notebook runs alone, in course order, the GPU visible (the run as it was).
`estimate(seconds, jobs)` lays per-notebook seconds out on these phases (``report plan``: a card's stored times).

Without a GPU (`make notebooks`) only the notebooks in CPU_TIMING time anything, on the CPU: they run one at a
time, alone; the others run two at a time.

Serves: tooling — `make gpu-report` (helpers.tools.report --jobs) and `make notebooks` (tests/support/nbval_guard.py).
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

# `make notebooks` on a machine without a GPU: what each of these times on its CPU (a stored record, a speed check,
# or a time shown to the student). They run one at a time with nothing beside them; every other notebook and
# solution times nothing there and runs two at a time (tests/support/nbval_guard.py, --lane; it fails such a run
# that records a time). ALONE notebooks time the CPU everywhere; a HIDDEN one times nothing anywhere.
CPU_TIMING: dict[str, str] = {
    "00_start_here": "times a GEMM on the CPU with bench.timeit (shown, not recorded)",
    "01_why_gpu_inference": "the host's bandwidth and the models' CPU latency (ch01.cpu_*)",
    "02_gpu_architecture": "CPU GEMM throughput and the CPU roofline (ch02.cpu_*, ch02.roofline.cpu.*)",
    "05_quantization_fundamentals": "INT8 against FP32 copies on the CPU (ch05.copy.fp32_over_int8_time.cpu)",
    "06_calibration": "the calibrators' time (ch06.calib_ms.*)",
    "09_deployment": "ONNX Runtime's CPU paths (ch09.ort_cpu.*)",
    "10_beyond_int8": "sparsity, dynamic quantization, layouts and the pipeline on the CPU (ch10.*cpu*)",
    "11_troubleshooting": "the INT8 exports' speed on the CPU (ch11.perf.cpu_*)",
    "lab01_roofline_and_timing": "its timers time on the CPU where there is no GPU (bench.timeit, the kit's events)",
    "lab08_deploy": "times the deployed backends on the CPU (bench.timeit_interleaved)",
    "lab09_troubleshoot": "its speed check times two ONNX Runtime models on the CPU",
}


def times_the_cpu(path: Path) -> bool:
    """True for a notebook that times work on this machine's CPU when it has no GPU (CPU_TIMING; unknown: True)."""
    return path.stem in CPU_TIMING or path.stem not in PLAN


# Started beside the first timing notebook with `--jobs N` (N > 1), on the side lanes' cores with the GPU hidden: fills
# the course cache (MNIST-1D, the small models, the tiny language model; helpers.models.prefill), so that the notebooks
# of the timing lane and of the phases after it find their models made, or wait for one being made, instead of
# training them themselves. Still running one cell timeout after its phase ends, it is stopped, and the notebooks
# make what is missing.
PREFILL_JOBS = 2  # models trained at once (one process and thread each; the language model takes side_env's threads)
PREFILL: tuple[str, ...] = ("-m", "helpers.models.prefill", "--jobs", str(PREFILL_JOBS))

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
    prefill: bool = False  # PREFILL runs beside `main` from its start (side_env)


def kind(path: Path) -> str:
    """The PLAN kind of one notebook (a notebook missing from PLAN runs as TIMING: alone on the GPU)."""
    return PLAN.get(path.stem, (TIMING, ""))[0]


def phases(paths: list[Path], jobs: int) -> list[Phase]:
    """The run's phases for `jobs` parallel notebooks (one phase, in course order, for jobs = 1)."""
    if jobs <= 1:
        return [Phase("one at a time, in course order", tuple(paths))]
    by = {k: tuple(p for p in paths if kind(p) == k) for k in KINDS}
    plan = [Phase("timing notebooks, one at a time", by[TIMING], by[HIDDEN], 1, jobs - 1, prefill=True),
            Phase(f"GPU accuracy notebooks, {jobs} at a time; nothing timed meanwhile", by[GPU], lanes=jobs),
            Phase("notebooks that also time the CPU, one at a time, nothing beside them", by[ALONE])]
    return [p for p in plan if p.main or p.side]


def side_env(jobs: int) -> dict[str, str]:
    """The environment of a notebook run beside the timing: no GPU, and a share of the cores the timing lane leaves."""
    free = (os.cpu_count() or 2) - KEEP_FOR_TIMING - PREFILL_JOBS  # the prefill's processes share the side's cores
    threads = str(max(SIDE_THREADS_MIN, free // max(1, jobs - 1)))
    return {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads, "NUMBA_NUM_THREADS": threads}


def lanes(seconds: list[float], count: int) -> float:
    """Wall seconds of jobs run on `count` lanes in the order given, each to the lane that frees first (as the
    report's thread pool takes them)."""
    load = [0.0] * max(1, count)
    for x in seconds:
        load[load.index(min(load))] += x
    return max(load)


def estimate(seconds: dict[str, float], jobs: int) -> tuple[list[tuple[str, float, list[str]]], list[str]]:
    """The wall seconds of each phase of a run with `jobs`, from per-notebook seconds {stem: s}: (title, seconds,
    its notebooks, slowest first) per phase, and the stems with no time (left out of the sums). Phase 1 lasts as long
    as its timing lane or, if longer, its side lanes (jobs - 1 of them); the prefill and each notebook's start-up
    are not counted."""
    paths = [Path(f"{stem}.ipynb") for stem in PLAN]
    out, unknown = [], [p.stem for p in paths if p.stem not in seconds]
    for ph in phases([p for p in paths if p.stem in seconds], jobs):
        main = [seconds[p.stem] for p in ph.main]
        wall = sum(main) if ph.lanes <= 1 else lanes(main, ph.lanes)
        if ph.side:
            wall = max(wall, lanes([seconds[p.stem] for p in ph.side], ph.side_lanes))
        order = sorted((p.stem for p in ph.main + ph.side), key=lambda s: -seconds[s])
        out.append((ph.title, wall, order))
    return out, unknown
