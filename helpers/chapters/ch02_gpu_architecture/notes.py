"""What the lecture notes (and circulating figures) say about GPU hardware, judged by datasheets and GEMMs.

Registered in ``helpers.claims``; the notebook shows them with ``claims.show(2)`` and one callout
where the student meets each topic. Datasheet numbers come from ``helpers.perf.specs`` (cited there),
measured ones from this session or the stored runs.

Serves: chapter 2.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, fmt
from helpers.perf import specs

A100_BOOST_GHZ = 1.41      # NVIDIA A100 whitepaper: boost clock of the A100 SXM
A100_TENSOR_CORES_PER_SM = 4


def _spec(name: str) -> specs.GPUSpec:
    """One row of the datasheet table by its name."""
    return next(s for s in specs.SPECS if s.name == name)


def _a100_fma_per_clock(_: Values) -> tuple[str, str]:
    a100 = _spec("A100 SXM 80GB")
    per_tc = a100.fp16 * 1e12 / (2 * a100.sms * A100_TENSOR_CORES_PER_SM * A100_BOOST_GHZ * 1e9)
    return (f"{a100.fp16:g} TFLOP/s ÷ ({a100.sms} SMs × {A100_TENSOR_CORES_PER_SM} Tensor Cores × "
            f"{A100_BOOST_GHZ} GHz × 2 FLOP per FMA) = {per_tc:.0f} FP16 FMAs per clock per Tensor Core, "
            f"{per_tc * A100_TENSOR_CORES_PER_SM:.0f} per SM: the notes' figure is the whole SM's"), \
        HOLDS if abs(per_tc - 1024) < 64 else FAILS


def _int8_double(m: Values) -> tuple[str, str]:
    h = _spec("H200 SXM")
    r = m.get("gemm.int8_over_bf16")
    measured = f"measured INT8 ÷ BF16 GEMM at the largest size both ran: {fmt(r, '×')}" if r is not None else "no GEMM measured yet"
    verdict = NOT_MEASURED if r is None else ("holds on paper only: the measured gain is "
                                              f"{r:.2f}×, not 2×" if r < 1.8 else HOLDS)
    return f"datasheet (H100/H200): INT8 {h.int8:g} TOPS ÷ FP16 {h.fp16:g} TFLOP/s = {h.int8 / h.fp16:.1f}×; {measured}", verdict


def _volta_int8(_: Values) -> tuple[str, str]:
    v, t = _spec("V100 SXM2"), _spec("T4")
    return (f"{v.name} (cc {v.cc}): INT8 Tensor Cores {'yes' if v.int8_tensor_cores else 'no'}, INT8 via dp4a "
            f"{v.int8:g} TOPS; {t.name} (cc {t.cc}, Turing): INT8 Tensor Cores "
            f"{'yes' if t.int8_tensor_cores else 'no'}, {t.int8:g} TOPS"), FAILS if not v.int8_tensor_cores else HOLDS


def _sparse(name: str, field: str, quoted: float):
    """A judge for a quoted figure that may be a 2:4-sparse number passed off as dense."""
    def judge(_: Values) -> tuple[str, str]:
        dense = getattr(_spec(name), field)
        what = "the 2:4-sparse figure (twice the dense one)" if abs(quoted - 2 * dense) < 0.02 * quoted else "neither"
        return f"{name} dense {field.upper()} {dense:g}; the quoted {quoted:g} is {what}", \
            HOLDS if abs(quoted - dense) < 0.02 * quoted else FAILS
    return judge


def _a100_zh() -> str:
    a100 = _spec("A100 SXM 80GB")
    per_tc = a100.fp16 * 1e12 / (2 * a100.sms * A100_TENSOR_CORES_PER_SM * A100_BOOST_GHZ * 1e9)
    return (f"由 {a100.fp16:g} TFLOP/s 折算，每个张量核心每周期 {per_tc:.0f} 次 FP16 乘加，每个 SM "
            f"{per_tc * A100_TENSOR_CORES_PER_SM:.0f} 次：讲义的数字是整个 SM 的")


def _int8_double_zh(m: Values) -> str:
    h, r = _spec("H200 SXM"), m.get("gemm.int8_over_bf16")
    return (f"数据手册：INT8 {h.int8:g} TOPS ÷ FP16 {h.fp16:g} TFLOP/s = {h.int8 / h.fp16:.1f} 倍；"
            f"实测 8192³ GEMM 的 INT8 ÷ BF16：{fmt(r, '×')}")


def _sparse_zh(name: str, field: str, quoted: float) -> str:
    """The Chinese summary of a quoted figure that is the 2:4-sparse one."""
    dense = getattr(_spec(name), field)
    return f"{name} 稠密 {field.upper()} 为 {dense:g}；{quoted:g} 是 2:4 稀疏的数字（稠密值的两倍）"


registry.register(
    registry.Claim(
        "ch02.a100_tensor_core_rate", 2, "notes 1 §1.2.2",
        "Each of the A100's four Tensor Cores per SM performs 1024 FP16 multiply-adds per clock.",
        "A100 每个 SM 有 4 个张量核心（Tensor Core），每个张量核心每个时钟周期执行 1024 次 FP16 乘加。",
        _a100_fma_per_clock, "NVIDIA A100 datasheet (312 TFLOP/s dense FP16, 108 SMs) and whitepaper (1.41 GHz)",
        baseline="the A100's published 312 TFLOP/s dense FP16, 108 SMs and 1.41 GHz boost clock",
        summary_zh=lambda m: _a100_zh()),
    registry.Claim(
        "ch02.int8_twice_fp16", 2, "notes 1 §1.3.1",
        "The INT8 Tensor Core rate is twice the FP16 rate.",
        "INT8 张量核心的算力是 FP16 的两倍。",
        _int8_double, "NVIDIA H100/H200 datasheets; this chapter's GEMM sweep (torch._int_mm vs bf16 matmul)",
        ("gemm.int8_over_bf16",),
        baseline="FP16 (BF16) Tensor Cores: the datasheet peaks, and the measured GEMM at the largest size",
        summary_zh=_int8_double_zh),
    registry.Claim(
        "ch02.volta_int8_tensor_cores", 2, "notes 3 §5.3",
        "The INT8 support table lists Volta (cc 7.0) as the generation that brought Tensor Cores to INT8.",
        "INT8 支持表把 Volta（计算能力 7.0）列为 INT8 开始使用张量核心的一代。",
        _volta_int8, "NVIDIA V100 and T4 datasheets; Turing whitepaper (INT8/INT4 Tensor Cores)",
        baseline="the V100 and T4 datasheets (which generation has INT8 Tensor Cores)",
        summary_zh="V100（Volta）的张量核心只做 FP16，INT8 靠 dp4a；INT8 张量核心从 Turing（T4，计算能力 7.5）开始"),
    registry.Claim(
        "ch02.h100_tf32_989", 2, "folklore",
        "The H100 runs TF32 at 989 TFLOP/s.", "H100 的 TF32 算力为 989 TFLOP/s。",
        _sparse("H100 SXM", "tf32", 989), "NVIDIA H100 datasheet (dense and sparse columns)",
        baseline="the datasheet's dense column", summary_zh=_sparse_zh("H100 SXM", "tf32", 989)),
    registry.Claim(
        "ch02.h100_int8_3958", 2, "folklore",
        "The H100 runs INT8 at 3958 TOPS.", "H100 的 INT8 算力为 3958 TOPS。",
        _sparse("H100 SXM", "int8", 3958), "NVIDIA H100 datasheet (dense and sparse columns)",
        baseline="the datasheet's dense column", summary_zh=_sparse_zh("H100 SXM", "int8", 3958)),
    registry.Claim(
        "ch02.a100_int8_1248", 2, "folklore",
        "The A100 runs INT8 at 1248 TOPS.", "A100 的 INT8 算力为 1248 TOPS。",
        _sparse("A100 SXM 80GB", "int8", 1248), "NVIDIA A100 datasheet (dense and sparse columns)",
        baseline="the datasheet's dense column", summary_zh=_sparse_zh("A100 SXM 80GB", "int8", 1248)),
)
