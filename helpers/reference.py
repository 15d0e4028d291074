"""Stored reference results (from a real GPU run, and from the CPU CI machine), shown beside yours.

Serves: core — used by chapters 0–11.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.bench import Record, load_records, session_records
from helpers.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DIR = ROOT / "reference"
SOURCES = ("h200", "cpu")


@dataclass(frozen=True)
class Target:
    """A headline measurement's goal, from shared/MEASUREMENTS.md."""

    name: str
    op: str  # ">=", "<=" or "reported"
    value: float | None
    meaning: str

    def met(self, measured: float | None) -> bool | None:
        """True/False against the target; None when there is no target or no measurement."""
        if measured is None or self.op == "reported" or self.value is None:
            return None
        return {">=": operator.ge, "<=": operator.le}[self.op](measured, self.value)


TARGETS: tuple[Target, ...] = (
    Target("copy.cupy_over_d2d", ">=", 0.92, "best cupy copy kernel ÷ torch device-to-device copy"),
    Target("copy.numba_over_d2d", ">=", 0.92, "best numba copy kernel ÷ torch device-to-device copy"),
    Target("copy.stride32_over_stride1", "<=", 0.15, "strided copy, stride 32 ÷ stride 1"),
    Target("transpose.padded_over_copy", ">=", 0.90, "padded shared-memory transpose ÷ copy"),
    Target("transpose.naive_over_copy", "reported", None, "naive transpose ÷ copy"),
    Target("gemm.bf16_over_spec", ">=", 0.70, "best BF16 GEMM ÷ dense spec peak"),
    Target("gemm.int8_over_bf16", ">=", 1.15, "INT8 tensor-core GEMM ÷ BF16 GEMM"),
    Target("gemm.fp8_over_bf16", ">=", 1.6, "FP8 GEMM ÷ BF16 GEMM"),
    Target("gemm.dp4a_over_int8_tc", "reported", None, "dp4a INT8 GEMM ÷ tensor-core INT8 GEMM"),
    Target("bert_base.int8_over_fp16", ">=", 1.3, "BERT-base seq128 b32: best INT8 ÷ FP16 throughput"),
    Target("bert_base.int8_over_fp32_eager", ">=", 5.0, "BERT-base: best INT8 ÷ FP32 eager PyTorch"),
    Target("resnet50.best_over_mlperf_h200", "reported", 0.35,
           "best ResNet-50 images/s ÷ 94,620 (MLPerf v4.1 H200, per GPU); aim ≥ 0.35"),
    Target("ort_cpu.int8_over_fp32", ">=", 2.5, "ONNX Runtime INT8 ÷ FP32 throughput, CNN, batch 32"),
    Target("ptq.best_int8_delta_pts", "<=", 1.0, "FP32 − best INT8 PTQ accuracy (points)"),
    Target("ptq.per_tensor_minus_per_channel_pts", "reported", None,
           "accuracy gain of per-channel over per-tensor weights (points)"),
    Target("qat.delta_pts", "<=", 0.3, "FP32 − QAT accuracy (points)"),
    Target("suite.cpu_test_minutes", "<=", 15.0, "wall minutes of the full README test command"),
    Target("suite.gpu_report_minutes", "<=", 8.0, "wall minutes of the whole GPU reference run"),
    Target("llm.gemv.w8a16_over_fp16", ">=", 1.8, "batch-1 GEMV at LLM shapes: INT8 weights ÷ FP16"),
    Target("llm.gemv.w4a16_over_fp16", ">=", 3.0, "batch-1 GEMV at LLM shapes: INT4 per-group weights ÷ FP16"),
    Target("llm.gemv.best_over_d2d", ">=", 0.8, "best weight-only GEMV bandwidth ÷ torch D2D copy bandwidth"),
    Target("llm.decode.w4a16_over_fp16", ">=", 2.5, "decode tokens/s of an LLM-shaped stack at batch 1, W4A16 ÷ FP16"),
    Target("trt_rtx.int8_over_fp32_engine_size", "reported", None,
           "TensorRT-RTX engine size, INT8 Q/DQ ÷ FP32, ResNet-50"),
    Target("suite.fresh_clone_to_lab_minutes", "reported", None,
           "wall minutes from a fresh clone to JupyterLab serving via `make lab`"),
)
TARGETS_BY_NAME = {t.name: t for t in TARGETS}


def results_path(source: str = "h200") -> Path:
    """Where the stored results of one source live."""
    if source not in SOURCES:
        raise InputError(f"reference source must be one of {', '.join(SOURCES)}; got {source!r}.")
    return REFERENCE_DIR / source / "results.json"


@functools.cache
def load(source: str = "h200") -> tuple[Record, ...]:
    """The stored records of one source (empty when none have been stored yet)."""
    path = results_path(source)
    return tuple(load_records(path)) if path.exists() else ()


def lookup(name: str, source: str = "h200") -> Record | None:
    """The stored record of one measurement, or None."""
    return next((r for r in load(source) if r.name == name), None)


def lookup_all(prefix: str, source: str = "h200") -> list[Record]:
    """Every stored record whose name starts with `prefix`."""
    return [r for r in load(source) if r.name.startswith(prefix)]


def _fmt(r: Record | None) -> str:
    """Value and unit of a record, or 'not measured'."""
    if r is None:
        return "not measured"
    return f"{r.value:.4g} {r.unit}".strip()


def comparison_rows(names: Sequence[str], mine: Iterable[Record] | None = None) -> list[dict]:
    """Rows of name / yours / each stored source / target for the given measurement names."""
    mine_by_name = {r.name: r for r in (session_records() if mine is None else mine)}
    rows = []
    for n in names:
        row = {"measurement": n, "yours": _fmt(mine_by_name.get(n))}
        for src in SOURCES:
            ref = lookup(n, src)
            row[f"stored {src}"] = _fmt(ref) + (f" ({ref.device}, {ref.date})" if ref else "")
        t = TARGETS_BY_NAME.get(n)
        row["target"] = f"{t.op} {t.value:g}" if t and t.value is not None else ("reported" if t else "")
        rows.append(row)
    return rows


def show(names: Sequence[str], mine: Iterable[Record] | None = None) -> None:
    """Show your measurements beside the stored reference results, labelled with device and date."""
    from helpers.tables import show as show_table

    show_table(comparison_rows(names, mine),
               caption="Your numbers beside stored reference runs (device, date in brackets).")


def stored_label(source: str = "h200") -> str:
    """'NVIDIA H200, 2026-11-29 (stored reference)' for figure labels, from the stored file."""
    recs = load(source)
    if not recs:
        return f"no stored {source} reference yet"
    return f"{recs[0].device}, {recs[0].date} (stored reference)"


def stored_curve(prefix: str, source: str = "h200") -> dict[int, float]:
    """A stored sweep {x: value} from records named <prefix>.<letter><x>, sorted by x."""
    pts = {}
    for r in lookup_all(prefix + ".", source):
        tail = r.name[len(prefix) + 1:].lstrip("sobk")
        if tail.isdigit():
            pts[int(tail)] = r.value
    return dict(sorted(pts.items()))


def _stored_note(source: str = "h200") -> tuple[str | None, str]:
    """(device, note) for a figure drawn from stored records."""
    recs = load(source)
    return (recs[0].device if recs else None), (f"stored reference, {recs[0].date}" if recs else "")


def plot_stored_sweep(prefixes: dict[str, str], title: str, xlabel: str, ylabel: str,
                      logx: bool = False, source: str = "h200") -> Any:
    """Redraw stored sweeps {label: record prefix} as lines, or say that none is stored yet."""
    from helpers import plots

    curves = {label: stored_curve(p, source) for label, p in prefixes.items()}
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        print(f"{title}: not measured yet (no stored {source} records under "
              f"{', '.join(prefixes.values())}).")
        return None
    xs = sorted(set().union(*curves.values()))
    ys = {k: [v.get(x, float("nan")) for x in xs] for k, v in curves.items()}
    device, note = _stored_note(source)
    return plots.sweep(xs, ys, title=title, xlabel=xlabel, ylabel=ylabel, logx=logx, device=device,
                       note=note)


def plot_stored_bars(prefix: str, title: str, ylabel: str, target: float | None = None,
                     source: str = "h200") -> Any:
    """Bar chart of every stored record under `prefix` (labels = name tails), or say none is stored."""
    from helpers import plots

    recs = lookup_all(prefix + ".", source)
    if not recs:
        print(f"{title}: not measured yet (no stored {source} records under {prefix}.).")
        return None
    device, note = _stored_note(source)
    return plots.bar_ratios({r.name[len(prefix) + 1:]: r.value for r in recs}, title=title, ylabel=ylabel,
                            target=target, device=device, note=note)
