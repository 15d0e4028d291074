"""Chapter 1's tables, each declared once: how its rows become records and come back from a stored run.

The record names are those the chapter has always stored: ``ch01.<model>.<mode>[_fp16]_ms.b<batch>`` for a
latency, ``ch01.speedup.<model>.b<batch>``, ``ch01.<model>.crossover_batch`` and the three copy bandwidths
(``notes.CPU_BW_ALL``, ``CPU_BW_ONE``, ``GPU_BW``), so the stored runs made before these declarations read back
as rows: each table's `legacy` hook takes the columns from the name.

Serves: chapter 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from helpers.chapters.ch01_why_gpu_inference.inference_speed import MODES, Latency
from helpers.chapters.ch01_why_gpu_inference.notes import CPU_BW_ALL, CPU_BW_ONE, GPU_BW
from helpers.experiment import Table
from helpers.records import Record


def _latency_name(row: Mapping[str, Any]) -> str:
    suffix = "" if row["dtype"] == "fp32" else f"_{row['dtype']}"
    return f"{row['model']}.{row['mode']}{suffix}_ms.b{int(row['batch'])}"


def _latency_legacy(r: Record) -> dict | None:
    parts = r.name.split(".")
    if len(parts) != 4 or not parts[2].endswith("_ms") or not parts[3][1:].isdigit():
        return None
    mode, _, bits = parts[2][:-3].partition("_fp")
    if mode not in MODES:
        return None
    return {"model": parts[1], "mode": mode, "dtype": f"fp{bits}" if bits else "fp32", "batch": int(parts[3][1:]),
            "sweep checked": False}


LATENCY = Table("ch01", keys=("model", "mode", "dtype", "batch"), value="ms", unit="ms",
                fields={"samples/s": "items_per_s", "sweep checked": "sweep_checked"}, name=_latency_name,
                tag="ch01.latency", legacy=_latency_legacy)

SPEEDUP = Table("ch01.speedup", keys=("model", "batch"), value="CPU ÷ GPU end to end", unit="ratio",
                name="{model}.b{batch}", tag="ch01.speedup",
                legacy=lambda r: {"model": r.name.split(".")[2], "batch": int(r.name.split(".")[3][1:])})

CROSSOVER = Table("ch01", keys=("model",), value="crossover batch", unit="batch", name="{model}.crossover_batch",
                  tag="ch01.crossover", example={"model": "tiny_mlp", "crossover batch": 4096.0})

COPIES = {name: name[len("ch01."):-len("_gbs")] for name in (CPU_BW_ALL, CPU_BW_ONE, GPU_BW)}
BANDWIDTH = Table("ch01", keys=("copy",), value="GB/s", unit="GB/s", fields=("threads",), name="{copy}_gbs",
                  tag="ch01.bandwidth", legacy=lambda r: {"copy": COPIES[r.name]} if r.name in COPIES else None)


def rows_of(results: Iterable[Latency]) -> list[dict]:
    """LATENCY rows of measured latencies."""
    return [{"model": r.model, "mode": r.mode, "dtype": r.dtype, "batch": r.batch, "ms": r.ms,
             "samples/s": r.items_per_s, "sweep checked": r.checked} for r in results]


def latencies(rows: Iterable[Mapping[str, Any]]) -> list[Latency]:
    """The latencies of LATENCY rows (measured here or stored)."""
    return [Latency(r["model"], r["mode"], int(r["batch"]), r["ms"], r["dtype"], bool(r["sweep checked"]))
            for r in rows]
