"""Chapter 2's tables, each declared once: how its rows become records and come back from a stored run.

The record names are those the chapter has always stored: ``ch02.gemm_tflops.<precision>.n<size>`` on a GPU
and ``ch02.cpu_gemm_tflops.…`` on a CPU, ``ch02.roofline.<cpu|gpu>.<kind>.<i>`` for a roofline point, and
``ch02.<cpu|gpu>_bandwidth_gbs`` and ``ch02.<cpu|gpu>_roof_peak_tflops`` for its roof, so the stored runs made
before these declarations read back as rows: each table's `legacy` hook takes the columns from the name.

Serves: chapter 2.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from helpers.experiment import Table
from helpers.perf.gemm import GemmResult
from helpers.perf.roofline import RoofPoint
from helpers.records import Record


def _gemm(prefix: str) -> Table:
    def legacy(r: Record) -> dict | None:
        m = re.fullmatch(rf"{re.escape(prefix)}\.(\w+)\.n(\d+)", r.name)
        return None if m is None else {"precision": m.group(1), "n": int(m.group(2))}

    return Table(prefix, keys=("precision", "n"), value="TFLOP/s", unit="TFLOP/s",
                 fields={"% of spec": "pct_of_spec", "size": "size"}, name="{precision}.n{n}", legacy=legacy)


GEMM = _gemm("ch02.gemm_tflops")
CPU_GEMM = _gemm("ch02.cpu_gemm_tflops")

DP4A = Table("ch02.dp4a", keys=("kernel",), value="TOPS", unit="TOPS", fields=("size",),
             example={"kernel": "dp4a (CUDA cores)", "TOPS": 90.0, "size": [8192, 8192, 8192]})


def _points_legacy(r: Record) -> dict | None:
    m = re.fullmatch(r"ch02\.roofline\.(cpu|gpu)\.(\w+)\.(\d+)", r.name)
    return None if m is None else {"where": m.group(1), "kind": m.group(2), "i": int(m.group(3))}


POINTS = Table("ch02.roofline", keys=("where", "kind", "i"), value="TFLOP/s", unit="TFLOP/s",
               fields={"kernel": "label", "FLOP/byte": "intensity"}, tag="ch02.roofline", legacy=_points_legacy)


def _roof(tail: str, value: str, unit: str, keys: tuple[str, ...] = (), fields: tuple[str, ...] = ()) -> Table:
    """One number of each machine's roof: ch02.<where>_<tail> (with `keys`: ch02.<where>_<tail>.<key>...)."""
    pattern = re.compile(rf"ch02\.(cpu|gpu)_{tail}")

    def legacy(r: Record) -> dict | None:
        m = pattern.fullmatch(r.name)
        return None if m is None else {"where": m.group(1)}

    name = ".".join([f"{{where}}_{tail}", *(f"{{{k}}}" for k in keys)])
    return Table("ch02", keys=("where", *keys), value=value, unit=unit, fields=fields, name=name, tag=f"ch02.{tail}",
                 legacy=None if keys else legacy)


BANDWIDTH = _roof("bandwidth_gbs", "copy GB/s", "GB/s")
# The roof's compute ceiling, measured apart from the points ('from' says by what: ``roofs.gemm_peak``); a run stored
# before 2026-12-06 holds the fastest point there instead and no 'from' (``roofs`` then reads the GEMM table).
PEAK = _roof("roof_peak_tflops", "peak TFLOP/s", "TFLOP/s", fields=("from",))
READ = _roof("read_gbs", "read GB/s", "GB/s", keys=("kernel",))  # read-only reductions: the memory roof's measure


def gemm_rows(results: Iterable[GemmResult]) -> list[dict]:
    """GEMM (or CPU_GEMM) rows of measured GEMMs."""
    return [{"precision": r.precision, "n": r.m, "TFLOP/s": r.tflops, "% of spec": r.pct_of_spec,
             "size": [r.m, r.n, r.k]} for r in results]


def gemm_results(rows: Iterable[Mapping[str, Any]]) -> list[GemmResult]:
    """The GemmResults of GEMM rows (measured here or stored; the spec peak from the row's % of spec)."""
    out = []
    for r in rows:
        m, n, k = r["size"] or (r["n"],) * 3
        pct = r["% of spec"]
        spec = r["TFLOP/s"] * 100 / pct if pct else None
        out.append(GemmResult(r["precision"], m, n, k, 2 * m * n * k / (r["TFLOP/s"] * 1e12), r["TFLOP/s"], spec))
    return out


def point_rows(points: Iterable[RoofPoint], where: str) -> list[dict]:
    """POINTS rows of measured roofline points."""
    return [{"where": where, "kind": p.kind, "i": i, "TFLOP/s": p.tflops, "kernel": p.name, "FLOP/byte": p.intensity}
            for i, p in enumerate(points)]


def points(rows: Iterable[Mapping[str, Any]], where: str) -> list[RoofPoint]:
    """The roofline points of one machine's POINTS rows (1-second, unit-FLOP scale, as stored)."""
    return [RoofPoint(r["kernel"], r["kind"], r["TFLOP/s"] * 1e12, r["TFLOP/s"] * 1e12 / r["FLOP/byte"], 1.0)
            for r in sorted(rows, key=lambda r: r["i"]) if r["where"] == where and r["FLOP/byte"]]


def one(rows: Iterable[Mapping[str, Any]], where: str, column: str) -> float | None:
    """The `column` of the row of one machine ('cpu', 'gpu') in a roof table, or None."""
    return next((r[column] for r in rows if r["where"] == where), None)

