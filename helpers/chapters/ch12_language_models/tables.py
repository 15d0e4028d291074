"""Chapter 12's tables, each declared once: how its rows become records and come back from a stored run.

Every timed row carries `key` (the kernel's words, its shape and, above M = 1, its batch) and `harness` (how
it was timed): a kernel at one shape and batch shown in two tables must agree, or say which harnesses differ
(``agreement``). Records stored before these declarations are read by each table's `legacy` hook: their
names hold the columns the extras did not, and their harness is the one their code used then.

Serves: chapter 12.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from helpers.chapters.ch12_language_models.timing import AGREE, HARNESS
from helpers.experiment import Table
from helpers.records import Record

SPREAD = ("min_us", "max_us", "q1_us", "q3_us", "rounds")
# how the batch sweep was timed before it joined the interleaved rounds (stored runs up to 2026-12-05)
SWEEP_HARNESS_BEFORE = "CUDA-graph replay, one scheme at a time (p10..p90 of 10 replays)"
TIMED = {"µs": "us"}


def _shape_from_name(r: Record) -> dict[str, Any]:
    """The 'N×K' of a record named '….<N>x<K>' (before the shape rode in its extras), and the old harness."""
    return {"N×K": r.name.rsplit(".", 1)[1].replace("x", "×"), "harness": HARNESS}


def _gemv_legacy(r: Record) -> dict[str, Any] | None:
    parts = r.name.split(".")
    if len(parts) != 4 or "speedup" not in r.extra:
        return None
    return {"kernel": parts[2].replace("_", " "), **_shape_from_name(r)}


GEMV = Table("ch12.gemv", keys=("N×K", "kernel"), value="µs", unit="µs",
             fields={"weight GB/s": "gbs", "× FP16 cuBLAS": "speedup", "× fastest FP16": "over_fastest_fp16",
                     "key": "key", "harness": "harness"},
             spread="spread", spread_fields=SPREAD, name="{kernel}.{N×K}", tag="gemv", legacy=_gemv_legacy)

PATH = Table("ch12.path", keys={"N×K": "shape", "kernel": "kind", "step": "step"}, value="µs", unit="µs",
             fields={"weight GB/s": "gbs", "× FP16 cuBLAS": "speedup", "× step before": "over_step_before",
                     "loads / weight": "loads_per_weight", "activation B / weight B": "act_bytes_per_weight_byte",
                     "key": "key", "harness": "harness"},
             spread="spread", spread_fields=SPREAD, name="{kernel}.{step}.{N×K}", tag="path", legacy=_shape_from_name)


def _ncu_legacy(r: Record) -> dict[str, Any]:
    parts = r.name.split(".")
    return {"kernel": parts[2].replace("_", " "), "N×K": parts[3].replace("x", "×")}


PROFILE = Table("ch12.path_ncu", keys=("kernel", "N×K"), value="instructions / weight", unit="inst/weight",
                fields={"DRAM B / weight B": "dram", "L2 B / weight B": "l2", "L1 B / weight B": "l1"},
                name="{kernel}.{N×K}", tag="path_ncu", legacy=_ncu_legacy)

GROUP = Table("ch12.group", keys=("N×K", "kernel"), value="µs", unit="µs",
              fields={"bits a weight": "bits_per_weight", "weight GB/s": "gbs", "× FP16 cuBLAS": "speedup",
                      "key": "key", "harness": "harness"},
              spread="spread", spread_fields=SPREAD, name="{kernel}.{N×K}", tag="group", legacy=_shape_from_name)

BATCH = Table("ch12.batch", keys={"N×K": "shape", "M": "batch", "kernel": "kernel"}, value="µs", unit="µs",
              fields={"× FP16 cuBLAS": "speedup", "key": "key", "harness": "harness"},
              spread="spread", spread_fields=SPREAD, name="{kernel}.m{M}.{N×K}", tag="batch", legacy=_shape_from_name)


def _sweep_legacy(r: Record) -> dict[str, Any] | None:
    parts = r.name.split(".")
    if len(parts) != 4 or "us" not in r.extra:
        return None
    return {"scheme": parts[2].replace("_", " "), "key": None, "harness": SWEEP_HARNESS_BEFORE}


SWEEP = Table("ch12.sweep", keys=("scheme", "M"), value="TFLOP/s", unit="TFLOP/s",
              fields={"µs": "us", "bytes": "bytes", "lo_us": "lo_us", "hi_us": "hi_us", "key": "key",
                      "harness": "harness"},
              spread="spread", spread_fields=SPREAD, name="{scheme}.b{M}", tag="sweep", legacy=_sweep_legacy)


def _decode_legacy(r: Record) -> dict[str, Any]:
    return {"path": r.name.rsplit(".", 1)[1].replace("_", " "), "ms/token": r.extra.get("ms_per_token"),
            "weight GB/s": r.extra.get("weight_gbs")}


DECODE = Table("ch12.decode.tokens_s", keys=("path",), value="tokens/s", unit="tokens/s",
               fields={"ms/token": "ms_per_token", "weights GB": "weights_gb", "weight GB/s": "weight_gbs",
                       "of D2D": "of_d2d", "× fastest FP16": "over_fastest_fp16", "layers": "layers",
                       "context": "context"},
               spread="spread", spread_fields=SPREAD, tag="decode", legacy=_decode_legacy)

GEMM_LAUNCH = Table("ch12.decode.gemm_launch", keys=("scheme", "shape", "M"), value="µs", unit="µs",
                    fields=("config", "split"), name="{scheme}.{shape}.m{M}",
                    example={"scheme": "w4a16", "shape": "12288x4096", "M": 8, "µs": 20.0, "config": "c", "split": 4})

GEMM_NCU = Table("ch12.gemm_ncu", keys=("kernel", "M"), value="DRAM % of peak", unit="%",
                 fields={"launch": "launch", "registers": "registers", "theoretical occupancy %": "theoretical_occupancy",
                         "grid warps / SM": "grid_warps_per_sm", "achieved occupancy %": "achieved_occupancy",
                         "tensor pipe % active": "tensor_pct", "issue slots busy %": "issue_pct",
                         "cycles / instruction": "cycles_per_instruction", "of which load wait": "load_wait_cycles",
                         "instructions / tile": "instructions_per_tile", "ncu µs": "ncu_us"},
                 name="{kernel}.m{M}",
                 example={"kernel": "W4A16 GEMM", "M": 4, "launch": "config c, split 3", "registers": 156.0,
                          "theoretical occupancy %": 18.75, "grid warps / SM": 7.8, "achieved occupancy %": 11.7,
                          "DRAM % of peak": 40.8, "tensor pipe % active": 16.2, "issue slots busy %": 41.7,
                          "cycles / instruction": 4.5, "of which load wait": 0.5, "instructions / tile": 128.7,
                          "ncu µs": 17.3})

DECODE_BATCH = Table("ch12.decode.batch", keys=("batch", "path"), value="tokens/s", unit="tokens/s",
                     fields={"ms/step": "ms_per_step", "× FP16": "over_fp16", "layers": "layers", "context": "context"},
                     spread="spread", spread_fields=SPREAD, name="b{batch}.{path}",
                     example={"batch": 8, "path": "w4a16 GEMM (CUDA)", "tokens/s": 900.0, "ms/step": 8.9,
                              "× FP16": 1.6, "layers": 8, "context": 512,
                              "spread": {"min_us": 8800.0, "max_us": 9000.0, "q1_us": 8850.0, "q3_us": 8950.0,
                                         "rounds": 7}})

ATTENTION = Table("ch12.decode.attention", keys=("batch", "kernel"), value="µs", unit="µs",
                  fields={"cache GB/s": "cache_gbs", "× PyTorch": "over_pytorch"},
                  spread="spread", spread_fields=SPREAD, name="b{batch}.{kernel}",
                  example={"batch": 1, "kernel": "course kernel", "µs": 4.0, "cache GB/s": 2100.0, "× PyTorch": 2.2,
                           "spread": {"min_us": 3.9, "max_us": 4.2, "q1_us": 3.95, "q3_us": 4.05, "rounds": 7}})

PDL = Table("ch12.decode.pdl", keys=("path", "launch"), value="µs/step", unit="µs", fields={"× plain": "over_plain"},
            spread="spread", spread_fields=SPREAD,
            example={"path": "w4a16 fused (CUDA)", "launch": "PDL", "µs/step": 2000.0, "× plain": 1.03,
                     "spread": {"min_us": 1990.0, "max_us": 2010.0, "q1_us": 1995.0, "q3_us": 2005.0, "rounds": 7}})

SPLIT = Table("ch12.decode.split", keys=("kind", "part"), value="ms/step", unit="ms", fields=("share",),
              example={"kind": "w4a16", "part": "GEMV", "ms/step": 1.5, "share": 0.6})

def ppl_slug(row: Mapping[str, Any]) -> str:
    """A quality row's record-name tail: the scheme in lower case, every other character an underscore."""
    slug = "".join(c if c.isascii() and c.isalnum() else "_" for c in str(row["scheme"]).lower()).strip("_")
    while "__" in slug:
        slug = slug.replace("__", "_")
    return slug


QUALITY = Table("ch12.ppl", keys=("scheme",), value="perplexity", unit="perplexity",
                fields={"vs FP32 %": "vs_fp32_pct", "_vs_lo": "vs_fp32_lo", "_vs_hi": "vs_fp32_hi"},
                spread="_spread", name=ppl_slug, tag="ppl",
                legacy=lambda r: {"scheme": r.name.rsplit(".", 1)[1]})

D2D = Table("ch12.copy", keys=("copy",), value="GB/s", unit="GB/s",
            example={"copy": "torch device-to-device", "GB/s": 4000.0})


def decode_rows(rows: list[dict]) -> list[dict]:
    """Decode rows with '× fastest FP16' filled in where a stored row lacks it (the paths' ratio to the fastest
    FP16 path of the same run)."""
    fp16 = max((r["tokens/s"] for r in rows if r["path"].startswith("fp16")), default=None)
    return [{**r, "× fastest FP16": r["× fastest FP16"] if r.get("× fastest FP16") is not None or not fp16
             else r["tokens/s"] / fp16} for r in rows]


def agreement(tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[dict]:
    """Kernels shown in more than one table ({table name: rows}), by their `key`: each table's µs and harness,
    max / min, and whether they agree within AGREE — or why they may differ (another harness)."""
    by: dict[str, dict[str, tuple[float, str]]] = {}
    for table, rows in tables.items():
        for r in rows:
            if r.get("key") and r.get("µs") is not None:
                by.setdefault(r["key"], {})[table] = (float(r["µs"]), r.get("harness") or HARNESS)
    out = []
    for key, seen in by.items():
        if len(seen) < 2:
            continue
        values = [v for v, _ in seen.values()]
        harnesses = {h for _, h in seen.values()}
        ratio = max(values) / min(values)
        out.append({"kernel and shape": key,
                    "tables": ", ".join(f"{t} {v:.2f} µs" for t, (v, _) in seen.items()), "max / min": ratio,
                    "agree": ratio <= 1 + AGREE if len(harnesses) == 1 else
                    "another harness: " + " vs ".join(sorted(harnesses))})
    return out


def agreement_sentence(rows: list[dict]) -> str:
    """What the agreement table says: all agree, or which kernel two experiments of one run timed apart, and what
    that means for reading the tables."""
    if not rows:
        return "No kernel is shown in two tables."
    off = [r for r in rows if r["agree"] is False]
    if not off:
        return f"All {len(rows)} kernels shown in two tables agree within {AGREE:.0%} (or name the harness that differs)."
    said = "; ".join(f"{r['kernel and shape']} ({r['tables']}: {r['max / min'] - 1:.0%} apart)" for r in off)
    return (f"Timed apart by more than {AGREE:.0%} in one harness: {said}. The card ran faster or slower between these "
            "experiments of one run, so compare ratios within a table (its kernels share its interleaved rounds), "
            "not microseconds across tables.")

