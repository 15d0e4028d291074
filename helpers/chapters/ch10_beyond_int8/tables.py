"""Chapter 10's tables, each declared once: how its rows become records and come back from a stored run.

Every row keeps the record name the chapter used before it declared tables (``ch10.sparsity.fp16_24_over_dense``,
``ch10.mixed.acc.k2``, ...), so the stored H200 and CPU runs still show, and the lecture-note claims
(``notes``) and the verdicts (``readings``) read the same names. A record stored before these declarations has
no ``table`` extra: each table's `legacy` hook reads its columns back from its name. Speed ratios carry the
spread of their interleaved rounds (``helpers.bench.interleaved``) in the row as '<value> spread'.

Serves: chapter 10.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from helpers.errors import InputError
from helpers.experiment import Table
from helpers.records import Record


def _tail(prefix: str, r: Record) -> str:
    return r.name[len(prefix) + 1:]


def _named(prefix: str, tag: str, column: str, tails: Mapping[Any, str], value: str, unit: str,
           **kw: Any) -> Table:
    """A table of one key column whose values each name one record (`tails`: {key value: name tail})."""
    back = {t: k for k, t in tails.items()}

    def name(row: Mapping[str, Any]) -> str:
        if row[column] not in tails:
            raise InputError(f"table {tag}: {column}={row[column]!r} has no record name; it knows {list(tails)}.")
        return tails[row[column]]

    def legacy(r: Record) -> dict | None:
        tail = _tail(prefix, r)
        return {column: back[tail]} if tail in back else None

    return Table(prefix, keys=(column,), value=value, unit=unit, name=name, tag=tag, legacy=legacy, **kw)


def _numbered(prefix: str, tag: str, column: str, fmt: str, value: str, unit: str, **kw: Any) -> Table:
    """A table keyed by an integer column whose record-name tail is `fmt` % that integer (e.g. 'k%d')."""
    pattern = re.compile(re.escape(fmt).replace("%d", r"(\d+)") + "$")

    def legacy(r: Record) -> dict | None:
        m = pattern.match(_tail(prefix, r))
        return {column: int(m.group(1))} if m else None

    return Table(prefix, keys=(column,), value=value, unit=unit, name=lambda row: fmt % row[column], tag=tag,
                 legacy=legacy, **kw)


def _sized(prefix: str, tag: str, column: str, stem: str, legacy_size: int, value: str, unit: str,
           extra_key: str, **kw: Any) -> Table:
    """A table keyed by a size whose row at `legacy_size` keeps the old name `stem` (the one size recorded before
    this table existed) and whose other sizes are '<stem>_<size>'."""
    def name(row: Mapping[str, Any]) -> str:
        return stem if row[column] == legacy_size else f"{stem}_{row[column]}"

    def legacy(r: Record) -> dict | None:
        return {column: legacy_size} if _tail(prefix, r) == stem else None

    return Table(prefix, keys={column: extra_key}, value=value, unit=unit, name=name, tag=tag, legacy=legacy, **kw)


# §1 2:4 sparsity
SPARSITY_VARIANTS = {"dense FP32": "dense_acc", "2:4 pruned": "pruned_24_acc", "2:4 + fine-tune": "finetuned_24_acc",
                     "2:4 + fine-tune + INT8": "int8_24_acc",
                     "unstructured 50% + fine-tune + INT8 (seed)": "unstructured_int8_acc"}
SPARSITY_ACC = _named("ch10.sparsity", "ch10.sparsity.accuracy", "variant", SPARSITY_VARIANTS, "accuracy %", "%",
                      fields=("sparsity",))
ZEROS_FIELDS = ("dense ms", "50% zeros ms")
ZEROS_CPU = _named("ch10.sparsity", "ch10.sparsity.zeros_cpu", "device", {"cpu": "cpu_unstructured_speedup"},
                   "speed-up from zeros", "ratio", fields=ZEROS_FIELDS, spread="speed-up from zeros spread")
ZEROS_GPU = _named("ch10.sparsity", "ch10.sparsity.zeros_gpu", "device", {"cuda": "gpu_unstructured_speedup"},
                   "speed-up from zeros", "ratio", fields=ZEROS_FIELDS, spread="speed-up from zeros spread")
SPARSE_GEMM = _named("ch10.sparsity", "ch10.sparsity.gemm", "dtype",
                     {"float16": "fp16_24_over_dense", "int8": "int8_24_over_dense"}, "speed-up", "ratio",
                     fields={"shape": "shape", "dense ms": "dense_ms", "2:4 ms": "sparse_ms",
                             "dense TFLOP/s": "dense_tflops", "2:4 dense-equivalent TFLOP/s": "sparse_tflops",
                             "2:4 kernel": "kernel"}, spread="speed-up spread")

# §2 dynamic and static INT8
ATOMICADD = _named("ch10.dynamic", "ch10.dynamic.atomicadd", "update", {"atomicAdd EMA (notes)": "atomicadd_in_range"},
                   "share within 2× of the right scale", "fraction", fields=("batches",))
DYNAMIC_ACC = _named("ch10.dynamic", "ch10.dynamic.accuracy", "variant",
                     {"dynamic INT8": "dynamic_delta_pts", "static INT8": "static_delta_pts"}, "points lost vs FP32",
                     "pts", fields=("accuracy %", "FP32 %"))
DYNAMIC_SPEED = _named("ch10.dynamic", "ch10.dynamic.speed", "model",
                       {"dynamic INT8": "cpu_dynamic_over_fp32", "static INT8": "cpu_static_over_fp32"},
                       "speed vs FP32", "ratio", fields=("ms per batch", "FP32 ms"), spread="speed vs FP32 spread")
AMAX = _named("ch10.dynamic", "ch10.dynamic.amax", "cost", {"runtime amax": "amax_share"},
              "share of a dynamic INT8 Linear", "ratio", fields=("amax ms", "dynamic linear ms"))

# §3 FP8
FP8_GEMM = _sized("ch10.fp8", "ch10.fp8.gemm", "size", "gemm_fp8_over_bf16", 8192, "FP8 / BF16", "ratio", "size",
                  fields=("BF16 TFLOP/s", "FP8 TFLOP/s"), spread="FP8 / BF16 spread")
FP8_BERT = _named("ch10.fp8", "ch10.fp8.bert", "Linears", {"FP8": "bert_fp8_over_bf16", "INT8": "bert_int8_over_bf16"},
                  "speed vs BF16", "ratio", fields=("path", "ms", "BF16 ms", "cosine", "batch", "seq"),
                  spread="speed vs BF16 spread")
FP8_BERT_MS = Table("ch10.fp8.bert_ms", keys=("variant",), value="ms", unit="ms", fields=("cosine", "batch", "seq"),
                    name=lambda row: re.sub(r"[^a-z0-9]+", "_", row["variant"].lower()).strip("_"),
                    example={"variant": "INT8 (Triton, fused)", "ms": 30.0, "cosine": 0.999, "batch": 32, "seq": 128})

# §4 mixed precision
MIXED_ACC = _numbered("ch10.mixed.acc", "ch10.mixed.acc", "kept in FP", "k%d", "accuracy %", "%",
                      fields=("quantized layers", "fp layers", "vs FP32 pts"), spread="vs FP32 spread",
                      spread_of="vs FP32 pts")  # the paired bootstrap bounds the change, not the accuracy
MIXED_SPEED = _numbered("ch10.mixed.cuda.speed", "ch10.mixed.speed", "kept in FP", "k%d", "speed vs float", "ratio",
                        fields=("ms", "float ms", "batch"), spread="speed vs float spread")

# §5 layouts
LAYOUT_FIELDS = ("NCHW ms", "NHWC ms")
LAYOUT_CPU = _named("ch10.layout", "ch10.layout.cpu", "dtype",
                    {"float32": "cpu_fp32_nhwc_speedup", "int8 (torch.ao)": "cpu_int8_nhwc_speedup"},
                    "NHWC speed-up", "ratio", fields=(*LAYOUT_FIELDS, "output is NHWC for NCHW input"),
                    spread="NHWC speed-up spread")
LAYOUT_GPU = _named("ch10.layout", "ch10.layout.gpu", "dtype",
                    {"float16": "fp16_nhwc_speedup", "int8 (_int_mm)": "int8_nhwc_speedup"},
                    "NHWC speed-up", "ratio", fields=(*LAYOUT_FIELDS, "GEMM MB"), spread="NHWC speed-up spread")

# §6 pipelines
SPLIT_BYTES = _numbered("ch10.pipeline.split_bytes_ratio", "ch10.pipeline.split_bytes", "conv blocks on the CPU", "k%d",
                        "vs no split", "ratio", fields=("KB per frame over PCIe (FP16)",))
SPLIT_GAIN = _numbered("ch10.pipeline.split_gain", "ch10.pipeline.split_gain", "conv blocks on the CPU", "k%d",
                       "gain vs k=0", "ratio", fields=("KB per frame over PCIe", "CPU stage ms/batch",
                                                       "GPU stage ms/batch", "pipelined fps"),
                       spread="gain vs k=0 spread")
VIDEO_FIELDS = {"frames": "frames", "preprocess ms/batch": "preprocess_ms", "infer ms/batch": "infer_ms",
                "sequential fps": "sequential_fps", "pipelined fps": "pipelined_fps", "bound gain": "bound",
                "CPU stage slowdown": "cpu_stage_slowdown", "rounds beyond the bound": "rounds_beyond_bound"}
VIDEO_CPU = _named("ch10.pipeline", "ch10.pipeline.overlap_cpu", "device", {"cpu": "cpu_gain"}, "gain", "ratio",
                   fields=VIDEO_FIELDS, spread="gain spread")
VIDEO_GPU = _named("ch10.pipeline", "ch10.pipeline.overlap_gpu", "device", {"cuda": "video_gain"}, "gain", "ratio",
                   fields=VIDEO_FIELDS, spread="gain spread")
PINNED = _sized("ch10.pipeline", "ch10.pipeline.pinned", "size MB", "pinned_over_pageable", 256, "pinned/pageable",
                "ratio", "size_mb", fields=("pageable GB/s", "pinned GB/s"), spread="pinned/pageable spread")
OVERLAP = _named("ch10.pipeline", "ch10.pipeline.streams", "streams", {"copy || compute": "overlap_speedup"},
                 "speedup", "ratio", fields={"copy ms": "copy_ms", "compute ms": "compute_ms", "serial ms": "serial_ms",
                                             "overlapped ms": "overlapped_ms", "bound": "bound", "chunk MB": "chunk_mb",
                                             "chunks": "chunks"}, spread="speedup spread")


def rows_of(table: Table, rows: Sequence[Mapping[str, Any]], **const: Any) -> list[dict]:
    """`rows` as `table` declares them: every declared column present (None where a row has no value), `const`
    columns added, the rest dropped (a measuring function's row may hold more than its table keeps)."""
    return [{c: {**r, **const}.get(c) for c in table.columns} for r in rows]


def column(rows: Sequence[Mapping[str, Any]], key: str, value: str) -> dict[Any, Any]:
    """{row[key]: row[value]} of a table's rows."""
    return {r[key]: r[value] for r in rows}


