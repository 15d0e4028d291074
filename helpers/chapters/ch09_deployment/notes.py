"""What the lecture notes say about TensorRT and INT8 deployment, registered in the course's claims
registry and judged by chapter 9's measurements and by published TensorRT numbers.

Serves: chapter 9.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, fmt
from helpers.models.bert import TRT_A100_BERT_MS
DOUBLE = 1.9  # "roughly doubles"


def _int8_doubles(m: Values) -> tuple[str, str]:
    ours, bound2 = m.get("bert_base.int8_over_fp16"), m.get("ch09.bert.int8_amdahl_bound_2x")
    published = {b: fp16 / int8 for b, (int8, fp16) in TRT_A100_BERT_MS.items()}
    pub = ", ".join(f"{r:.2f}× at batch {b}" for b, r in published.items())
    evidence = (f"TensorRT's published BERT-base INT8 ÷ FP16 speed on an A100: {pub}; without TensorRT the course "
                f"measured {fmt(ours, '×')} at batch 32, and even GEMMs twice as fast would give at most "
                f"{fmt(bound2, '×')} (Amdahl: the rest of the model does not speed up)")
    known = [*published.values(), *(v for v in (ours, bound2) if v is not None)]
    return evidence, FAILS if max(known) < DOUBLE else HOLDS


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
        "TensorRT's INT8 (and FP16) calibration roughly doubles inference speed.",
        "TensorRT 的 INT8（以及 FP16）精度校准能让推理速度大约翻倍。",
        _int8_doubles, "NVIDIA's TensorRT BERT-base results (A100, seq 128); chapter 9's BERT-base timings and "
        "GPU time split", ("bert_base.int8_over_fp16", "ch09.bert.int8_amdahl_bound_2x")),
    registry.Claim(
        "ch09.layer_fusion", 9, "notes 2 §1.3.1",
        "Layer fusion merges several layers into one kernel and saves memory traffic.",
        "层融合把多个计算层合并成一个内核，减少显存读写。",
        _layer_fusion, "chapter 9's BERT-base timings (eager vs torch.compile) and GPU time split",
        ("ch09.bert.seq_per_s.fp16_eager", "ch09.bert.seq_per_s.fp16_compiled", "ch09.bert.fp16_gemm_share")),
    registry.Claim(
        "ch09.trt_api", 9, "notes 2 §1.3.1",
        "A TensorRT engine is built with createNetwork(), an input of shape (3, 224, 224) and addConvolution.",
        "用 createNetwork()、形状为 (3, 224, 224) 的输入和 addConvolution 构建 TensorRT 引擎。",
        _trt_api, "TensorRT 10.13 Python API (tensorrt-stubs 10.13: 'networks are always explicit batch'); "
        "TensorRT 11 release notes (precision flags and implicit quantization removed)"),
)
registry.register(*CLAIMS)
