"""Timelines: what the GPU did during one call, and when (kernels by kind, copies, gaps), drawn and stored.

``record(fn, label=...)`` profiles one call with torch.profiler (after a warm-up call) and returns a ``Trace``:
every kernel, memcpy and memset with its stream, start and duration, plus the ``record_function`` ranges
(torch.profiler records those; ``torch.cuda.nvtx`` ranges show only in Nsight Systems). Without a GPU (or when
the call ran no GPU work) it keeps the top-level CPU ops of the busiest thread instead. ``classify`` names each
event's kind from ``HINTS`` (regular expressions, first match wins; a chapter adds its own with ``add_hint``).
A gap is time on the busiest stream, between the trace's first and last event, that none of that stream's
events covers: computed from the intervals, never estimated.

``draw(traces)``: one row per (trace, stream), boxes coloured by kind. ``parts(traces)``: GPU ms per kind
plus gaps, one stacked bar per trace, with the wall span marked (a bar longer than it means streams overlapped).
``save(trace, path)`` writes Chrome trace-event JSON (open it at ui.perfetto.dev) through the output contract;
``Trace.to_json()`` is the compact stored form (at most ``MAX_BYTES``: short same-kind neighbours are merged, then
the shortest events dropped, and its notes say so; totals are those of the full trace). ``store(trace, name)``
records it for the reference run; ``load(name, source)`` reads it back for the no-GPU path. Inside an
Experiment's measure, ``record_named({label: fn}, prefix)`` records and stores a few named calls; a notebook cell
draws them with ``shown(result, prefix, labels, title=…, name=…)``: this session's on a GPU, else the stored run's.

    from helpers.perf import timeline
    names = {"FP16": "ch09.timeline.fp16", "8-bit": "ch09.timeline.int8"}
    if GPU:
        traces = [timeline.record(lambda: fp16_model(**batch), label="FP16"),
                  timeline.record(lambda: int8_model(**batch), label="8-bit")]
        for t in traces:
            timeline.store(t, names[t.label])
    else:
        traces = [timeline.load(n) for n in names.values()]   # the stored run, labelled; None if not stored
    timeline.draw(traces)                     # streams × time, boxes by kind
    timeline.parts(traces)                    # ms per kind, gaps, the wall span
    timeline.save(traces[0], Path.home() / "fp16_trace.json")   # then open it at ui.perfetto.dev
                                              # (never into the course's folders: the output contract refuses)

Serves: core — used by chapters 1, 3, 4, 9, 10, 12.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from helpers import cli, plots, reference
from helpers.errors import InputError, require_package
from helpers.perf.timeline_trace import (  # noqa: F401 - re-exported: the timeline's whole API is here
    COLOURS,
    GAP_COLOUR,
    HINTS,
    KINDS,
    MAX_BYTES,
    Event,
    Range,
    Trace,
    add_hint,
    cap,
    classify,
    from_chrome,
    idle,
    short_name,
)
from helpers.validation import require_callable

COMMAND = "helpers.perf.timeline"
STORED = "stored trace"


@contextlib.contextmanager
def _profiler_quiet() -> Iterator[None]:
    """The C++ profiler's 'USDT: profiler_start/stop' lines (on file descriptor 2) go nowhere for a block."""
    with contextlib.ExitStack() as stack:
        try:
            saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
        except OSError:  # no file descriptor 2: nothing to silence
            yield
            return
        stack.callback(os.close, null)
        stack.callback(os.close, saved)
        stack.callback(os.dup2, saved, 2)
        os.dup2(null, 2)
        yield


def record(fn: Callable[[], Any], *, label: str = "", warmup: int = 1,
           hints: Sequence[tuple[str, str]] | None = None) -> Trace:
    """Profile one call of `fn` (after `warmup` calls) and return its Trace (GPU events, or CPU ops without a GPU)."""
    require_callable(fn, "fn", "lambda: model(x)")
    if not isinstance(warmup, int) or warmup < 0:
        raise InputError(f"warmup must be a whole number >= 0, got {warmup!r}.")
    torch = require_package("torch", "pip install torch", "timelines are recorded with torch.profiler")
    from torch.profiler import ProfilerActivity, profile

    from helpers.device import device_label
    from helpers.environment import versions

    gpu = torch.cuda.is_available()
    for _ in range(warmup):
        fn()
    if gpu:
        torch.cuda.synchronize()
    with _profiler_quiet(), profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * gpu) as prof:
        fn()
        if gpu:
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        data = json.loads(path.read_text(encoding="utf-8"))
    return from_chrome(data, label, device=device_label(), versions=versions(), hints=hints)


# ---- drawing ----------------------------------------------------------------------------------------------

def _traces(traces: Trace | Sequence[Trace | None] | None) -> list[Trace]:
    """The traces to draw: one or several; None entries (a stored trace not there yet) left out, saying so when
    none is left."""
    items = [traces] if isinstance(traces, Trace) else list(traces or [])
    bad = [t for t in items if t is not None and not isinstance(t, Trace)]
    if bad:
        raise InputError(f"expected Trace objects (from timeline.record or timeline.load), got "
                         f"{type(bad[0]).__name__}; pass e.g. [record(lambda: model(x), label='fp16')].")
    items = [t for t in items if t is not None]
    if not items:
        print("No trace to draw (none recorded here, and none stored yet).")
    return items


def provenance(trace: Trace) -> str:
    """The figure footer of one trace: its device and, when stored, the date and the software it ran with."""
    text = trace.device or "unknown device"
    if trace.stored:
        sw = ", ".join(f"{n} {trace.versions[k]}" for k, n in (("torch", "torch"), ("cuda", "CUDA"))
                       if k in trace.versions)
        text += f" · {trace.stored}, {trace.date or 'date not recorded'}" + (f" · {sw}" if sw else "")
    if any("merged" in n for n in trace.notes):
        text += " · short events merged for storage"
    return text


def _finish(fig: plt.Figure, ax: plt.Axes, traces: list[Trace], name: str, note: str) -> plt.Figure:
    """Legend beside the axes (kinds in KINDS order), each distinct footer, tight layout, saved."""
    pairs = sorted(zip(*ax.get_legend_handles_labels()), key=lambda p: KINDS.index(p[1]) if p[1] in KINDS else 99)
    ax.legend(*zip(*pairs), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    for text in dict.fromkeys(provenance(t) for t in traces):
        plots.label_device(ax, text, note)
    fig.tight_layout()
    plots.save_figure(fig, name)
    return fig


def _unit(traces: list[Trace]) -> tuple[str, float]:
    """Milliseconds when the longest trace spans over 2 ms, else microseconds; (unit, microseconds per unit)."""
    return ("ms", 1e3) if max(t.totals["span_us"] for t in traces) > 2000 else ("us", 1.0)


def _what(traces: list[Trace]) -> str:
    """'GPU' when every trace holds GPU events, else 'CPU' or 'GPU/CPU'."""
    kinds = {t.on_gpu for t in traces}
    return "GPU" if kinds == {True} else "CPU" if kinds == {False} else "GPU/CPU"


def draw(traces: Trace | Sequence[Trace | None], *, title: str | None = None, name: str | None = None,
         note: str = "") -> plt.Figure | None:
    """A timeline: one row per (trace, stream), and one for its ranges, boxes coloured by kind; each trace from 0."""
    items = _traces(traces)
    if not items:
        return None
    unit, per = _unit(items)
    rows: list[tuple[str, Trace, str | None]] = []
    for t in items:
        rows += [(f"{t.label} · {'stream ' + s if t.on_gpu else s}", t, s) for s in t.streams()]
        rows += [(f"{t.label} · ranges", t, None)] if t.ranges else []
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.42 * len(rows)))
    ends = [e.end_us for t in items for e in t.events] + [r.end_us for t in items for r in t.ranges]
    xmax = max(ends, default=1.0) / per
    labelled: set[str] = set()
    for y, (_, t, stream) in zip(range(len(rows) - 1, -1, -1), rows):
        if stream is None:
            _draw_ranges(ax, t, y, per, xmax)
            continue
        for kind in KINDS:
            boxes = [(e.start_us / per, e.dur_us / per) for e in t.events if e.stream == stream and e.kind == kind]
            if boxes:
                ax.broken_barh(boxes, (y - 0.4, 0.8), facecolors=COLOURS[kind], edgecolor=COLOURS[kind],
                               linewidth=0.3, label="_" if kind in labelled else kind)  # a 1 us kernel stays visible
                labelled.add(kind)
    ax.set_yticks(range(len(rows) - 1, -1, -1), [r[0] for r in rows], fontsize=8)
    ax.set(xlim=(0, xmax * 1.01), ylim=(-0.6, len(rows) - 0.4), xlabel=f"time from the start of the trace ({unit})",
           ylabel="row (trace · stream)", title=title or f"What the {_what(items)} did during one call")
    ax.grid(axis="y", visible=False)
    return _finish(fig, ax, items, name or ax.get_title(), note)


def _draw_ranges(ax: plt.Axes, trace: Trace, y: int, per: float, xmax: float) -> None:
    """A trace's outermost ranges as outlined grey boxes, each named when its name fits inside it."""
    outer: list[Range] = []
    for r in sorted(trace.ranges, key=lambda r: (r.start_us, -r.dur_us)):
        if not outer or r.start_us >= outer[-1].start_us + outer[-1].dur_us:
            outer.append(r)
    ax.broken_barh([(r.start_us / per, r.dur_us / per) for r in outer], (y - 0.3, 0.6), facecolors="0.93",
                   edgecolor="0.35", linewidth=0.8)
    width_px = 620  # about the axes' width in pixels at the figure's size
    for r in outer:
        if r.dur_us / per / (xmax or 1) * width_px > 5.2 * len(r.name) + 8:
            ax.text((r.start_us + r.dur_us / 2) / per, y, r.name, ha="center", va="center", fontsize=7,
                    color="0.2", clip_on=True)


def parts(traces: Trace | Sequence[Trace | None], *, title: str | None = None, name: str | None = None,
          note: str = "") -> plt.Figure | None:
    """Per trace, one stacked bar: time per kind (summed over streams), then the gaps; the wall span marked."""
    items = _traces(traces)
    if not items:
        return None
    unit, per = _unit(items)
    split = [{k: v * 1e3 / per for k, v in t.ms_by_kind().items()} for t in items]
    kinds = [k for k in KINDS if any(s.get(k) for s in split)] + ["gaps"]
    # tall enough for the legend beside it (one line per kind, gaps and the wall span), which must not reach the x label
    fig, ax = plt.subplots(figsize=(8, max(1.6 + 0.5 * len(items), 1.5 + 0.2 * (len(kinds) + 1))))
    ys = list(range(len(items) - 1, -1, -1))
    left = [0.0] * len(items)
    for k in kinds:
        widths = [s.get(k, 0.0) for s in split]
        gap = k == "gaps"
        ax.barh(ys, widths, left=left, height=0.6, color=GAP_COLOUR if gap else COLOURS[k], hatch="//" if gap else None,
                edgecolor="0.45" if gap else "white", linewidth=0.5, label="gaps (busiest stream idle)" if gap else k)
        left = [a + w for a, w in zip(left, widths)]
    for i, (y, t) in enumerate(zip(ys, items)):
        ax.plot([t.totals["span_us"] / per] * 2, [y - 0.4, y + 0.4], color="black", lw=1.5,
                label="wall span (first to last event)" if i == 0 else "_")
    ax.set_yticks(ys, [t.label for t in items])
    what = _what(items)
    ax.set(xlabel=f"{what} time of one call ({unit}): kinds summed over streams, then gaps", xlim=(0, None),
           ylabel="trace (one call each)", title=title or f"Where the {what} time of one call goes")
    ax.grid(axis="y", visible=False)
    return _finish(fig, ax, items, name or ax.get_title(), note)


# ---- saving, storing, loading --------------------------------------------------------------------------

def chrome(trace: Trace) -> dict[str, Any]:
    """The trace as Chrome trace-event JSON (ui.perfetto.dev and chrome://tracing open it): one thread per stream."""
    streams = trace.streams()
    meta = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": f"{trace.label} ({trace.device})"}}]
    meta += [{"ph": "M", "name": "thread_name", "pid": 0, "tid": i,
              "args": {"name": f"stream {s}" if trace.on_gpu else s}} for i, s in enumerate(streams)]
    boxes = [{"ph": "X", "name": e.name, "cat": e.kind, "pid": 0, "tid": streams.index(e.stream),
              "ts": round(e.start_us, 3), "dur": round(e.dur_us, 3), "args": {"kind": e.kind, "events": e.count}}
             for e in trace.events]
    if trace.ranges:
        meta.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": len(streams), "args": {"name": "ranges"}})
        boxes += [{"ph": "X", "name": r.name, "cat": "range", "pid": 0, "tid": len(streams),
                   "ts": round(r.start_us, 3), "dur": round(r.dur_us, 3)} for r in trace.ranges]
    return {"traceEvents": meta + boxes, "displayTimeUnit": "ms",
            "otherData": {"label": trace.label, "device": trace.device, "date": trace.date,
                          "versions": dict(trace.versions), "notes": list(trace.notes),
                          "totals_us": dict(trace.totals)}}


def save(trace: Trace, path: str | os.PathLike, *, force: bool = False) -> Path:
    """Write `trace` as Chrome trace-event JSON to `path` (a .json file that is new or this function's own)."""
    if not isinstance(trace, Trace):
        raise InputError(f"save needs a Trace (from timeline.record or timeline.load), got {type(trace).__name__}.")
    path = Path(path)
    if path.suffix != ".json":
        raise InputError(f"{path} does not end in .json; Perfetto and chrome://tracing read .json trace files. "
                         "Pass a name such as timeline.json.")
    with cli.replacing(path, COMMAND, force=force, force_flag="force=True",
                       instead="a new file name such as timeline.json") as tmp:
        tmp.write_text(json.dumps(chrome(trace), separators=(",", ":")), encoding="utf-8")
    return path


def _check_name(name: str) -> str:
    """A stored trace's name, spelled like every measurement's (so the name checks find it): 'ch09.timeline.fp16'."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", name):
        raise InputError(f"a stored trace's name is dot-separated lower-case words, digits and '_', like every "
                         f"measurement's, got {name!r}; pass e.g. 'ch09.timeline.fp16'.")
    return name


def store(trace: Trace, name: str) -> Any:
    """Record `trace` as the measurement `name` (its value the span in ms; the compact trace its extra 'timeline'),
    so that the reference run stores it in reference/<card>/results.json; return the record."""
    from helpers.records import record as record_value

    if not isinstance(trace, Trace):
        raise InputError(f"store needs a Trace (from timeline.record), got {type(trace).__name__}.")
    return record_value(_check_name(name), trace.totals["span_us"] / 1e3, "ms", timeline=trace.to_json())


def load(name: str, source: str | None = None) -> Trace | None:
    """The stored trace `name` (the record `name`, else reference/<source>/traces/<name>.json) of the reference run
    `source` (default: the stored card nearest to this machine's that holds it), labelled with its device, date and
    software; None, said in one line, when none is stored yet."""
    _check_name(name)
    if source is not None:
        reference.results_path(source)  # an unknown source is refused here
        cards = [source]
    else:
        cards = [c for c in dict.fromkeys([reference.nearest_card(), *reference.SOURCES]) if c and c != "cpu"]
    for card in cards:
        trace = _stored(name, card)
        if trace is not None:
            return trace
    print(f"No stored trace named {name!r} in {' or '.join(cards)} yet: a GPU reference run stores it "
          "(timeline.store).")
    return None


def _stored(name: str, source: str) -> Trace | None:
    """The trace `name` stored for `source`, or None."""
    rec = reference.lookup(name, source)
    if rec is not None and not isinstance(rec.extra.get("timeline"), dict):
        raise InputError(f"the stored measurement {name!r} of {source} holds no trace; pass the name a "
                         "timeline.store(...) call recorded.")
    data = rec.extra["timeline"] if rec is not None else None
    path = reference.REFERENCE_DIR / source / "traces" / f"{name}.json"
    if data is None and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(f"{path} is not JSON ({exc}); restore it from git.") from None
    if data is None:
        return None
    if rec is not None:  # the record's stamp is the run's own
        data = {**data, "device": data.get("device") or rec.device, "date": data.get("date") or rec.date,
                "versions": data.get("versions") or rec.versions}
    return Trace.from_json(data, stored=STORED)


# ---- a chapter's named timelines: recorded and stored inside an Experiment's measure, shown from its Result -------

SESSION: dict[str, Trace] = {}  # stored name -> the Trace recorded in this session


def stored_name(prefix: str, label: str) -> str:
    """'<prefix>.<label in lower-case words>', e.g. ('ch10.timeline.overlap', 'copy || compute') -> '…copy_compute'."""
    return _check_name(prefix + "." + (re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "trace"))


def record_named(calls: Mapping[str, Callable[[], Any]], prefix: str) -> list[Trace]:
    """Record one call of each {label: fn}, store each under ``stored_name(prefix, label)`` and keep it for
    ``shown``; a call the profiler cannot trace is said in one line and skipped (the timings around it stand)."""
    out = []
    for label, fn in calls.items():
        try:
            t = record(fn, label=label)
        except Exception as exc:  # noqa: BLE001 - a timeline is an illustration: it never costs the measurements
            print(f"{label}: no timeline ({type(exc).__name__}: {exc})")
            continue
        store(t, stored_name(prefix, label))
        SESSION[stored_name(prefix, label)] = t
        out.append(t)
    return out


def shown(result: Any, prefix: str, labels: Sequence[str], *, title: str, name: str) -> list[Trace]:
    """Draw the timelines of `labels` for an Experiment's Result: recorded in this session when it measured, else
    the stored run's it shows (labelled); one line when neither holds them. Returns the traces drawn."""
    names = [stored_name(prefix, label) for label in labels]
    if result.measured:
        traces = [SESSION[n] for n in names if n in SESSION]
    else:
        held = {r.name for r in result.records}
        traces = [t for t in (load(n, result.source) for n in names if n in held) if t is not None]
    if not traces:
        print(f"No timeline of this in the run shown ({result.where()}): a GPU run of this chapter records one.")
        return []
    draw(traces, title=title, name=f"{name}_timeline")
    parts(traces, title=f"{title}: GPU time by kind", name=f"{name}_parts")
    return traces
