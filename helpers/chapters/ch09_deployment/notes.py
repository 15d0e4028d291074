"""What the lecture notes say about TensorRT and INT8 deployment, registered in the course's claims
registry and judged by chapter 9's measurements and by published TensorRT numbers.

Serves: chapter 9.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, combine, fmt
from helpers.models.bert import TRT_A100_BERT_MS
DOUBLE = 1.9  # "roughly doubles"


FP32, FP16 = "ch09.bert.seq_per_s.fp32_eager", "ch09.bert.seq_per_s.fp16_eager"
FP16_GRAPHS, INT8_OVER_FP32 = "ch09.bert.seq_per_s.fp16_cuda_graphs", "bert_base.int8_over_fp32_eager"


def _ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing."""
    return None if a is None or b is None else a / b


def _int8_doubles(m: Values) -> tuple[str, str]:
    """Judged against FP32, the notes' baseline (their example: FP32 12 ms, FP16 3 ms)."""
    fp16_x, int8_x = _ratio(m.get(FP16), m.get(FP32)), m.get(INT8_OVER_FP32)
    graphs_x = _ratio(m.get(FP16_GRAPHS), m.get(FP32))
    ours, bound2 = m.get("bert_base.int8_over_fp16"), m.get("ch09.bert.int8_amdahl_bound_2x")
    published = {b: fp16 / int8 for b, (int8, fp16) in TRT_A100_BERT_MS.items()}
    pub = ", ".join(f"{r:.2f}× at batch {b}" for b, r in published.items())
    parts = {"FP16": NOT_MEASURED if fp16_x is None else (HOLDS if fp16_x >= DOUBLE else FAILS),
             "INT8": NOT_MEASURED if int8_x is None else (HOLDS if int8_x >= DOUBLE else FAILS)}
    evidence = (f"against FP32 eager PyTorch (BERT-base, batch 32): FP16 runs {fmt(fp16_x, '×')} as fast with the "
                f"same eager kernels, and the course's fastest INT8 {fmt(int8_x, '×')}, with CUDA graphs that the "
                f"FP32 run lacks (FP16 with CUDA graphs: {fmt(graphs_x, '×')}). Over FP16, INT8 itself gives "
                f"{fmt(ours, '×')} here, at most {fmt(bound2, '×')} even with GEMMs twice as fast (Amdahl), and "
                f"TensorRT's published BERT-base INT8 ÷ FP16 on an A100 is {pub}"
                + (": the doubling comes from leaving FP32 for 16-bit Tensor Cores"
                   if fp16_x is not None and fp16_x >= DOUBLE and (ours is None or ours < DOUBLE) else ""))
    return evidence, combine(parts)


def _int8_doubles_zh(m: Values) -> str:
    fp16_x, int8_x = _ratio(m.get(FP16), m.get(FP32)), m.get(INT8_OVER_FP32)
    over16 = m.get("bert_base.int8_over_fp16")
    why = "" if over16 is None or over16 >= DOUBLE else "：翻倍来自离开 FP32，而不是 INT8 相对 FP16"
    return (f"相对 FP32（eager PyTorch，批大小 32）：FP16 快 {fmt(fp16_x, '×')}，INT8 快 {fmt(int8_x, '×')}（含 CUDA graphs）；"
            f"INT8 相对 FP16 为 {fmt(over16, '×')}{why}")


def _trt_api(_m: Values) -> tuple[str, str]:
    return ("TensorRT 10 networks are always explicit-batch (createNetworkV2 in C++, create_network in Python; "
            "the implicit-batch createNetwork and batch-less input shapes are gone), convolutions are added "
            "with addConvolutionNd, and TensorRT 11 builds strongly typed networks whose INT8 comes only "
            "from Q/DQ nodes: the course's helpers/deploy/tensorrt_backend.py is written that way"), "outdated"


def _layer_fusion(m: Values) -> tuple[str, str]:
    eager, compiled = m.get("ch09.bert.seq_per_s.fp16_eager"), m.get("ch09.bert.seq_per_s.fp16_compiled")
    share = m.get("ch09.bert.fp16_gemm_share")
    if eager is None or compiled is None:
        return "FP16 BERT-base was not timed eager and compiled", NOT_MEASURED
    gain = compiled / eager
    return (f"torch.compile, which fuses the elementwise kernels between the GEMMs, runs FP16 BERT-base at "
            f"{gain:.2f}× the eager model; the non-GEMM kernels still take {'–' if share is None else f'{1 - share:.0%}'} "
            "of the compiled model's GPU time"), HOLDS if gain > 1.05 else FAILS


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch09.int8_doubles_speed", 9, "notes 2 §1.3.1",
        "TensorRT's precision calibration, FP16 or INT8 quantization, doubles inference speed.",
        "TensorRT 的精度校准支持 FP16、INT8 量化，推理速度翻倍。",
        _int8_doubles, "NVIDIA's TensorRT BERT-base results (A100, seq 128); chapter 9's BERT-base timings and "
        "GPU time split", (FP32, FP16, FP16_GRAPHS, INT8_OVER_FP32, "bert_base.int8_over_fp16",
                           "ch09.bert.int8_amdahl_bound_2x"),
        baseline="FP32, what the notes compare with (their BERT example with TensorRT: 6 ms in FP32, 3 ms in FP16)",
        summary_zh=_int8_doubles_zh),
    registry.Claim(
        "ch09.layer_fusion", 9, "notes 2 §1.3.1",
        "Layer fusion merges several layers into one kernel and saves memory traffic.",
        "层融合把多个计算层合并成一个内核，减少显存读写。",
        _layer_fusion, "chapter 9's BERT-base timings (eager vs torch.compile) and GPU time split",
        ("ch09.bert.seq_per_s.fp16_eager", "ch09.bert.seq_per_s.fp16_compiled", "ch09.bert.fp16_gemm_share"),
        baseline="the same FP16 model unfused (eager PyTorch, one kernel per operation)",
        summary_zh=lambda m: (f"torch.compile 融合 GEMM 之间的逐元素内核后，FP16 BERT-base 速度为 eager 的 "
                              f"{fmt(_ratio(m.get('ch09.bert.seq_per_s.fp16_compiled'), m.get(FP16)), '×')}")),
    registry.Claim(
        "ch09.trt_api", 9, "notes 2 §1.3.1",
        "A TensorRT engine is built with createNetwork(), an input of shape (3, 224, 224) and addConvolution.",
        "用 createNetwork()、形状为 (3, 224, 224) 的输入和 addConvolution 构建 TensorRT 引擎。",
        _trt_api, "TensorRT 10.13 Python API (tensorrt-stubs 10.13: 'networks are always explicit batch'); "
        "TensorRT 11 release notes (precision flags and implicit quantization removed)",
        baseline="the current TensorRT 10/11 API",
        summary_zh="TensorRT 10 的网络总是显式批维度（createNetworkV2 / create_network），卷积用 addConvolutionNd；"
                   "TensorRT 11 只接受强类型网络，INT8 只来自 Q/DQ 节点"),
)
registry.register(*CLAIMS)
