"""Lab 1: arithmetic intensity, a correct GPU timer, and reading the roofline.

The timer exercise runs on any machine: the student's timer gets a fake CUDA module and a fake
kernel (helpers.labs.lab01_roofline_and_timing.kit) whose work finishes later in real time, as on a GPU. A timer
that forgets to synchronize measures almost nothing; one without warm-up catches the slow first calls.

Serves: lab01 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helpers.grading.exercise import Case, Exercise, register
from helpers.labs.lab01_roofline_and_timing.kit import (
    FakeCuda,
    FakeKernel,
    compare_classify,
    compare_timer,
    run_timer,
)
from helpers.perf import roofline

__all__ = ["FakeCuda", "FakeKernel", "reference_timer"]


# --- specs ------------------------------------------------------------------------------------
def gemm_intensity(m: int, n: int, k: int, bytes_per_element: float) -> float:
    """FLOPs per byte of C = A @ B with each matrix moved once."""
    return roofline.intensity(*roofline.gemm_cost(m, n, k, bytes_per_element))


def predict_bound(flops: float, bytes_moved: float, peak_tflops: float, bandwidth_gbs: float) -> str:
    """'memory' or 'compute': which roof limits a kernel of this work and traffic."""
    return roofline.classify(roofline.intensity(flops, bytes_moved), peak_tflops, bandwidth_gbs)


def classify_kernels(kernels: list[dict], peak_tflops: float, bandwidth_gbs: float) -> list[tuple[str, float]]:
    """For each {'flops', 'bytes', 'seconds'}: (bound, achieved ÷ roofline-attainable)."""
    out = []
    for kern in kernels:
        ai = roofline.intensity(kern["flops"], kern["bytes"])
        achieved = kern["flops"] / kern["seconds"] / 1e12
        out.append((roofline.classify(ai, peak_tflops, bandwidth_gbs),
                    achieved / roofline.attainable_tflops(ai, peak_tflops, bandwidth_gbs)))
    return out


def reference_timer(fn: Callable[[], object], cuda: Any, warmup: int = 3, repeats: int = 10) -> list[float]:
    """Per-repeat milliseconds of fn() on the GPU: warm-up, events around each call, synchronize."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def timer_spec(ms: float, cold: int, repeats: int) -> dict:
    """What a correct timer does: cold + repeats calls, `repeats` samples of about `ms` milliseconds."""
    return {"samples": [ms] * repeats, "calls": cold + repeats, "cold_ms": cold * 10 * ms}


register(
    Exercise(
        id="lab01.intensity", title="arithmetic intensity of a GEMM",
        spec=gemm_intensity,
        cases=lambda: [Case("square fp32", (1024, 1024, 1024, 4)), Case("GEMV-like bf16", (1, 4096, 4096, 2)),
                       Case("BERT FFN int8", (4096, 3072, 768, 1)), Case("tall fp16", (65536, 64, 64, 2))],
        hidden=lambda: [Case("hidden: tiny", (2, 2, 2, 1)),
                        Case("hidden: ResNet 1x1 conv as GEMM", (3136 * 32, 256, 64, 2)),
                        Case("hidden: fp8 LLM decode", (8, 8192, 8192, 1))],
        hint="Intensity is the work divided by the traffic: count the floating-point operations, then the "
             "bytes that must cross between DRAM and the chip at best.",
        hints=("Each of the m·n·k terms is one multiply and one add. At best A and B are read once and C is "
               "written once; every element costs bytes_per_element.",),
        compare="close", rtol=1e-9, atol=0.0, plot=False,
    ),
    Exercise(
        id="lab01.predict", title="memory- or compute-bound?",
        spec=predict_bound,
        cases=lambda: [Case("vector add on H200", (2.68e8, 3.2e9, 989.0, 4800.0)),
                       Case("GEMM 8192³ bf16 on H200", (1.1e12, 4.0e8, 989.0, 4800.0)),
                       Case("GEMM 512³ fp32 on a CPU", (2.7e8, 3.1e6, 1.0, 50.0)),
                       Case("batch-1 linear layer on an A100", (4.7e6, 4.7e6, 312.0, 2039.0))],
        hidden=lambda: [Case("hidden: LayerNorm on H200", (5.0e8, 2.0e8, 989.0, 4800.0)),
                        Case("hidden: big GEMM on T4", (6.9e10, 1.0e8, 65.0, 320.0)),
                        Case("hidden: softmax on a CPU", (1.0e8, 4.0e8, 2.0, 40.0))],
        hint="Compare the kernel's intensity with the machine's ridge point, the intensity at which the "
             "two roofs meet.",
        hints=("The ridge point is peak ÷ bandwidth in FLOP per byte, so both must be in base units: "
               "TFLOP/s is 1e12 FLOP/s and GB/s is 1e9 B/s. Below the ridge the kernel is memory-bound.",),
        compare="exact", plot=False,
    ),
    Exercise(
        id="lab01.timer", title="a correct GPU timer",
        spec=timer_spec, run=run_timer, compare=compare_timer, plot=False,
        cases=lambda: [Case("2 ms kernel, 3 cold calls", kwargs={"ms": 2.0, "cold": 3, "repeats": 8}),
                       Case("4 ms kernel, 5 cold calls", kwargs={"ms": 4.0, "cold": 5, "repeats": 5})],
        hidden=lambda: [Case("hidden: 3 ms kernel, 2 cold calls", kwargs={"ms": 3.0, "cold": 2, "repeats": 6})],
        hint="A GPU call only queues work. Warm up first, and make sure the work you time has finished "
             "before you read any clock.",
        hints=("Use a pair of timing events per repeat, recorded around the call, and wait for the end event "
               "before asking for the time between them; wait for the warm-up calls too (cuda.synchronize()).",),
    ),
    Exercise(
        id="lab01.classify", title="classify measured kernels on the roofline",
        spec=classify_kernels, compare=compare_classify, plot=False,
        cases=lambda: [Case("H200 kernels", (
            [{"flops": 2.68e8, "bytes": 3.2e9, "seconds": 7.6e-4},
             {"flops": 1.1e12, "bytes": 4.0e8, "seconds": 1.4e-3},
             {"flops": 3.4e10, "bytes": 2.0e7, "seconds": 9.0e-5},
             {"flops": 4.2e9, "bytes": 3.5e7, "seconds": 2.0e-5}], 989.0, 4800.0)),
            Case("CPU kernels", ([{"flops": 2.1e9, "bytes": 1.2e7, "seconds": 0.04},
                                   {"flops": 1.0e7, "bytes": 1.2e8, "seconds": 0.015}], 0.1, 10.0))],
        hidden=lambda: [Case("hidden: A100", ([{"flops": 1.0e9, "bytes": 8.0e9, "seconds": 5.0e-3},
                                                {"flops": 2.2e12, "bytes": 2.0e8, "seconds": 1.0e-2}], 312.0, 2039.0))],
        hint="Efficiency is relative to the roof this kernel can reach at its own intensity, not to the peak.",
        hints=("The attainable rate is the lower of the compute peak and intensity × bandwidth (watch the units: "
               "TFLOP/s against GB/s). Achieved = flops / seconds.",),
    ),
)
