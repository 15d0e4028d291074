"""Chapter 3's GPU measurements as Experiments: each runs here on a GPU (and records), or shows the stored run.

    COPY       every copy kernel's GB/s beside torch's D2D copy; the copy.*_over_d2d headlines
    STRIDE     the strided copy per stride, cupy and numba; copy.stride32_over_stride1
    OFFSET     the misaligned copy per offset, cupy and numba
    TRANSPOSE  the tiled copy and three transposes, GB/s and as a fraction of the tiled copy (one timing, two
               tables); the transpose.*_over_copy headlines
    READONLY   the stencil with plain, const __restrict__ and __ldg loads

A notebook cell is ``result = experiments.COPY.run(); result.show("copy", ...)``; the figures below draw a
result's rows, measured here or stored, labelled with their device.

Serves: chapter 3.
"""

from __future__ import annotations

from typing import Any

from helpers import spread as sp
from helpers.chapters.ch03_memory_hierarchy import memory_bench as mb
from helpers.chapters.ch03_memory_hierarchy import tables
from helpers.experiment import Experiment, Result, Rows

D2D = "torch_d2d"


def _copy(n: int = mb.COPY_N) -> Rows:
    spreads: dict = {}
    gbs = mb.copy_bandwidth(n, spreads=spreads)
    return {"copy": [{"kernel": k, "GB/s": v, "spread": spreads.get(k)} for k, v in gbs.items()]}


def _ratio(rows: list[dict], key: str, fast: Any, base: Any, value: str = "GB/s") -> tuple[float, sp.Spread | None]:
    """rows[fast] ÷ rows[base] (by `key`) of their `value`, with the widest ratio of their spreads when both have one."""
    by = {r[key]: r for r in rows}
    a, b = by[fast], by[base]
    noise = sp.ratio(a["spread"], b["spread"]) if a["spread"] and b["spread"] else None
    return a[value] / b[value], noise


def _copy_derive(rows: Rows) -> dict[str, Any]:
    out = {}
    for backend in ("cupy", "numba"):
        best = max((r for r in rows["copy"] if r["kernel"].startswith(backend)), key=lambda r: r["GB/s"])
        out[f"copy.{backend}_over_d2d"] = _ratio(rows["copy"], "kernel", best["kernel"], D2D)
    return out


COPY = Experiment("ch03.copy", _copy, {"copy": tables.COPY}, headlines=("copy.cupy_over_d2d", "copy.numba_over_d2d"),
                  derive=_copy_derive)


def _sweep_rows(curves: dict[str, dict[int, float]], spreads: dict, column: str) -> list[dict]:
    return [{"backend": b, column: x, "GB/s": v, "spread": spreads.get((b, x))} for b, c in curves.items()
            for x, v in c.items()]


def _stride(strides: tuple[int, ...] = mb.STRIDES, n: int = mb.STRIDE_N) -> Rows:
    spreads: dict = {}
    return {"stride": _sweep_rows(mb.stride_bandwidth(strides, n, spreads, timelines=True), spreads, "stride")}


def _stride_derive(rows: Rows) -> dict[str, Any]:
    cupy = [{**r, "at": r["stride"]} for r in rows["stride"] if r["backend"] == "cupy"]
    return {"copy.stride32_over_stride1": _ratio(cupy, "at", 32, 1)}


STRIDE = Experiment("ch03.stride", _stride, {"stride": tables.STRIDE}, headlines=("copy.stride32_over_stride1",),
                    derive=_stride_derive)


def _offset(offsets: tuple[int, ...] = mb.OFFSETS, n: int = mb.COPY_N // 2) -> Rows:
    spreads: dict = {}
    return {"offset": _sweep_rows(mb.offset_bandwidth(offsets, n, spreads), spreads, "offset")}


OFFSET = Experiment("ch03.offset", _offset, {"offset": tables.OFFSET})


def relative_rows(rows: list[dict], value: str, baseline: str, column: str) -> list[dict]:
    """Each '<backend>_<variant>' row's `value` ÷ that of its backend's `baseline` variant, as `column`, with the
    widest ratio of their spreads."""
    out = []
    for r in rows:
        base = f"{r['kernel'].split('_', 1)[0]}_{baseline}"
        ratio, noise = _ratio(rows, "kernel", r["kernel"], base, value)
        out.append({"kernel": r["kernel"], column: ratio, "spread": noise})
    return out


def fraction_rows(rows: list[dict]) -> list[dict]:
    """Each transpose row as a fraction of its backend's tiled copy ('cupy_copy', 'numba_copy')."""
    return relative_rows(rows, "GB/s", "copy", "÷ tiled copy")


def _transpose(n: int = mb.TRANSPOSE_N) -> Rows:
    spreads: dict = {}
    rows = [{"kernel": k, "GB/s": v, "spread": spreads.get(k)} for k, v in mb.transpose_bandwidth(n, spreads).items()]
    return {"transpose": rows, "fraction": fraction_rows(rows)}


def _transpose_derive(rows: Rows) -> dict[str, Any]:
    by = {r["kernel"]: r for r in rows["fraction"]}
    return {f"transpose.{v}_over_copy": (by[f"cupy_{v}"]["÷ tiled copy"], by[f"cupy_{v}"]["spread"])
            for v in ("padded", "naive")}


TRANSPOSE = Experiment("ch03.transpose", _transpose, {"transpose": tables.TRANSPOSE, "fraction": tables.FRACTION},
                       headlines=("transpose.padded_over_copy", "transpose.naive_over_copy"), derive=_transpose_derive)


def _readonly(n: int = mb.COPY_N // 2, radius: int = mb.STENCIL_RADIUS) -> Rows:
    spreads: dict = {}
    gbs = mb.readonly_bandwidth(n, radius, spreads)
    return {"readonly": [{"loads": k, "GB/s": v, "spread": spreads.get(k)} for k, v in gbs.items()]}


READONLY = Experiment("ch03.readonly", _readonly, {"readonly": tables.READONLY})


# ---- figures of a result (measured here or stored) ------------------------------------------------------

def copy_bars(result: Result) -> Any:
    """Every copy kernel as a fraction of torch's D2D copy, against the 0.92 target."""
    from helpers import plots
    from helpers.metrics import BY_NAME

    rows = result["copy"]
    d2d = next((r["GB/s"] for r in rows if r["kernel"] == D2D), None)
    if d2d is None:
        print(f"Copy kernels: no rows ({result.where()}).")
        return None
    return plots.bar_ratios({r["kernel"]: r["GB/s"] / d2d for r in rows}, title="Copy kernels ÷ torch D2D copy",
                            ylabel="fraction of D2D bandwidth", target=BY_NAME["copy.cupy_over_d2d"].value,
                            device=result.device, note=result.note)


def curves(result: Result, table: str, column: str) -> dict[str, dict[int, float]]:
    """{backend: {x: GB/s}} of a sweep table ('stride', 'offset'), x in increasing order."""
    out: dict[str, dict[int, float]] = {}
    for r in sorted(result[table], key=lambda r: r[column]):
        out.setdefault(r["backend"], {})[r[column]] = r["GB/s"]
    return out


def stride_plot(result: Result) -> Any:
    """The measured stride curves relative to stride 1, beside the sector model (``memory_bench``)."""
    measured = curves(result, "stride", "stride")
    if not measured:
        print(f"Strided copy: no rows ({result.where()}).")
        return None
    return mb.plot_stride_model(measured, note=result.note, device=result.device)


def offset_plot(result: Result) -> Any:
    """GB/s of the offset copy per offset, cupy and numba, from zero."""
    from helpers import plots

    measured = curves(result, "offset", "offset")
    if not measured:
        print(f"Offset copy: no rows ({result.where()}).")
        return None
    xs = sorted(set().union(*measured.values()))
    return plots.sweep(xs, {k: [c.get(x, float("nan")) for x in xs] for k, c in measured.items()},
                       title="Offset copy", xlabel="offset (floats)", ylabel="bandwidth (GB/s)", ymin=0,
                       device=result.device, note=result.note)


def transpose_bars(result: Result) -> Any:
    """Each transpose (and copy) as a fraction of its backend's tiled copy, against the padded transpose's target."""
    from helpers.metrics import BY_NAME

    return result.bars("fraction", "kernel", "÷ tiled copy", title="Transpose ÷ tiled copy",
                       ylabel="fraction of copy bandwidth", target=BY_NAME["transpose.padded_over_copy"].value)
