"""What the lecture notes say about TensorRT and INT8 deployment, registered in the course's claims
registry and judged by chapter 9's measurements and by published TensorRT numbers.

Serves: chapter 9.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, combine, fmt
from helpers.models.bert import TRT_A100_BERT_MS
DOUBLE = 1.9  # "roughly doubles"


BERT = "ch09.engine.bert."  # chapter 9's BERT-base paths (batch 32, seq 128), sequences/s
FP32, FP16 = BERT + "fp32_eager", BERT + "fp16_compiled_+_CUDA_graph"
INT8_OVER_FP32, INT8_OVER_FP16 = "bert_base.int8_over_fp32_eager", "bert_base.int8_over_fp16"
KERNELS = "ch09.engine.kernels.BERTbase."  # kernels one forward launched (profiler), per path
UNFUSED_K, FUSED_K = KERNELS + "fp16_eager_+_CUDA_graph", KERNELS + "fp16_engine_+_CUDA_graph"
INDUCTOR_K = KERNELS + "fp16_compiled_+_CUDA_graph"


def _ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing."""
    return None if a is None or b is None else a / b


def _int8_doubles(m: Values) -> tuple[str, str]:
    """Judged against FP32, the notes' baseline (their example: FP32 6 ms, FP16 3 ms)."""
    fp16_x, int8_x, over16 = _ratio(m.get(FP16), m.get(FP32)), m.get(INT8_OVER_FP32), m.get(INT8_OVER_FP16)
    published = {b: fp16 / int8 for b, (int8, fp16) in TRT_A100_BERT_MS.items()}
    pub = ", ".join(f"{r:.2f}× at batch {b}" for b, r in published.items())
    parts = {"FP16": NOT_MEASURED if fp16_x is None else (HOLDS if fp16_x >= DOUBLE else FAILS),
             "INT8": NOT_MEASURED if int8_x is None else (HOLDS if int8_x >= DOUBLE else FAILS)}
    evidence = (f"against FP32 eager PyTorch (BERT-base, batch 32, seq 128): FP16 compiled and replayed as a CUDA "
                f"graph runs {fmt(fp16_x, '×')} as fast and the course's INT8 engine {fmt(int8_x, '×')}. Over the "
                f"run's fastest FP16 path (FP16 compiled or the engine in FP16), INT8 itself gives {fmt(over16, '×')} "
                f"here, and TensorRT's published BERT-base INT8 ÷ FP16 "
                f"on an A100 is {pub}"
                + (": the doubling comes from leaving FP32 for 16-bit Tensor Cores (and from fusion and graphs), "
                   "not from INT8 over FP16" if fp16_x is not None and fp16_x >= DOUBLE and
                   (over16 is None or over16 < DOUBLE) else ""))
    return evidence, combine(parts)


def _int8_doubles_zh(m: Values) -> str:
    fp16_x, int8_x, over16 = _ratio(m.get(FP16), m.get(FP32)), m.get(INT8_OVER_FP32), m.get(INT8_OVER_FP16)
    why = "" if over16 is None or over16 >= DOUBLE else "：翻倍来自离开 FP32（以及融合与 CUDA graph），而不是 INT8 相对 FP16"
    return (f"相对 FP32（eager PyTorch，批大小 32）：FP16（编译 + CUDA graph）快 {fmt(fp16_x, '×')}，INT8 引擎快 "
            f"{fmt(int8_x, '×')}；INT8 相对本次最快的 FP16 路径（编译版或 FP16 引擎）为 {fmt(over16, '×')}{why}")


def _trt_api(_m: Values) -> tuple[str, str]:
    return ("TensorRT 10 networks are always explicit-batch (createNetworkV2 in C++, create_network in Python; "
            "the implicit-batch createNetwork and batch-less input shapes are gone), convolutions are added "
            "with addConvolutionNd, and TensorRT 11 builds strongly typed networks whose INT8 comes only "
            "from Q/DQ nodes: the course's helpers/deploy/tensorrt_backend.py is written that way"), "outdated"


def _layer_fusion(m: Values) -> tuple[str, str]:
    """Judged by what fusion is: fewer kernels per forward (the profiler's count, both paths in a CUDA graph, same
    FP16 precision), and less memory traffic between them (needs DRAM counters, not stored)."""
    unfused, fused, inductor = m.get(UNFUSED_K), m.get(FUSED_K), m.get(INDUCTOR_K)
    if unfused is None or fused is None:
        return ("the unfused and the fused FP16 BERT-base forward were not both traced on this run (kernels per "
                "forward come from the profiler: a GPU run of chapter 9 stores them)"), NOT_MEASURED
    parts = {"one kernel for several layers": HOLDS if fused < unfused else FAILS,
             "less memory traffic": NOT_MEASURED}
    return (f"one FP16 BERT-base forward launches {unfused:.0f} kernels unfused (eager, replayed as a CUDA graph) and "
            f"{fused:.0f} in the course's engine, which fuses bias, activation, residual add and quantize into the "
            f"GEMMs (torch.compile's fusions: {fmt(inductor, '')} kernels); the bytes the fused kernels no longer "
            "write and read back need Nsight Compute's DRAM counters, which this run did not store"), combine(parts)


def _layer_fusion_zh(m: Values) -> str:
    unfused, fused = m.get(UNFUSED_K), m.get(FUSED_K)
    if unfused is None or fused is None:
        return "本次运行没有同时记录未融合与融合的 FP16 BERT-base 前向（每次前向的内核数来自 profiler，需在 GPU 上运行第 9 章）"
    return (f"一次 FP16 BERT-base 前向：未融合（eager，CUDA graph 重放）启动 {unfused:.0f} 个内核，课程引擎融合后 "
            f"{fused:.0f} 个；省下的显存读写需要 Nsight Compute 的 DRAM 计数，本次未记录")


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch09.int8_doubles_speed", 9, "notes 2 §1.3.1",
        "TensorRT's precision calibration, FP16 or INT8 quantization, doubles inference speed.",
        "TensorRT 的精度校准支持 FP16、INT8 量化，推理速度翻倍。",
        _int8_doubles, "NVIDIA's TensorRT BERT-base results (A100, seq 128); chapter 9's BERT-base timings with the 8-bit "
        "engine", (FP32, FP16, INT8_OVER_FP32, INT8_OVER_FP16),
        baseline="FP32, what the notes compare with (their BERT example with TensorRT: 6 ms in FP32, 3 ms in FP16)",
        summary_zh=_int8_doubles_zh),
    registry.Claim(
        "ch09.layer_fusion", 9, "notes 2 §1.3.1",
        "Layer fusion merges several layers into one kernel and saves memory traffic.",
        "层融合把多个计算层合并成一个内核，减少显存读写。",
        _layer_fusion, "chapter 9's BERT-base forward traced with the profiler: kernels per forward, unfused and fused",
        (UNFUSED_K, FUSED_K, INDUCTOR_K),
        baseline="the same FP16 model unfused (eager PyTorch, one kernel per operation), replayed as a CUDA graph",
        summary_zh=_layer_fusion_zh),
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
