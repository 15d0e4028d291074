"""Chapter 9's 8-bit engine against the best FP16 on a GPU: GEMMs at BERT shapes, BERT-base, ResNet-50, a time split.

Every comparison is timed in interleaved rounds (one timed block of each variant per round, CUDA events), so a slow
moment of the machine slows all of them alike; a ratio is the median of the per-round ratios, with their spread.

Serves: chapter 9.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import torch

from helpers.chapters.ch09_deployment.engine_tune import (BERT_SHAPES, codes, conv_name, interleaved, tune_convs,
                                                         tuned_row)

FORMATS = ("fp16", "fp8", "int8")  # fp16: the baseline through the same kernels


def gemm_table(tuned: dict[str, dict], shapes: tuple[tuple[int, int, int], ...] = BERT_SHAPES,
               rounds: int = 15) -> list[dict[str, Any]]:
    """FP16 cuBLAS (bias in its epilogue) against FP8 cuBLASLt and the engine's FP8/INT8 GEMMs, per BERT shape."""
    import torch.nn.functional as F

    from helpers.deploy.engine8 import kernels

    rows = []
    for m, n, k in shapes:
        x16 = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w16 = torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.05
        b16 = torch.randn(n, device="cuda", dtype=torch.float16)
        a8, w8 = codes((m, k), "fp8", 3), codes((n, k), "fp8", 4)
        ai, wi = codes((m, k), "int8", 5), codes((n, k), "int8", 6)
        ah, wh = codes((m, k), "fp16", 7), codes((n, k), "fp16", 8)
        one = torch.ones((), device="cuda")
        scale, bias = torch.full((n,), 1e-3, device="cuda"), b16.float()
        fns = {
            "fp16 cuBLAS": lambda: F.linear(x16, w16, b16),
            "fp16 engine": lambda: kernels.gemm(ah, wh, scale, bias=bias, config=tuned["fp16"].get((m, n, k))),
            "fp8 cuBLASLt": lambda: torch._scaled_mm(a8, w8.t(), one, one, bias=b16, out_dtype=torch.float16),
            "fp8 cuBLASLt (fast accumulation)": lambda: torch._scaled_mm(a8, w8.t(), one, one, bias=b16,
                                                                         out_dtype=torch.float16, use_fast_accum=True),
            "fp8 engine": lambda: kernels.gemm(a8, w8, scale, bias=bias, config=tuned["fp8"].get((m, n, k))),
            "int8 engine": lambda: kernels.gemm(ai, wi, scale, bias=bias, config=tuned["int8"].get((m, n, k))),
            "int8 cuBLASLt (int32 out)": lambda: torch._int_mm(ai, wi.t()),
        }
        t = interleaved(fns, rounds=rounds, graph=True)
        for name in fns:
            ratio, sp = t.ratio("fp16 cuBLAS", name)
            med = t.median_s(name)
            rows.append({"shape": f"{m}x{n}x{k}", "GEMM": name, "× FP16 cuBLAS": ratio, "µs": med * 1e6,
                         "TFLOP/s": 2 * m * n * k / med / 1e12, "spread": sp, "rounds_s": list(t.seconds[name])})
    return rows


def _try(build: Callable[[], Any], errors: dict[str, str], name: str) -> Any:
    """build(), or None with the full traceback kept under `name` (a failure says where it happened)."""
    try:
        return build()
    except Exception:
        errors[name] = traceback.format_exc()
        return None


def _compiled_graph(model: torch.nn.Module, *args: Any) -> Callable[[], Any]:
    """torch.compile with inductor's own CUDA graphs (mode 'reduce-overhead'): its fusions, replayed as graphs."""
    from helpers.chapters.ch09_deployment.workloads import GRAPH_MODE

    c = torch.compile(model, mode=GRAPH_MODE)
    with torch.inference_mode():
        for _ in range(3):  # inductor records its graphs on the first calls
            c(*args)
    return lambda: c(*args)


def _eager_graph(model: torch.nn.Module, ids: torch.Tensor) -> Callable[[], Any]:
    """The unfused model (one kernel per PyTorch operation) replayed as one CUDA graph: no launch overhead, so it
    differs from the fused paths only in what fusion changes (kernels and the bytes between them)."""
    from helpers.chapters.ch09_deployment.workloads import cuda_graph

    def forward() -> Any:
        with torch.inference_mode():
            return model(ids)
    return _keeping(cuda_graph(forward), model)


def _keeping(replay: Callable[[], Any], owner: Any) -> Callable[[], Any]:
    """A graph's replay that keeps `owner` (the engine: its weights) alive: the graph reads their addresses, and
    memory freed behind a captured graph is handed to the next allocation (a replay then reads garbage or faults)."""
    def run(keep: Any = owner) -> Any:
        return replay()
    return run


def _checked(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run a freshly built variant twice and wait for it, so a fault shows where it happened."""
    with torch.inference_mode():
        for _ in range(2):
            fn()
            torch.cuda.synchronize()
    return fn


def bert_variants(batch: int = 32, seq: int = 128, tuned: dict[str, dict] | None = None,
                  paths: tuple[str, ...] = ("fp32 eager", "fp16 compiled + CUDA graph", "fp16 engine + CUDA graph",
                                            "fp8 engine + CUDA graph", "int8 engine + CUDA graph")
                  ) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """Replayable BERT-base forwards on full-length sequences (no padding mask): FP32 eager, FP16 compiled in a CUDA
    graph, the engine in FP16 / FP8 / INT8 in one CUDA graph each, and torchao's paths ('torchao fp8 + CUDA graph',
    'torchao int8 + CUDA graph') when asked for and torchao is installed. Failures are kept with their tracebacks."""
    from helpers.chapters.ch09_deployment.workloads import cuda_graph
    from helpers.deploy.engine8 import encoder
    from helpers.models.bert import bert_base, bert_inputs

    ids = bert_inputs(batch, seq, "cuda")["input_ids"]
    calib = [{"input_ids": bert_inputs(8, seq, "cuda", seed=s)["input_ids"]} for s in (1, 2)]
    fp32 = bert_base(seq).cuda().eval()
    errors: dict[str, str] = {}
    out: dict[str, Callable[[], Any]] = {}

    def copy(dtype: torch.dtype | None = None) -> torch.nn.Module:
        m = bert_base(seq).cuda().eval()
        m.load_state_dict(fp32.state_dict())
        return m if dtype is None else m.to(dtype)

    def engine(fmt: str) -> Callable[[], Any]:
        m = copy()
        with torch.inference_mode():
            eng = encoder.build(m, calib, fmt)
        m.half()
        eng.configs = (tuned or {}).get(fmt, {})
        return _keeping(cuda_graph(lambda: eng(ids)), eng)

    builders: dict[str, Callable[[], Callable[[], Any]]] = {
        "fp32 eager": lambda: (lambda: fp32(ids)),
        "fp16 compiled + CUDA graph": lambda: _compiled_graph(copy(torch.float16), ids),
        "fp16 eager + CUDA graph": lambda: _eager_graph(copy(torch.float16), ids),
        "torchao fp8 + CUDA graph": lambda: _compiled_graph(_torchao_model(copy(), "fp8"), ids),
        "torchao int8 + CUDA graph": lambda: _compiled_graph(_torchao_model(copy(), "int8"), ids),
    }
    for p in paths:
        build = builders.get(p) or (lambda p=p: engine(p.split()[0]))
        g = _try(lambda b=build: _checked(b()), errors, p)
        if g:
            out[p] = g
    return out, errors


def _torchao_model(m: torch.nn.Module, kind: str) -> torch.nn.Module:
    """torchao's dynamic-activation 8-bit quantization of the encoder's Linears (FP8 per row in BF16, or INT8 in FP16)."""
    from torchao.quantization import quantize_  # type: ignore[import-not-found]

    if kind == "fp8":
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow  # type: ignore
        m = m.to(torch.bfloat16)
        quantize_(m.layers, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
    else:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig  # type: ignore
        m = m.half()
        quantize_(m.layers, Int8DynamicActivationInt8WeightConfig())
    return m


def resnet_variants(batch: int = 256, size: int = 224
                    ) -> tuple[dict[str, Callable[[], Any]], dict[str, str], list[dict]]:
    """ResNet-50 forwards: FP16 channels-last compiled in a CUDA graph, and the engine in FP16 / FP8 / INT8, each with
    its convolutions tuned (``tune_convs``); the forwards, the failures and the tuned rows (format, conv, config)."""
    from helpers.chapters.ch09_deployment.workloads import cuda_graph
    from helpers.deploy.engine8 import resnet
    from helpers.models.resnet import image_batch, resnet50

    errors: dict[str, str] = {}
    base = resnet50().cuda().eval()
    x = image_batch(batch, size, "cuda").half().contiguous(memory_format=torch.channels_last)
    calib = [image_batch(16, size, "cuda", seed=s) for s in (1, 2)]

    def copy() -> torch.nn.Module:
        m = resnet50().cuda().eval()
        m.load_state_dict(base.state_dict())
        return m

    tuned: list[dict] = []

    def engine(fmt: str) -> Callable[[], Any]:
        m = copy()
        with torch.inference_mode():
            eng = resnet.build(m, calib, fmt)
        m.half()
        eng.configs, rows = tune_convs(eng, x)
        tuned.extend(tuned_row(fmt, conv_name(r["key"]), r["flop"] / r["us"] / 1e6, r["config"])
                     for r in rows if "us" in r and eng.configs.get(r["key"]) == r["config"])
        return _keeping(cuda_graph(lambda: eng(x)), eng)

    out: dict[str, Callable[[], Any]] = {}
    g = _try(lambda: _checked(_compiled_graph(copy().half().to(memory_format=torch.channels_last), x)), errors,
             "fp16 channels-last compiled + CUDA graph")
    if g:
        out["fp16 channels-last compiled + CUDA graph"] = g
    for fmt in FORMATS:
        g = _try(lambda fmt=fmt: _checked(engine(fmt)), errors, f"{fmt} engine + CUDA graph")
        if g:
            out[f"{fmt} engine + CUDA graph"] = g
    return out, errors, tuned
