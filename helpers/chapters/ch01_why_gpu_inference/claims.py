"""The seeds' numeric claims about CPU vs GPU inference, checked against measurements.

Each claim names the measurements it needs; its verdict ('holds', "doesn't hold", 'depends
on ...', 'not measured') is computed from those numbers, never written down in advance.
Measurements come from this session first, then from the stored reference runs.

Serves: chapter 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from helpers.errors import InputError

HOLDS, FAILS, NOT_MEASURED = "holds", "doesn't hold", "not measured"


def in_range(value: float | None, lo: float, hi: float) -> str:
    """'holds' when lo <= value <= hi, "doesn't hold" outside, 'not measured' for None."""
    if lo > hi:
        raise InputError(f"range must have lo <= hi, got {lo}..{hi}.")
    if value is None:
        return NOT_MEASURED
    return HOLDS if lo <= value <= hi else FAILS


def combine(parts: Mapping[str, str]) -> str:
    """One verdict from named part-verdicts: all hold, none holds, or 'depends on <which>'."""
    known = {k: v for k, v in parts.items() if v != NOT_MEASURED}
    if not known:
        return NOT_MEASURED
    if all(v == HOLDS for v in known.values()):
        verdict = HOLDS
    elif all(v == FAILS for v in known.values()):
        verdict = FAILS
    else:
        verdict = "depends: holds for " + ", ".join(k for k, v in known.items() if v == HOLDS)
    if len(known) < len(parts):
        verdict += " (partly measured)"
    return verdict


Values = Mapping[str, float | None]


def _fmt(v: float | None, unit: str) -> str:
    """'12.3 ms' or '–'."""
    if v is None:
        return "–"
    return f"{v:,.0f} {unit}" if abs(v) >= 1000 else f"{v:.3g} {unit}"


def _bert(m: Values) -> tuple[str, str]:
    cpu, gpu = m.get("ch01.bert_base.cpu_ms.b1"), m.get("ch01.bert_base.gpu_ms.b1")
    verdict = combine({"the CPU side": in_range(cpu, 200, 300), "the GPU side": in_range(gpu, 5, 8)})
    return f"CPU {_fmt(cpu, 'ms')}, GPU (FP32 eager) {_fmt(gpu, 'ms')}", verdict


def _speedup(m: Values) -> tuple[str, str]:
    parts, shown = {}, []
    for key in sorted((k for k in m if k.startswith("ch01.speedup.")), key=lambda k: (k.split(".")[2], int(k.split(".b")[-1]))):
        model, batch = key.split(".")[2], key.split(".b")[-1]
        parts[f"{model} b{batch}"] = in_range(m[key], 10, 50)
        shown.append(f"{model} b{batch}: {_fmt(m[key], '×')}")
    return ("; ".join(shown) or "–"), combine(parts) if parts else NOT_MEASURED


def _tiny(m: Values) -> tuple[str, str]:
    cpu, gpu = m.get("ch01.tiny_mlp.cpu_ms.b1"), m.get("ch01.tiny_mlp.gpu_e2e_ms.b1")
    x = m.get("ch01.tiny_mlp.crossover_batch")
    if cpu is None or gpu is None:
        return f"CPU {_fmt(cpu, 'ms')}, GPU {_fmt(gpu, 'ms')}", NOT_MEASURED
    where = f"; GPU wins from batch {x:.0f}" if x else ""
    return f"CPU {cpu:.3g} ms, GPU incl. copies {gpu:.3g} ms{where}", HOLDS if gpu > cpu else FAILS


def _bandwidth(m: Values) -> tuple[str, str]:
    cpu, gpu = m.get("ch01.cpu_bandwidth_gbs"), m.get("ch01.gpu_bandwidth_gbs")
    verdict = combine({"the CPU": in_range(cpu, 50, 100), "the GPU": in_range(gpu, 900, 2000)})
    return f"CPU {_fmt(cpu, 'GB/s')}, GPU {_fmt(gpu, 'GB/s')}", verdict


@dataclass(frozen=True)
class Claim:
    """A numeric claim, how to judge it from measurements, and published context."""

    text: str
    judge: Callable[[Values], tuple[str, str]]
    anchor: str


CLAIMS: tuple[Claim, ...] = (
    Claim("BERT-base, batch 1: 200–300 ms on a Xeon vs 5–8 ms on an A100", _bert,
          "published anchor: TensorRT BERT-base seq 128 on A100, batch 1: 0.64 ms FP16, 0.55 ms INT8"),
    Claim("GPU inference is 10–50× faster than CPU", _speedup,
          "published anchor: MLPerf v4.1 H200 (TensorRT, per GPU): ResNet-50 94,620/s, BERT 9,164/s"),
    Claim("The GPU is slower for tiny models at batch 1", _tiny,
          "launch overhead (~5–10 µs a kernel) and PCIe copies (~10 µs) dwarf microseconds of math"),
    Claim("CPU memory 50–100 GB/s vs GPU 900–2000 GB/s", _bandwidth,
          "published anchor: H100 SXM 3.35 TB/s, H200 4.8 TB/s HBM; a server CPU socket 300–600 GB/s"),
)


def needed_names(batches: tuple[int, ...] = (1, 8)) -> list[str]:
    """The measurement names the claims read (speedups for the given batches)."""
    names = ["ch01.bert_base.cpu_ms.b1", "ch01.bert_base.gpu_ms.b1", "ch01.tiny_mlp.cpu_ms.b1",
             "ch01.tiny_mlp.gpu_e2e_ms.b1", "ch01.tiny_mlp.crossover_batch",
             "ch01.cpu_bandwidth_gbs", "ch01.gpu_bandwidth_gbs"]
    names += [f"ch01.speedup.{m}.b{b}" for m in ("bert_base", "resnet50") for b in batches]
    return names


def gather(names: list[str]) -> dict[str, float | None]:
    """Each name's value from this session's records, else the stored H200 run, else the stored CPU run."""
    from helpers import reference
    from helpers.bench import session_records

    mine = {r.name: r.value for r in session_records()}
    out: dict[str, float | None] = {}
    for n in names:
        if n in mine:
            out[n] = mine[n]
            continue
        ref = reference.lookup(n, "h200") or reference.lookup(n, "cpu")
        out[n] = ref.value if ref else None
    return out


def rows(measured: Values | None = None) -> list[dict]:
    """The claims table: claim, what was measured, verdict, published context."""
    m = gather(needed_names()) if measured is None else measured
    out = []
    for c in CLAIMS:
        what, verdict = c.judge(m)
        out.append({"claim": c.text, "measured": what, "verdict": verdict, "context": c.anchor})
    return out


def show(measured: Values | None = None) -> None:
    """Display the claims table."""
    from helpers.tables import show as show_table

    show_table(rows(measured), caption="The seeds' claims, judged by measurements (yours first, then stored).")
