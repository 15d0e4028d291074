"""What the lecture notes say about sparsity, dynamic scales, layouts, mixed precision and CPU-GPU
splits, registered in the course's claims registry and judged by chapter 10's measurements.

Serves: chapter 10.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.chapters.ch10_beyond_int8.readings import (ABOVE, INSIDE, NO_SPREAD, NO_SPREAD_ZH, NOTES_SPLIT_GAIN,
                                                        UNKNOWN, side)
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, combine, fmt
from helpers.findings import NOT_RESOLVED, NOT_RESOLVED_ZH, spread_of


def _speedup(m: Values, name: str) -> str:
    """Whether the speed-up `name` is real: HOLDS above 1 beyond its stored spread, FAILS below it, NOT_RESOLVED
    when the spread holds 1, and NOT_RESOLVED too when no spread is stored (the evidence then says so): a bare
    ratio near 1 decided 'holds' on one stored run and 'doesn't hold' on the next."""
    v = m.get(name)
    if v is None:
        return NOT_MEASURED
    where = side(spread_of(m, name))
    if where == UNKNOWN:
        return NOT_RESOLVED
    return NOT_RESOLVED if where == INSIDE else HOLDS if where == ABOVE else FAILS


def _unstored(m: Values, *names: str) -> bool:
    """True when one of the measured `names` has no spread stored with it."""
    return any(m.get(n) is not None and spread_of(m, n) is None for n in names)


def _noise_note(m: Values, *names: str) -> str:
    """'; no spread is stored …' when a measured ratio has no stored spread, else ''."""
    return f"; {NO_SPREAD}" if _unstored(m, *names) else ""


def _noise_note_zh(m: Values, *names: str) -> str:
    """The Chinese of ``_noise_note``."""
    return f"；{NO_SPREAD_ZH}" if _unstored(m, *names) else ""


def _combine(parts: dict[str, str]) -> str:
    """``claims.combine``, where a part inside the noise makes the whole NOT_RESOLVED unless another part holds."""
    if NOT_RESOLVED not in parts.values():
        return combine(parts)
    held = [k for k, v in parts.items() if v == HOLDS]
    return "depends: holds for " + ", ".join(held) if held else NOT_RESOLVED


UNSTRUCTURED = ("ch10.sparsity.gpu_unstructured_speedup", "ch10.sparsity.cpu_unstructured_speedup")


def _unstructured(m: Values) -> tuple[str, str]:
    gpu, cpu = (m.get(n) for n in UNSTRUCTURED)
    decider = UNSTRUCTURED[0] if gpu is not None else UNSTRUCTURED[1]  # the GPU timing is the steadier one
    verdict = _speedup(m, decider)
    why = {FAILS: ": scattered zeros are multiplied like any other number, so the zeros buy no speed",
           HOLDS: ": the zeros bought speed on this stack", NOT_MEASURED: "",
           NOT_RESOLVED: f": the speed-up is {NOT_RESOLVED}, the zeros buy no speed beyond it"}[verdict]
    return (f"the same matmul with half its weights zeroed anywhere runs {fmt(gpu, '×')} as fast on the GPU "
            f"({fmt(cpu, '×')} on the CPU, a noisier timing){why}{_noise_note(m, decider)}"), verdict


def _atomic_add(m: Values) -> tuple[str, str]:
    r = m.get("ch10.dynamic.atomicadd_in_range")
    if r is None:
        return "the two kernels were not run", NOT_MEASURED
    return (f"the atomicAdd scale stays within 2× of the correct running scale for {r:.0%} of the batches, "
            "then runs away (to infinity in float32): atomicAdd adds its argument to the old value, and every "
            "thread does it"), FAILS if r < 1 else HOLDS


SPLIT_GAINS = ("ch10.pipeline.split_gain.k1", "ch10.pipeline.split_gain.k2")


def _split_gain(m: Values) -> str:
    """The +15 % half of the split claim: the better split's gain against +15 %, by its rounds' spread."""
    if any(m.get(n) is None for n in SPLIT_GAINS):
        return NOT_MEASURED
    best = max(SPLIT_GAINS, key=lambda n: m.get(n))
    where = side(spread_of(m, best), NOTES_SPLIT_GAIN)
    if where == UNKNOWN:
        return HOLDS if m.get(best) >= NOTES_SPLIT_GAIN else FAILS
    return NOT_RESOLVED if where == INSIDE else HOLDS if where == ABOVE else FAILS


def _split_verdict(fewer: str, gain: str) -> str:
    """The split claim as a whole: its premise is fewer PCIe bytes, so more bytes fail it whatever the noise
    of the frame rate; otherwise the two halves combine as usual."""
    if fewer == FAILS and gain in (FAILS, NOT_RESOLVED):
        return FAILS
    return _combine({"fewer PCIe bytes": fewer, "+15% end to end": gain})


def _split(m: Values) -> tuple[str, str]:
    b1, b2 = m.get("ch10.pipeline.split_bytes_ratio.k1"), m.get("ch10.pipeline.split_bytes_ratio.k2")
    g1, g2 = (m.get(n) for n in SPLIT_GAINS)
    fewer = NOT_MEASURED if b1 is None or b2 is None else (HOLDS if min(b1, b2) < 1 else FAILS)
    gains = "not measured on a GPU yet" if g1 is None or g2 is None else f"{g1:+.0%} and {g2:+.0%}"
    return (f"with 1 or 2 conv blocks on the CPU each frame sends {fmt(b1, '×')} and {fmt(b2, '×')} the bytes "
            f"of the unsplit pipeline over PCIe; end-to-end frame rate {gains} against no split"
            f"{_noise_note(m, *SPLIT_GAINS)}"), _split_verdict(fewer, _split_gain(m))


NHWC = ("ch10.layout.fp16_nhwc_speedup", "ch10.layout.int8_nhwc_speedup")


def _nhwc(m: Values) -> tuple[str, str]:
    f, i = (m.get(n) for n in NHWC)
    verdict = _combine({"FP16 conv": _speedup(m, NHWC[0]), "INT8 1x1 conv": _speedup(m, NHWC[1])})
    if verdict == HOLDS:
        verdict = "depends: holds for the layout advice, not for the descriptor call"
    return (f"NHWC ÷ NCHW speed: FP16 3x3 conv {fmt(f, '×')}, INT8 1x1 conv {fmt(i, '×')}{_noise_note(m, *NHWC)}. "
            "cudnnSetTensor4dDescriptorEx takes the sizes as N, C, H, W and one stride per dimension "
            "(NHWC: H·W·C, 1, W·C, C); the notes pass N, H, W, C and strides of another layout"), verdict


def _nhwc_zh(m: Values) -> str:
    f, i = (m.get(n) for n in NHWC)
    inside = any(_speedup(m, n) == NOT_RESOLVED for n in NHWC)
    return (f"NHWC ÷ NCHW 速度：FP16 3x3 卷积 {fmt(f, '×')}，INT8 1x1 卷积 {fmt(i, '×')}"
            f"{'（' + NOT_RESOLVED_ZH + '）' if inside else ''}{_noise_note_zh(m, *NHWC)}；"
            "cudnnSetTensor4dDescriptorEx 的尺寸顺序是 N、C、H、W，讲义的参数顺序和步长都不对")


MIXED_K0 = "ch10.mixed.cuda.speed.k0"


def _mixed(m: Values) -> tuple[str, str]:
    a0, a2 = m.get("ch10.mixed.acc.k0"), m.get("ch10.mixed.acc.k2")
    s0, s10 = m.get(MIXED_K0), m.get("ch10.mixed.cuda.speed.k10")
    acc = NOT_MEASURED if a0 is None or a2 is None else (HOLDS if a2 > a0 + 1 else FAILS)
    speed = _speedup(m, MIXED_K0)
    slow = {NOT_MEASURED: "", FAILS: ": eager INT8 layers are slower than FP16 ones here",
            HOLDS: ": the INT8 layers are faster than FP16 ones here",
            NOT_RESOLVED: f": INT8 and FP16 layers are {NOT_RESOLVED}"}[speed]
    return (f"accuracy {fmt(a0, '%')} with every layer INT8, {fmt(a2, '%')} with two kept in float; GPU speed "
            f"{fmt(s0, '×')} the all-FP16 model with every layer INT8 ({fmt(s10, '×')} with none){slow}"
            f"{_noise_note(m, MIXED_K0)}"), _combine({"accuracy": acc, "INT8 faster than FP16": speed})


def _unstructured_zh(m: Values) -> str:
    gpu, cpu = (m.get(n) for n in UNSTRUCTURED)
    decider = UNSTRUCTURED[0] if gpu is not None else UNSTRUCTURED[1]
    why = {NOT_MEASURED: "", FAILS: "：零也照样相乘，不省时间", HOLDS: "：确有加速",
           NOT_RESOLVED: f"：加速{NOT_RESOLVED_ZH}，零不带来可分辨的加速"}[_speedup(m, decider)]
    return (f"一半权重随机置零后，同一矩阵乘法在 GPU 上的速度为原来的 {fmt(gpu, '×')}（CPU 上 {fmt(cpu, '×')}）{why}"
            f"{_noise_note_zh(m, decider)}")


def _split_zh(m: Values) -> str:
    b1, b2 = m.get("ch10.pipeline.split_bytes_ratio.k1"), m.get("ch10.pipeline.split_bytes_ratio.k2")
    g1, g2 = (m.get(n) for n in SPLIT_GAINS)
    gains = "尚未在 GPU 上测量" if g1 is None or g2 is None else f"{g1:+.0%} 和 {g2:+.0%}"
    more = "（卷积增加了通道数）" if b1 is not None and b2 is not None and min(b1, b2) > 1 else ""
    inside = f"，能否达到 +15% {NOT_RESOLVED_ZH}" if _split_gain(m) == NOT_RESOLVED else ""
    return (f"前 1 或 2 个卷积块放到 CPU 上后，每帧经 PCIe 传输的字节是不拆分时的 {fmt(b1, '×')} 和 {fmt(b2, '×')}"
            f"{more}；端到端帧率变化 {gains}{inside}{_noise_note_zh(m, *SPLIT_GAINS)}")


def _mixed_zh(m: Values) -> str:
    a0, a2, s0 = m.get("ch10.mixed.acc.k0"), m.get("ch10.mixed.acc.k2"), m.get(MIXED_K0)
    slow = {NOT_MEASURED: "", FAILS: "：eager 的 INT8 层比 FP16 层慢", HOLDS: "：INT8 层比 FP16 层快",
            NOT_RESOLVED: f"：两者速度{NOT_RESOLVED_ZH}"}[_speedup(m, MIXED_K0)]
    return (f"全部 INT8 时准确率 {fmt(a0, '%')}，两层保留浮点时 {fmt(a2, '%')}；全部 INT8 的 GPU 速度是全 FP16 的 "
            f"{fmt(s0, '×')}{slow}{_noise_note_zh(m, MIXED_K0)}")


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch10.unstructured_sparsity", 10, "notes 3 §6.1",
        "Combine pruning with quantization: zero the weights below a magnitude threshold, then quantize.",
        "将权重剪枝与量化结合：把幅值低于阈值的权重置零，再进行量化。",
        _unstructured, "chapter 10 §1: the same matmul with and without half of its weights set to zero",
        ("ch10.sparsity.cpu_unstructured_speedup", "ch10.sparsity.gpu_unstructured_speedup"),
        baseline="the same matmul with dense weights (the notes offer pruning among ways to speed inference up, "
        "without a number)", summary_zh=_unstructured_zh),
    registry.Claim(
        "ch10.atomicadd_scale", 10, "notes 3 §6.2",
        "Update the quantization scale at run time with atomicAdd(scale, 0.9·scale + 0.1·new_scale).",
        "在运行时用 atomicAdd(scale, 0.9·scale + 0.1·new_scale) 更新量化缩放因子。",
        _atomic_add, "chapter 10 §2: both kernels on the same batches (CUDA simulator without a GPU)",
        ("ch10.dynamic.atomicadd_in_range",),
        baseline="the running average the notes describe, scale = 0.9·scale + 0.1·new_scale, computed once",
        summary_zh=lambda m: ("两个核函数尚未运行" if m.get("ch10.dynamic.atomicadd_in_range") is None else
                              f"用 atomicAdd 更新的缩放因子只有 {m['ch10.dynamic.atomicadd_in_range']:.0%} 的批次在正确值的 2 倍以内，"
                              "随后发散：atomicAdd 是把参数加到旧值上，而且每个线程都加")),
    registry.Claim(
        "ch10.nhwc", 10, "notes 3 §4.1",
        "NHWC usually suits the GPU better than NCHW; set it with cudnnSetTensor4dDescriptorEx(n, h, w, c, …).",
        "NHWC 通常比 NCHW 更适合 GPU；用 cudnnSetTensor4dDescriptorEx 按 n、h、w、c 的顺序设置。",
        _nhwc, "chapter 10 §5 timings; cuDNN API reference (cudnnSetTensor4dDescriptorEx, CUDNN_TENSOR_NHWC)",
        ("ch10.layout.fp16_nhwc_speedup", "ch10.layout.int8_nhwc_speedup"),
        baseline="the same convolutions in NCHW; the cuDNN API reference for the call",
        summary_zh=_nhwc_zh),
    registry.Claim(
        "ch10.mixed_precision", 10, "notes 3 §4.2",
        "Keeping the key layers in FP16 and the rest in INT8 balances speed and accuracy.",
        "关键层保持 FP16、其余层用 INT8，可以在速度和精度之间取得平衡。",
        _mixed, "chapter 10 §4: fake-quant accuracy per k, and real INT8/FP16 layers timed on the GPU",
        ("ch10.mixed.acc.k0", "ch10.mixed.acc.k2", "ch10.mixed.cuda.speed.k0", "ch10.mixed.cuda.speed.k10"),
        baseline="every layer INT8 (for accuracy) and every layer FP16 (for speed)", summary_zh=_mixed_zh),
    registry.Claim(
        "ch10.cpu_first_layers", 10, "notes 3 §6.3",
        "Running the model's first one or two layers on the CPU cuts PCIe traffic and gives about 15% end to end on video.",
        "把模型的前 1–2 层放到 CPU 上运行可以显著降低 PCIe 传输开销，视频流端到端性能约提升 15%。",
        _split, "chapter 10 §6: bytes per frame from the tensor shapes; pipelined frame rate on the GPU",
        ("ch10.pipeline.split_bytes_ratio.k1", "ch10.pipeline.split_bytes_ratio.k2",
         "ch10.pipeline.split_gain.k1", "ch10.pipeline.split_gain.k2"),
        baseline="the same pipeline with every layer on the GPU (no split)", summary_zh=_split_zh),
)
registry.register(*CLAIMS)
