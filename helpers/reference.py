"""Stored reference results (from a real GPU run, and from the CPU CI machine), shown beside yours.

Every stored display says where its numbers come from: device, date and the software they ran with
(``provenance(source)``), because the reference runs did not always use the pinned versions.

Serves: core — used by chapters 0–12 and labs 06, 08, 11–13.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers.errors import InputError
from helpers.metrics import HEADLINES, Metric
from helpers.records import Record, load_records, session_records
from helpers.tables import number

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DIR = ROOT / "reference"
CARDS = ("h200", "h100")  # the GPU reference runs, one folder per card; another card's folder present is read too


def _card_folders() -> tuple[str, ...]:
    """CARDS, then any other folder of reference/ holding a results.json (the CPU machine's aside)."""
    found = sorted(p.parent.name for p in REFERENCE_DIR.glob("*/results.json") if p.parent.name != "cpu")
    return tuple(dict.fromkeys((*CARDS, *found)))


SOURCES = (*_card_folders(), "cpu")
SOURCE_NAMES = {s: "stored CPU run" if s == "cpu" else f"stored {s.upper()} run" for s in SOURCES}
# How the software of a record is named in provenance lines, in this order.
SOFTWARE = (("torch", "torch"), ("cuda", "CUDA"), ("driver", "driver"), ("onnxruntime", "ONNX Runtime"),
            ("numba", "numba"), ("cupy", "cupy"), ("numpy", "numpy"), ("tensorrt", "TensorRT"),
            ("python", "Python"))
PIN_FILES = ("requirements.txt", "requirements-gpu.txt")
PIN_NAMES = {"onnxruntime": "onnxruntime", "cupy": "cupy-cuda12x", "tensorrt": "tensorrt-cu12"}


Target = Metric  # a headline measurement's goal (helpers.metrics declares the course's list)
TARGETS: tuple[Metric, ...] = HEADLINES
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


def stored_cards() -> list[str]:
    """The card folders that hold a stored GPU run, in SOURCES order."""
    return [s for s in SOURCES if s != "cpu" and load(s)]


def nearest_card(device: str | None = None, cards: Sequence[str] | None = None) -> str | None:
    """The stored GPU run nearest to `device` (this machine's by default): the same card first, else the newest
    stored GPU run (by its latest date), among `cards` (default: every stored card); None when there is none."""
    if device is None:
        from helpers.device import device_label

        device = device_label()
    cards = stored_cards() if cards is None else list(cards)
    same = [c for c in cards if c.upper() in device.upper()]
    if same:
        return same[0]
    return max(cards, key=lambda c: max(r.date for r in load(c)), default=None)


def nearest_holding(prefix: str) -> tuple[str | None, list[Record]]:
    """(card, its records named `prefix`...) of the stored GPU run nearest to this machine among those that hold
    such records ((None, []) when none does): a lab's "reference run" shown from the card its sentences read
    (``helpers.findings`` reads the nearest stored run first)."""
    cards = [c for c in stored_cards() if any(r.name.startswith(prefix) for r in load(c))]
    card = nearest_card(cards=cards) if cards else None
    return card, (lookup_all(prefix, card) if card else [])


def card_note(card: str, device: str | None = None) -> str:
    """Why `card` is the stored run shown: 'the same card as yours', or 'the newest stored GPU run that holds these
    rows' (on a GPU with no stored run of its own, naming it)."""
    if device is None:
        from helpers.device import device_label

        device = device_label()
    if card.upper() in device.upper():
        return f"the same card as yours ({device})"
    newest = "the newest stored GPU run that holds these rows"
    return newest if device.startswith("CPU") else f"{newest}; none is stored for your {device}"


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
        stored = {src: lookup(n, src) for src in SOURCES if src == "h200" or load(src)}
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
