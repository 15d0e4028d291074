"""Show chapter 9's TensorRT-RTX builds: a labelled table and figure, from live rows or the stored reference.

Serves: chapter 9.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from helpers.bench import Record

PREFIX = "ch09.trt_rtx"
PROFILE = (1, 8, 32)  # min / opt / max batch of the engines' optimization profile
FIELDS = ("built", "build_s", "engine_mb", "layers", "engine_layers", "int8_layers", "runs")
HOW_TO_RUN = (
    "With an RTX GPU whose compute capability the runtime lists (TensorRT-RTX 1.7 lists 8.0, 8.6, 8.9 and "
    "12.x: GeForce RTX 30xx or newer, or an RTX workstation GPU of those generations): pip install "
    "tensorrt-rtx (for a CUDA 12 driver: pip install tensorrt-rtx-cu12), restart the kernel and "
    "run this cell again: it builds the same engines on your GPU, runs them, and times them beside "
    "ONNX Runtime and PyTorch INT8. From a shell: python -m helpers.deploy build MODEL.onnx "
    "--backend tensorrt, then python -m helpers.deploy bench MODEL.engine --backend tensorrt."
)
FULL_TENSORRT = (
    "Full TensorRT (10/11) did not run for this course: it cannot be installed on the course's machines. "
    "helpers/deploy/tensorrt_backend.py runs it through the same code path where it is installed "
    "(pip install tensorrt)."
)


def results_from_records(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Rebuild run_builds' rows from records named ch09.trt_rtx.<model>.<precision>.<field>."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        parts = r.name.split(".")
        if len(parts) != 5 or parts[:2] != PREFIX.split(".") or parts[4] not in FIELDS:
            continue
        row = rows.setdefault(
            (parts[2], parts[3]),
            {
                "model": parts[2],
                "precision": parts[3],
                "device": r.device,
                "date": r.date,
                "stored": True,
                "built": False,
                "runs": False,
                "parsed": False,
                "runtime_error": "",
            },
        )
        if parts[4] in ("built", "runs"):
            row[parts[4]] = bool(r.value)
        else:
            row[parts[4]] = r.value
        if parts[4] == "built":
            row.update(r.extra)
        if parts[4] == "runs":
            row["runtime_error"] = str(r.extra.get("error", ""))
        if parts[4] == "layers":
            row["parsed"] = True
    return list(rows.values())


def bench_from_records(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Stored timing rows (ch09.trt_rtx.bench.<model>.<backend>.b<batch>), when an RTX GPU recorded them."""
    out = []
    for r in records:
        parts = r.name.split(".")
        if len(parts) == 6 and parts[2] == "bench":
            out.append(
                {
                    "model": parts[3],
                    "backend": parts[4],
                    "batch": parts[5].lstrip("b"),
                    "items/s": r.value,
                    "device": r.device,
                }
            )
    return out


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per model x precision."""

    def qdq(r: dict[str, Any]) -> str:
        types = r.get("network_types") or {}
        return f"{types.get('QUANTIZE', 0)} Q / {types.get('DEQUANTIZE', 0)} DQ"

    def count(r: dict[str, Any], key: str) -> int | str:
        return int(r[key]) if key in r else ""

    return [
        {
            "model": r["model"],
            "precision": r["precision"],
            "parsed": r.get("parsed", False),
            "built": r["built"],
            "build s": r.get("build_s", ""),
            "engine MB": r.get("engine_mb", ""),
            "network layers": count(r, "layers"),
            "Q/DQ layers": qdq(r),
            "engine layers": count(r, "engine_layers"),
            "INT8 engine layers": count(r, "int8_layers"),
            "parser warnings": sum(not m.startswith("ERROR") for m in r.get("parser_messages", [])),
            "ran": r["runs"],
        }
        for r in rows
    ]


def size_ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Engine size ÷ the same model's FP32 engine, for every built FP16 and INT8 engine."""
    fp32 = {r["model"]: r["engine_mb"] for r in rows if r["precision"] == "fp32" and r["built"]}
    return {
        f"{r['model']} {r['precision']}": r["engine_mb"] / fp32[r["model"]]
        for r in rows
        if r["precision"] != "fp32" and r["built"] and r["model"] in fp32
    }


def _say_what_ran(rows: list[dict[str, Any]], where: str) -> None:
    """Print what ran, what did not (in the runtime's words), and how an RTX student runs it."""
    built = [r for r in rows if r["built"]]
    print(
        f"What ran: {rows[0].get('family', 'TensorRT-RTX')} parsed "
        f"{sum(bool(r.get('parsed')) for r in rows)} "
        f"and built {len(built)} of {len(rows)} exports on {where}."
    )
    refused = [r for r in built if not r["runs"]]
    if refused:
        print(
            f"What did not run: executing the engines ({len(refused)} of {len(built)} refused). "
            f"The runtime said: {refused[0].get('runtime_error') or 'nothing (no message recorded)'}"
        )
    elif built:
        print(f"The engines also ran on {where}: timings below.")
    print(FULL_TENSORRT)
    for r in rows:
        msgs = r.get("parser_messages") or []
        if msgs:
            print(f"parser on {r['model']} {r['precision']}: " + " | ".join(msgs[:3]))
        if r["precision"] == "int8" and r.get("layer_summary"):
            kinds = ", ".join(f"{k} x{v}" for k, v in r["layer_summary"].items())
            print(f"{r['model']} INT8 engine layers (type, precision of their input): {kinds}")
    print(HOW_TO_RUN)


def show(results: list[dict[str, Any]] | None = None) -> None:
    """Print the build table (live rows, else the stored reference, labelled) and a size figure."""
    from helpers import plots, reference, tables

    stored = results is None
    # the stored builds of the first card that holds them (each row says which device and date)
    recs = next((rs for card in reference.stored_cards() if (rs := reference.lookup_all(PREFIX + ".", card))), []) \
        if stored else []
    rows = results_from_records(recs) if stored else list(results or [])
    if not rows:
        print(
            "TensorRT-RTX engine builds: not stored yet (the GPU reference run records them with "
            "python -m helpers.chapters.ch09_deployment.trt_rtx --out DIR)."
        )
        print(FULL_TENSORRT)
        print(HOW_TO_RUN)
        return
    where = f"{rows[0]['device']}, {rows[0]['date']}" + (" (stored reference)" if stored else "")
    tables.show(
        table_rows(rows),
        caption=f"{rows[0].get('family', 'TensorRT-RTX')}: the course's ONNX exports, "
        f"parsed and built with a dynamic batch profile {'/'.join(map(str, PROFILE))} on {where}",
    )
    ratios = size_ratios(rows)
    if "resnet50 int8" in ratios:
        print(
            f"ResNet-50: the INT8 Q/DQ engine is {ratios['resnet50 int8']:.2f}x the size of the "
            f"FP32 engine ({where})."
        )
    _say_what_ran(rows, where)
    if ratios:
        plots.bar_ratios(
            ratios,
            title="TensorRT-RTX engine size",
            ylabel="engine size ÷ FP32 engine (ratio)",
            device=rows[0]["device"],
            note="stored reference" if stored else "",
            name="ch09_trt_rtx_engine_size",
        )
    timings = bench_from_records(recs) if stored else [b for r in rows for b in r.get("bench", [])]
    if timings:
        tables.show(timings, caption=f"Engines beside ONNX Runtime and PyTorch INT8 ({where})")
