"""Stored reference results (from a real GPU run, and from the CPU CI machine), shown beside yours.

Every stored display says where its numbers come from: device, date and the software they ran with
(``provenance(source)``), because the reference runs did not always use the pinned versions.

Serves: core — used by chapters 0–12 and labs 06, 08, 11–13.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.bench import Record, load_records, session_records
from helpers.errors import InputError
from helpers.tables import number

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DIR = ROOT / "reference"
SOURCES = ("h200", "cpu")
SOURCE_NAMES = {"h200": "stored H200 run", "cpu": "stored CPU run"}
# How the software of a record is named in provenance lines, in this order.
SOFTWARE = (("torch", "torch"), ("cuda", "CUDA"), ("driver", "driver"), ("onnxruntime", "ONNX Runtime"),
            ("numba", "numba"), ("cupy", "cupy"), ("numpy", "numpy"), ("tensorrt", "TensorRT"),
            ("python", "Python"))
PIN_FILES = ("requirements.txt", "requirements-gpu.txt")
PIN_NAMES = {"onnxruntime": "onnxruntime", "cupy": "cupy-cuda12x", "tensorrt": "tensorrt-cu12"}


@dataclass(frozen=True)
class Target:
    """A headline measurement's goal: its name, comparison and value (the course's list is TARGETS below)."""

    name: str
    op: str  # ">=", "<=" or "reported"
    value: float | None
    meaning: str

    def met(self, measured: float | None) -> bool | None:
        """True/False against the target; None when there is no target or no measurement."""
        if measured is None or self.op == "reported" or self.value is None:
            return None
        return {">=": operator.ge, "<=": operator.le}[self.op](measured, self.value)

    def straddled(self, s: Any) -> bool:
        """True when a measured spread (helpers.spread.Spread, or None) contains the target value: not resolved."""
        return s is not None and self.op != "reported" and self.value is not None and s.contains(self.value)

    @property
    def text(self) -> str:
        """'>= 0.92', or 'reported' for a measurement without a target."""
        return "reported" if self.op == "reported" or self.value is None else f"{self.op} {self.value:g}"


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
    Target("llm.gemv.w4a16_over_fp16", ">=", 2.7, "batch-1 GEMV at LLM shapes: INT4 per-group weights ÷ FP16"),
    Target("llm.gemv.w4a16_over_tinygemm", ">=", 1.4,
           "the course's W4A16 GEMV ÷ PyTorch's tinygemm INT4 (_weight_int4pack_mm), same shapes, same run"),
    Target("llm.gemv.best_over_d2d", ">=", 0.85, "best weight-only GEMV bandwidth ÷ torch D2D copy bandwidth"),
    Target("llm.decode.w4a16_over_fp16", ">=", 2.2, "decode tokens/s of an LLM-shaped stack at batch 1, W4A16 ÷ FP16"),
    Target("llm.decode.w8a16_over_fp16", ">=", 1.7, "decode tokens/s of an LLM-shaped stack at batch 1, W8A16 ÷ FP16"),
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


# ---- provenance: which device, date and software a stored run used ---------------------------------

def software(source: str = "h200", records: Iterable[Record] | None = None) -> dict[str, str]:
    """The software versions a run used: the stored `source`, or the given records (CUDA read from a
    '+cuNNN' torch build when not recorded)."""
    found: dict[str, str] = {}
    for r in load(source) if records is None else records:
        found.update({k: v for k, v in r.versions.items() if k not in found})
    cu = re.search(r"\+cu(\d+)(\d)$", found.get("torch", ""))
    if "cuda" not in found and cu:
        found["cuda"] = f"{cu.group(1)}.{cu.group(2)}"
    return found


def provenance(source: str = "h200", short: bool = False) -> str:
    """'NVIDIA H200, 2026-11-29; torch 2.11.0+cu130, CUDA 13.0, …, Python 3.12.3' for one stored run.

    `short` gives the figure-footer form (device, date and the versions that matter most).
    """
    recs = load(source)
    if not recs:
        return f"no stored {source} run yet"
    sw = software(source)
    keys = ("torch", "cuda", "onnxruntime", "numba", "python") if short else [k for k, _ in SOFTWARE]
    names = dict(SOFTWARE) if not short else {**dict(SOFTWARE), "onnxruntime": "ORT"}
    parts = [f"{names[k]} {sw[k]}" for k in keys if k in sw]
    if not short and "cuda" in sw and "driver" not in sw:
        parts.append("driver not recorded")
    dates = sorted({r.date for r in recs})
    when = dates[0] if len(dates) == 1 else f"{dates[0]}…{dates[-1]}"
    return f"{recs[0].device}, {when}; " + ", ".join(parts)


def pins(root: Path = ROOT) -> dict[str, str]:
    """The course's pinned versions {package: version}, read from the requirements files."""
    out: dict[str, str] = {}
    for f in PIN_FILES:
        path = root / f
        for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
            m = re.match(r"\s*([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
            if m:
                out.setdefault(m.group(1).lower(), m.group(2))
    return out


def pin_differences(source: str = "h200", records: Iterable[Record] | None = None) -> list[str]:
    """Where a run's software differs from the pins, e.g. 'torch 2.11.0+cu130 (pinned 2.13.0)'."""
    pinned, sw = pins(), software(source, records)
    out = []
    for key, label in SOFTWARE:
        have, want = sw.get(key), pinned.get(PIN_NAMES.get(key, key))
        if have and want and have.split("+")[0] != want.split("+")[0]:
            out.append(f"{label} {have} (pinned {want})")
    return out


def stored_label(source: str = "h200") -> str:
    """Figure footer for stored data: 'NVIDIA H200 · stored reference, 2026-11-29 · torch …, Python …'."""
    recs = load(source)
    if not recs:
        return f"no stored {source} reference yet"
    device, rest = provenance(source, short=True).split(", ", 1)
    when, versions = rest.split("; ", 1)
    return f"{device} · stored reference, {when} · {versions}"


def caption(sources: Iterable[str] = SOURCES) -> str:
    """One line per stored source: its device, date and software."""
    return " | ".join(f"{SOURCE_NAMES[s]}: {provenance(s)}" for s in sources if load(s))


# ---- the side-by-side table: description, unit, yours (or why not), stored, target ------------------

def describe(name: str, descriptions: Mapping[str, str] | None = None) -> str:
    """A human description of a measurement: given, from the targets, or the name itself."""
    if descriptions and descriptions.get(name):
        return descriptions[name]
    t = TARGETS_BY_NAME.get(name)
    return t.meaning if t else name


def why_not_here(name: str) -> str:
    """Why this session has no value for `name`: which notebook measures it, and whether it needs a GPU."""
    gpu, cpu = lookup(name, "h200"), lookup(name, "cpu")
    where = next((r.notebook for r in (cpu, gpu) if r and r.notebook), None)
    by = f"notebook {where}" if where and re.match(r"\d\d", where) else (where or "")
    if gpu and not cpu:
        return "needs an NVIDIA GPU" + (f" ({by})" if by else "")
    if cpu or gpu:
        return f"measured in {by}" if by else "measured elsewhere in the course"
    return "no run has measured it yet"


def comparison_rows(names: Sequence[str] | Mapping[str, str], mine: Iterable[Record] | None = None) -> list[dict]:
    """Rows of what / unit / yours (or why not) / each stored source / target, for the given names.

    `names` may map each name to a human description; otherwise the target's meaning is used.
    """
    descriptions = names if isinstance(names, Mapping) else None
    mine_by_name = {r.name: r for r in (session_records() if mine is None else mine)}
    rows = []
    for n in names:
        stored = {src: lookup(n, src) for src in SOURCES}
        unit = next((r.unit for r in (mine_by_name.get(n), *stored.values()) if r), "")
        here = mine_by_name.get(n)
        row = {"what": describe(n, descriptions), "unit": unit,
               "yours": number(here.value) if here else why_not_here(n)}
        for src, rec in stored.items():
            row[SOURCE_NAMES[src]] = number(rec.value if rec else None)
        t = TARGETS_BY_NAME.get(n)
        if t:
            row["target"] = t.text
        row["name"] = n
        rows.append(row)
    return rows


def show(names: Sequence[str] | Mapping[str, str], mine: Iterable[Record] | None = None) -> None:
    """Show your measurements beside the stored reference results, with each stored run's provenance."""
    from helpers.tables import show as show_table

    show_table(comparison_rows(names, mine), caption="Yours beside the stored reference runs. " + caption())


# ---- stored curves and bars, redrawn -------------------------------------------------------------

def stored_curve(prefix: str, source: str = "h200") -> dict[int, float]:
    """A stored sweep {x: value} from records named <prefix>.<letter><x>, sorted by x."""
    pts = {}
    for r in lookup_all(prefix + ".", source):
        tail = r.name[len(prefix) + 1:].lstrip("sobk")
        if tail.isdigit():
            pts[int(tail)] = r.value
    return dict(sorted(pts.items()))


def plot_stored_sweep(prefixes: dict[str, str], title: str, xlabel: str, ylabel: str,
                      logx: bool = False, source: str = "h200", **kw: Any) -> Any:
    """Redraw stored sweeps {label: record prefix} as lines, or say that none is stored yet."""
    from helpers import plots

    curves = {label: stored_curve(p, source) for label, p in prefixes.items()}
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        print(f"{title}: no stored {source} records under {', '.join(prefixes.values())} yet.")
        return None
    xs = sorted(set().union(*curves.values()))
    ys = {k: [v.get(x, float("nan")) for x in xs] for k, v in curves.items()}
    return plots.sweep(xs, ys, title=title, xlabel=xlabel, ylabel=ylabel, logx=logx,
                       device=stored_label(source), **kw)


def plot_stored_bars(prefix: str, title: str, ylabel: str, target: float | None = None,
                     source: str = "h200") -> Any:
    """Bar chart of every stored record under `prefix` (labels = name tails), or say none is stored."""
    from helpers import plots

    recs = lookup_all(prefix + ".", source)
    if not recs:
        print(f"{title}: no stored {source} records under {prefix} yet.")
        return None
    return plots.bar_ratios({r.name[len(prefix) + 1:]: r.value for r in recs}, title=title, ylabel=ylabel,
                            target=target, device=stored_label(source))
