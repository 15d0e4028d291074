"""The short, cited list of fixed numbers that notebook prose may state without a measurement.

Each fact has a source. A fact computed by the course's own code (a kernel's tile size, a sweep's
largest matrix, the sector model) carries `check`, which recomputes it: tests/course/test_prose_numbers.py
fails when the code and the prose drift apart. `notebooks` limits a fact to the notebooks (file
stems) that use it; an empty tuple means every notebook.

A number not on this list must come from the record (printed by a cell, see helpers.findings), or be
a stored measurement that the notebook names, or a literal of the notebook's own code (a parameter of
the experiment it runs). Owners of chapters 6–11 add their facts here, with sources.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """A fixed number, what it is, where it comes from, and (optionally) code that recomputes it."""

    value: float
    what: str
    source: str
    notebooks: tuple[str, ...] = ()
    check: Callable[[], float] | None = None


def _ap(name: str) -> Callable[[], float]:
    """A constant of the sector model (helpers.perf.access_patterns)."""
    def get() -> float:
        from helpers.perf import access_patterns

        return float(getattr(access_patterns, name))
    return get


def _mb(expr: Callable[[object], float]) -> Callable[[], float]:
    """A value computed from chapter 3's benchmark constants."""
    def get() -> float:
        from helpers.chapters.ch03_memory_hierarchy import memory_bench

        return float(expr(memory_bench))
    return get


def _sectors(index: Callable[[int], int]) -> Callable[[], float]:
    """Sectors one warp of float32 loads needs, from the sector model."""
    def get() -> float:
        from helpers.perf import access_patterns as ap

        return float(ap.sectors(ap.warp_addresses(index)))
    return get


def _stride_model(stride: int) -> Callable[[], float]:
    """The sector model's bandwidth at `stride`, as a fraction of stride 1."""
    def get() -> float:
        from helpers.chapters.ch03_memory_hierarchy.readings import model_fraction

        return model_fraction(stride)
    return get


def _transpose(name: str) -> Callable[[], float]:
    """A constant of the transpose kernels."""
    def get() -> float:
        from helpers.kernels import transpose

        return float(getattr(transpose, name))
    return get


def _spec(gpu: str, field: str) -> Callable[[], float]:
    """One value of the datasheet table (helpers.perf.specs)."""
    def get() -> float:
        from helpers.perf import specs

        return float(getattr(next(s for s in specs.SPECS if s.name == gpu), field))
    return get


def _occupancy_mib() -> float:
    """MiB copied by chapter 4's occupancy sweep."""
    from helpers.chapters.ch04_warp_execution.warp_bench import OCCUPANCY_N

    return OCCUPANCY_N * 4 / 2**20


def _bert_seq() -> float:
    """The sequence length the course's BERT-base runs at."""
    import inspect

    from helpers.models.bert import bert_base

    return float(inspect.signature(bert_base).parameters["seq_len"].default)


def _explorer_bits(i: int) -> Callable[[], float]:
    """An end of the explorer's bits slider."""
    def get() -> float:
        from helpers.chapters.ch05_quantization_fundamentals.explorer import BITS_RANGE

        return float(BITS_RANGE[i])
    return get


def _const(module: str, name: str, expr: Callable[[float], float] = float) -> Callable[[], float]:
    """A constant of a course module (a lab check's parameter), optionally transformed."""
    def get() -> float:
        import importlib

        return float(expr(getattr(importlib.import_module(module), name)))
    return get


def _digits_levels() -> float:
    """Distinct pixel values of scikit-learn's digits."""
    import numpy as np
    from sklearn.datasets import load_digits

    return float(len(np.unique(load_digits().data)))


def _entropy_start_fraction() -> float:
    """Where the entropy search starts, as a fraction of the histogram: start_bin / num_bins."""
    import inspect

    from helpers.quant import calibrators

    start = inspect.signature(calibrators.amax_entropy).parameters["start_bin"].default
    return start / calibrators.Histogram().num_bins


EVERY = ()
CH02, CH03, CH04 = ("02_gpu_architecture",), ("03_memory_hierarchy",), ("04_warp_execution",)
CH05, CH05B = ("05_quantization_fundamentals",), ("05b_quantization_explorer",)
LAB05, LAB07 = ("lab05_entropy_calibration",), ("lab07_qat",)
LAB09, LAB11 = ("lab09_troubleshoot",), ("lab11_gemm_kernels",)
LAB13 = ("lab13_weight_only_gemv",)
GUIDE = "NVIDIA CUDA C++ Programming Guide"

FACTS: tuple[Fact, ...] = (
    # identities and format constants, every notebook
    Fact(0, "zero: lane 0, zero point 0, the value 0.0", "identity", EVERY),
    Fact(1, "one: batch 1, stride 1, the top of a [0, 1] range", "identity", EVERY),
    Fact(32, "threads (lanes) per warp; bits of FP32; banks of shared memory", f"{GUIDE}, SIMT architecture", EVERY),
    Fact(8, "bits of an INT8 value", "two's-complement 8-bit integer", EVERY),
    Fact(4, "FP32 bytes ÷ INT8 bytes; bytes of a float32", "IEEE 754 binary32", EVERY),
    Fact(127, "largest INT8 value", "two's-complement 8-bit integer", EVERY),
    Fact(-128, "smallest INT8 value", "two's-complement 8-bit integer", EVERY),
    Fact(255, "largest UINT8 value", "8-bit unsigned integer", EVERY),
    Fact(448, "largest finite FP8 E4M3 value", "OCP 8-bit floating point specification (E4M3)", EVERY),
    Fact(57344, "largest finite FP8 E5M2 value", "OCP 8-bit floating point specification (E5M2)", EVERY),
    Fact(6, "dB of SQNR per bit (20·log10 2 = 6.02)", "uniform quantization noise, variance step²/12", EVERY,
         lambda: round(20 * math.log10(2))),
    Fact(20, "the factor of a decibel ratio of amplitudes (20·log10)", "definition of the decibel", EVERY),
    Fact(100, "a whole, in percent", "identity", EVERY),
    # published anchors
    Fact(0.55, "TensorRT BERT-base seq 128 on A100, batch 1, INT8 latency (ms)",
         "NVIDIA TensorRT BERT inference results (A100), as cited in the course FACTS", ("01_why_gpu_inference",)),
    # chapter 2
    Fact(768, "BERT-base hidden size", "Devlin et al. 2019, BERT-base configuration", CH02),
    Fact(128, "BERT-base sequence length used by the course", "helpers.models.bert.bert_base", CH02, _bert_seq),
    Fact(8192, "largest square GEMM of the GPU sweep", "helpers.chapters.ch02_gpu_architecture.experiments.GPU_SIZES",
         CH02, _const("helpers.chapters.ch02_gpu_architecture.experiments", "GPU_SIZES", max)),
    # chapter 3: the sector model and the kernels' parameters
    Fact(128, "bytes in a cache line", f"{GUIDE}, device memory accesses", CH03, _ap("LINE")),
    Fact(4, "sectors one warp of 32 consecutive floats needs", "the sector model", CH03, _sectors(lambda t: t)),
    Fact(5, "sectors one warp needs when misaligned by one float", "the sector model", CH03,
         _sectors(lambda t: t + 1)),
    Fact(25, "extra sectors of a one-float misalignment, percent", "the sector model", CH03,
         lambda: 100 * (_sectors(lambda t: t + 1)() / _sectors(lambda t: t)() - 1)),
    Fact(0.125, "the sector model's bandwidth at stride 32 (1/8) and from stride 8 on", "the sector model", CH03,
         _stride_model(32)),
    Fact(512, "MiB per copy buffer", "helpers.chapters.ch03_memory_hierarchy.memory_bench.COPY_N", CH03,
         _mb(lambda m: m.COPY_N * 4 / 2**20)),
    Fact(16, "bytes of a float4 load", "CUDA vector types (float4 = 4 × float32)", CH03),
    Fact(33, "padded tile pitch (TILE + 1)", "helpers.kernels.transpose", CH03, lambda: _transpose("TILE")() + 1),
    Fact(8192, "transpose matrix side", "helpers.chapters.ch03_memory_hierarchy.memory_bench.TRANSPOSE_N", CH03,
         _mb(lambda m: m.TRANSPOSE_N)),
    Fact(256, "MiB of the transpose matrix", "memory_bench.TRANSPOSE_N", CH03,
         _mb(lambda m: m.TRANSPOSE_N ** 2 * 4 / 2**20)),
    Fact(8, "rows of threads per transpose tile (32×8 threads)", "helpers.kernels.transpose.ROWS", CH03,
         _transpose("ROWS")),
    Fact(4, "stencil radius", "memory_bench.STENCIL_RADIUS", CH03, _mb(lambda m: m.STENCIL_RADIUS)),
    # chapter 4
    Fact(7.0, "compute capability of Volta", "NVIDIA V100 datasheet; helpers.perf.specs", CH04, _spec("V100 SXM2", "cc")),
    Fact(256, "MiB copied by the occupancy sweep (and its threads per block)", "warp_bench.OCCUPANCY_N", CH04,
         _occupancy_mib),
    # chapter 5 and 5b
    Fact(-0.3, "lower end of the asymmetric example range", "figures.grid_figure (lo = -0.3 × amax)", CH05),
    Fact(2, "bits at the low end of the explorer", "explorer.BITS_RANGE", CH05B, _explorer_bits(0)),
    Fact(3, "a bit width on the explorer's slider (2 to 8)", "explorer.BITS_RANGE", CH05B),
    Fact(256, "levels of an 8-bit grid (2^8)", "two's-complement 8-bit integer", CH05B),
    # the labs: the data they use and the parameters of their checks
    Fact(17, "distinct pixel values of scikit-learn's digits (0 to 16)", "sklearn.datasets.load_digits", LAB05,
         _digits_levels),
    Fact(1 / 16, "where the entropy search starts: bin 128 of 2048 (digits collapse to it)",
         "helpers.quant.calibrators (pytorch-quantization 2.1.3's defaults)", LAB05, _entropy_start_fraction),
    Fact(2.5, "points the QAT check allows below the reference loop", "helpers.labs.lab07_qat.kit.QAT_TOLERANCE_PTS",
         LAB07, _const("helpers.labs.lab07_qat.kit", "QAT_TOLERANCE_PTS")),
    Fact(1.5, "points of accuracy the fixed deployment may lose against FP32",
         "helpers.labs.lab09_troubleshoot.kit.ACCURACY_SLACK_PTS", LAB09,
         _const("helpers.labs.lab09_troubleshoot.kit", "ACCURACY_SLACK_PTS")),
    Fact(1.5, "speed-up over the shipped model the fixed deployment needs", "helpers.labs.lab09_troubleshoot.kit.MIN_SPEEDUP",
         LAB09, _const("helpers.labs.lab09_troubleshoot.kit", "MIN_SPEEDUP")),
    Fact(30, "the factor of the planted preprocessing bug", "helpers.labs.lab09_troubleshoot.deployment.PREPROCESSING_BUG",
         LAB09, _const("helpers.labs.lab09_troubleshoot.deployment", "PREPROCESSING_BUG")),
    Fact(64, "threads a block in the checks (TILE = 8, blocks of 8 × 8)",
         "helpers.labs.lab11_gemm_kernels.kit.SIM_TILE", LAB11,
         _const("helpers.labs.lab11_gemm_kernels.kit", "SIM_TILE", lambda t: t * t)),
    Fact(4096, "matrix side of the GPU timings", "helpers.labs.lab11_gemm_kernels.bench.N", LAB11,
         _const("helpers.labs.lab11_gemm_kernels.bench", "N")),
    Fact(680, "FLOPs per byte of an n³ FP32 GEMM at minimum DRAM traffic, 2n³ / 12n² = n / 6, for n = 4096, "
              "to two digits", "arithmetic on helpers.labs.lab11_gemm_kernels.bench.N", LAB11,
         _const("helpers.labs.lab11_gemm_kernels.bench", "N", lambda n: round(n / 6, -1))),
    Fact(16, "rows (M) and inputs (K) of one mma.sync m16n8k16 tile, the instruction chapter 12's GEMM runs",
         "PTX ISA, warp-level matrix multiply-accumulate, shape .m16n8k16", LAB13),
    Fact(8, "columns (N) of one mma.sync m16n8k16 tile",
         "PTX ISA, warp-level matrix multiply-accumulate, shape .m16n8k16", LAB13),
)
