"""Chapter 10's measurements as Experiments: each runs here when this machine can (and records), or shows the
stored run of the nearest card, labelled.

    on any machine (needs="cpu")                     on a GPU (needs="gpu"), else the stored run
    SPARSITY_ACCURACY  2:4 pruning, fine-tune, INT8  SPARSITY_GPU  2:4 and 50%-zeros GEMMs against dense
    UNSTRUCTURED_CPU   a matmul with 50% zeros       FP8           FP8 GEMM and BERT-base Linears vs BF16
    ATOMICADD          the notes' atomicAdd scale    MIXED_SPEED   INT8/FP16 mixed models vs all-FP16
    DYNAMIC_ACCURACY   dynamic / static INT8 points  LAYOUT_GPU    NHWC vs NCHW, FP16 conv and INT8 1x1 conv
    DYNAMIC_SPEED      their CPU speed, the amax     SPLIT_GAIN    first k conv blocks on the CPU, end to end
    MIXED_ACCURACY     k sensitive layers in float   PIPELINE_GPU  pinned copies, two streams, video overlap
    LAYOUT_CPU, SPLIT_BYTES, VIDEO_CPU               (CPU layouts, PCIe bytes per frame, CPU-only overlap)

The measuring functions are the chapter modules' own (``sparsity``, ``dynamic_quant``, ``fp8_study``,
``mixed_precision``, ``layouts``, ``pipeline``, ``video_stages``); the tables are ``tables``. A notebook cell is
``result = experiments.SPARSITY_GPU.run(); result.show("gemm", caption=...)``.

Serves: chapter 10.
"""

from __future__ import annotations

from typing import Any

from helpers.chapters.ch10_beyond_int8 import tables as t
from helpers.experiment import Experiment, Rows

Measured = dict[str, list[dict]]


def _sparsity_accuracy(model: Any, data: Any, steps: int = 60) -> Measured:
    from helpers.chapters.ch10_beyond_int8.sparsity import accuracy_study

    return {"accuracy": t.rows_of(t.SPARSITY_ACC, accuracy_study(model, data, steps=steps))}


def _sparsity_delta(rows: Rows) -> dict[str, Any]:
    acc = t.column(rows["accuracy"], "variant", "accuracy %")
    return {"ch10.sparsity.int8_24_delta_pts": acc["dense FP32"] - acc["2:4 + fine-tune + INT8"]}


SPARSITY_ACCURACY = Experiment("ch10.sparsity.accuracy", _sparsity_accuracy, {"accuracy": t.SPARSITY_ACC},
                               derive=_sparsity_delta, needs="cpu", others={"ch10.sparsity.int8_24_delta_pts": "pts"})


def _zeros(device: str, size: int, repeats: int) -> list[dict]:
    from helpers.chapters.ch10_beyond_int8.sparsity import dense_with_zeros_times

    table = t.ZEROS_GPU if device == "cuda" else t.ZEROS_CPU
    return t.rows_of(table, [dense_with_zeros_times(size, size, size, device=device, repeats=repeats)])


UNSTRUCTURED_CPU = Experiment("ch10.sparsity.zeros_cpu",
                              lambda size=512, repeats=10: {"zeros": _zeros("cpu", size, repeats)},
                              {"zeros": t.ZEROS_CPU}, needs="cpu")


def _sparsity_gpu(size: int = 8192) -> Measured:
    from helpers.chapters.ch10_beyond_int8.sparsity import semi_structured_speed

    gemm = []
    for dtype in ("float16", "int8"):
        r = semi_structured_speed(size, size, size, dtype=dtype)
        if "skipped" in r:
            print(f"{dtype} 2:4: {r['skipped']}")
        else:
            gemm.append(r)
    return {"gemm": t.rows_of(t.SPARSE_GEMM, gemm), "zeros": _zeros("cuda", size, 20)}


SPARSITY_GPU = Experiment("ch10.sparsity.gpu", _sparsity_gpu, {"gemm": t.SPARSE_GEMM, "zeros": t.ZEROS_GPU})


def _atomicadd(updates: dict) -> Measured:
    from helpers.chapters.ch10_beyond_int8.dynamic_quant import share_in_range

    share = share_in_range(updates["wrong"], updates["right"])
    return {"atomicadd": [{"update": "atomicAdd EMA (notes)", "share within 2× of the right scale": share,
                           "batches": len(updates["right"])}]}


ATOMICADD = Experiment("ch10.dynamic.atomicadd", _atomicadd, {"atomicadd": t.ATOMICADD}, needs="cpu")


def _dynamic_accuracy(model: Any, data: Any) -> Measured:
    from helpers.chapters.ch10_beyond_int8.dynamic_quant import accuracy_study

    acc = t.column(accuracy_study(model, data), "variant", "accuracy %")
    return {"accuracy": [{"variant": k, "points lost vs FP32": acc["FP32"] - acc[k], "accuracy %": acc[k],
                          "FP32 %": acc["FP32"]} for k in ("dynamic INT8", "static INT8")]}


DYNAMIC_ACCURACY = Experiment("ch10.dynamic.accuracy", _dynamic_accuracy, {"accuracy": t.DYNAMIC_ACC}, needs="cpu")


def _dynamic_speed(**kw: Any) -> Measured:
    from helpers.chapters.ch10_beyond_int8.dynamic_quant import cpu_speed_study

    s = cpu_speed_study(**kw)
    speed = [{"model": k, "speed vs FP32": v, "ms per batch": s["ms"][k], "FP32 ms": s["ms"]["FP32"],
              "speed vs FP32 spread": s["spread"][k]} for k, v in s["vs FP32"].items()]
    amax = {"cost": "runtime amax", "share of a dynamic INT8 Linear": s["amax share"], "amax ms": s["amax ms"],
            "dynamic linear ms": s["dynamic linear ms"]}
    return {"speed": speed, "amax": [amax]}


DYNAMIC_SPEED = Experiment("ch10.dynamic.speed", _dynamic_speed, {"speed": t.DYNAMIC_SPEED, "amax": t.AMAX},
                           needs="cpu")


def _fp8(sizes: tuple[int, ...] = (4096, 8192), batch: int = 32, seq_len: int = 128) -> Measured:
    from helpers.chapters.ch10_beyond_int8.fp8_study import bert_speed, gemm_speed

    b = bert_speed(batch=batch, seq_len=seq_len)
    variants = [k[:-3] for k in b if k.endswith(" ms")]
    bert = [{"Linears": kind, "path": path, "speed vs BF16": b[f"{kind} / BF16 speed"], "ms": b[f"{path} ms"],
             "BF16 ms": b["BF16 ms"], "cosine": b[f"{path} cosine"], "batch": batch, "seq": seq_len,
             "speed vs BF16 spread": b.get(f"{kind} / BF16 speed spread")}
            for kind, path in (("FP8", "FP8 (_scaled_mm)"), ("INT8", b["INT8 best"]))]
    ms = [{"variant": v, "ms": b[f"{v} ms"], "cosine": b[f"{v} cosine"], "batch": batch, "seq": seq_len}
          for v in variants]
    return {"gemm": t.rows_of(t.FP8_GEMM, gemm_speed(sizes)), "bert": bert, "bert_ms": ms}


FP8 = Experiment("ch10.fp8", _fp8, {"gemm": t.FP8_GEMM, "bert": t.FP8_BERT, "bert_ms": t.FP8_BERT_MS})


def _mixed_accuracy(qmodel: Any, data: Any, order: list[str], ks: list[int]) -> Measured:
    from helpers.model_quant.sensitivity import mixed_precision_curve

    return {"accuracy": t.rows_of(t.MIXED_ACC, mixed_precision_curve(qmodel, data, order, ks=ks))}


MIXED_ACCURACY = Experiment("ch10.mixed.accuracy", _mixed_accuracy, {"accuracy": t.MIXED_ACC}, needs="cpu")


def _mixed_speed(model: Any, order: list[str], x: Any, ks: list[int], calib: Any = None) -> Measured:
    from helpers.chapters.ch10_beyond_int8.mixed_precision import speed_curve

    rows = speed_curve(model, order, x, ks=ks, device="cuda", calib=calib)
    return {"speed": t.rows_of(t.MIXED_SPEED, rows)}


MIXED_SPEED = Experiment("ch10.mixed.speed", _mixed_speed, {"speed": t.MIXED_SPEED})


def _layout_cpu(batch: int = 8, channels: int = 64, size: int = 28, repeats: int = 10) -> Measured:
    from helpers.chapters.ch10_beyond_int8 import layouts

    rows = [layouts.conv_layout_times("cpu", "float32", batch=batch, channels=channels, size=size, repeats=repeats),
            layouts.quantized_conv_layout_times(batch=batch, channels=channels, size=size, repeats=repeats)]
    return {"layout": t.rows_of(t.LAYOUT_CPU, rows)}


LAYOUT_CPU = Experiment("ch10.layout.cpu", _layout_cpu, {"layout": t.LAYOUT_CPU}, needs="cpu")


def _layout_gpu(batch: int = 64, channels: int = 256, size: int = 56) -> Measured:
    from helpers.chapters.ch10_beyond_int8 import layouts

    rows = [layouts.conv_layout_times("cuda", "float16", batch=batch, channels=channels, size=size),
            layouts.int8_pointwise_layout_times("cuda", batch=batch, channels=channels, size=size)]
    return {"layout": t.rows_of(t.LAYOUT_GPU, rows)}


LAYOUT_GPU = Experiment("ch10.layout.gpu", _layout_gpu, {"layout": t.LAYOUT_GPU})


def _split_bytes() -> Measured:
    from helpers.chapters.ch10_beyond_int8.video_stages import split_bytes_rows

    return {"bytes": t.rows_of(t.SPLIT_BYTES, split_bytes_rows())}


SPLIT_BYTES = Experiment("ch10.pipeline.split_bytes", _split_bytes, {"bytes": t.SPLIT_BYTES}, needs="cpu")


def _split_gain(ks: tuple[int, ...] = (0, 1, 2)) -> Measured:
    from helpers.chapters.ch10_beyond_int8.pipeline import split_layers_gain

    return {"split": t.rows_of(t.SPLIT_GAIN, split_layers_gain("cuda", ks))}


SPLIT_GAIN = Experiment("ch10.pipeline.split_gain", _split_gain, {"split": t.SPLIT_GAIN})


def _video_cpu(size: int = 96, batch: int = 4, repeats: int = 3) -> Measured:
    from helpers.chapters.ch10_beyond_int8.pipeline import split_pipeline_gain

    return {"overlap": t.rows_of(t.VIDEO_CPU, [split_pipeline_gain("cpu", size=size, batch=batch, repeats=repeats)])}


VIDEO_CPU = Experiment("ch10.pipeline.overlap_cpu", _video_cpu, {"overlap": t.VIDEO_CPU}, needs="cpu")


def _pipeline_gpu(sizes_mb: tuple[int, ...] = (4, 64, 256)) -> Measured:
    from helpers.chapters.ch10_beyond_int8 import pipeline

    overlap = {**pipeline.overlap_copy_compute(chunks=8, chunk_mb=64, timelines=True), "streams": "copy || compute"}
    video = pipeline.split_pipeline_gain("cuda", size=224, batch=8)
    return {"pinned": t.rows_of(t.PINNED, pipeline.pinned_vs_pageable(sizes_mb)),
            "streams": t.rows_of(t.OVERLAP, [overlap]), "video": t.rows_of(t.VIDEO_GPU, [video])}


def _video_slowdown(rows: Rows) -> dict[str, Any]:
    return {"ch10.pipeline.video_cpu_stage_slowdown": rows["video"][0]["CPU stage slowdown"]}


PIPELINE_GPU = Experiment("ch10.pipeline.gpu", _pipeline_gpu,
                          {"pinned": t.PINNED, "streams": t.OVERLAP, "video": t.VIDEO_GPU},
                          derive=_video_slowdown, others={"ch10.pipeline.video_cpu_stage_slowdown": "ratio"})

SPARSE_NAMES = ["ch10.sparsity.fp16_24_over_dense", "ch10.sparsity.int8_24_over_dense",
                "ch10.sparsity.gpu_unstructured_speedup"]
DYNAMIC_NAMES = ["ch10.dynamic.cpu_dynamic_over_fp32", "ch10.dynamic.cpu_static_over_fp32"]
FP8_NAMES = ["ch10.fp8.gemm_fp8_over_bf16", "ch10.fp8.bert_fp8_over_bf16", "ch10.fp8.bert_int8_over_bf16"]
LAYOUT_NAMES = ["ch10.layout.fp16_nhwc_speedup", "ch10.layout.int8_nhwc_speedup"]
SPLIT_NAMES = ["ch10.pipeline.split_gain.k1", "ch10.pipeline.split_gain.k2"]
PIPE_NAMES = ["ch10.pipeline.pinned_over_pageable", "ch10.pipeline.overlap_speedup", "ch10.pipeline.video_gain",
              "ch10.pipeline.video_cpu_stage_slowdown"]
SUMMARY = SPARSE_NAMES + DYNAMIC_NAMES + FP8_NAMES + LAYOUT_NAMES + SPLIT_NAMES + PIPE_NAMES  # section 7's table
