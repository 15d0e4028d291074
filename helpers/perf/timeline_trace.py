"""A trace's events: kinds from kernel names, gaps from intervals, the compact stored form, Chrome traces read.

``classify(name)`` names an event's kind from ``HINTS`` (regular expressions, matched in order against the full
kernel, copy or op name; first match wins; a chapter puts its own first with ``add_hint``). A gap is time on the
busiest stream, between the trace's first and last event, that none of that stream's events covers: computed from
the intervals (``idle``), never estimated. ``Trace.to_json`` is the compact stored form, at most ``MAX_BYTES``:
when a trace is larger, same-kind neighbours are merged and then the shortest events left out (``cap``), and
its notes say so; its totals stay the full trace's. ``from_chrome`` reads torch.profiler's Chrome trace.
``helpers.perf.timeline`` records, draws, saves and loads traces.

Serves: core — used by chapters 1, 3, 4, 9, 10, 12.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers import plots
from helpers.errors import InputError
from helpers.validation import require_choice

FORMAT = "workbook-timeline/1"
MAX_BYTES = 50_000  # the compact JSON of one trace, so that it fits in a record's extra
KINDS = ("GEMM", "convolution", "attention", "norm", "quantize", "elementwise", "copy", "other")
COLOURS = {"GEMM": plots.PALETTE[0], "convolution": plots.PALETTE[5], "attention": plots.PALETTE[4],
           "norm": plots.PALETTE[2], "quantize": plots.PALETTE[3], "elementwise": plots.PALETTE[1],
           "copy": plots.PALETTE[6], "other": "0.6"}
GAP_COLOUR = "0.88"
# (kind, pattern): matched case-insensitively against the full event name, in this order; first match wins.
HINTS: list[tuple[str, str]] = [
    ("copy", r"^memcpy|^memset|^copy_|direct_copy_kernel|^aten::(copy_|to|_to_copy)$"),
    ("attention", r"flash|fmha|attention|sdpa|\battn|_attn|mha_"),
    ("norm", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|cudnn::bn_|\bbn_fw|_norm_kernel"),
    ("quantize", r"quant|amax"),
    ("elementwise", r"^triton_(poi|per|red)_"),  # inductor's fused pointwise, persistent and reduction kernels
    ("convolution", r"conv|fprop|dgrad|wgrad|implicit_gemm|winograd"),
    ("GEMM", r"gemm|gemv|nvjet|xmma|cutlass|cublas|matmul|triton_(tem|mm)|_mm_kernel|linear|dp4a|wmma"
             r"|^aten::(mm|addmm|bmm|baddbmm|_int_mm|_scaled_mm)$"),
    ("elementwise", r"elementwise|reduce_kernel|softmax|^aten::(add|mul|sub|div|gelu|relu|silu|tanh|_?softmax"
                    r"|where|clamp|round)_?$"),
]
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def add_hint(kind: str, pattern: str) -> None:
    """Classify names matching `pattern` (a regular expression) as `kind`, before every existing hint."""
    require_choice(kind, KINDS, "kind")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise InputError(f"hint pattern {pattern!r} is not a regular expression ({exc}); fix the pattern.") from None
    if (kind, pattern) not in HINTS:
        HINTS.insert(0, (kind, pattern))


def classify(name: str, hints: Sequence[tuple[str, str]] | None = None) -> str:
    """The kind of a GPU kernel, copy or CPU op from its name ('other' when no hint matches)."""
    name = re.sub(r"^void\s+", "", name.strip())  # a C++ kernel's return type
    for kind, pattern in HINTS if hints is None else hints:
        if re.search(pattern, name, re.I):
            return kind
    return "other"


def short_name(name: str, limit: int = 60) -> str:
    """A readable name: no return type, namespaces, template arguments or parameters (the functor kept)."""
    s = re.sub(r"^void\s+|\(anonymous namespace\)::", "", " ".join(name.split()))
    if s.lower().startswith(("memcpy", "memset")):
        return s.split(" (")[0]
    if len(s) > limit or "(" in s or "<" in s:
        head = re.match(r"[^<(]*", s).group(0).strip()  # type: ignore[union-attr]
        base = head.split("::")[-1] or s
        arg = re.match(r"<\s*([\w:]+)", s[len(head):])
        if base.lower() in ("kernel", "kernel2", "device_kernel") and arg:  # CUTLASS: the name is the argument
            base = arg.group(1).split("::")[-1]
        inner = re.search(r"(\w*(?:Functor|functor|_kernel_cuda)\w*)", s[len(head):])
        s = f"{base}<{inner.group(1)}>" if inner else base
    return s if len(s) <= limit else s[: limit - 1] + "…"


@dataclass(frozen=True)
class Event:
    """One box on the timeline: microseconds from the trace's start; `count` > 1 for merged neighbours."""

    start_us: float
    dur_us: float
    stream: str
    kind: str
    name: str
    count: int = 1

    @property
    def end_us(self) -> float:
        """When it ended."""
        return self.start_us + self.dur_us


@dataclass(frozen=True)
class Range:
    """A record_function range (its name, start and duration in microseconds from the trace's start)."""

    start_us: float
    dur_us: float
    name: str

    @property
    def end_us(self) -> float:
        """When it ended."""
        return self.start_us + self.dur_us


def _union(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, overlapping or touching (start, end) intervals merged."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def idle(intervals: Sequence[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of [lo, hi] that no interval covers."""
    out, at = [], lo
    for a, b in _union(intervals):
        if a > at:
            out.append((at, min(a, hi)))
        at = max(at, b)
    if at < hi:
        out.append((at, hi))
    return [(a, b) for a, b in out if b > a]


def _totals(events: Sequence[Event]) -> dict[str, Any]:
    """Span, busiest stream, its gaps and the summed time per kind, in microseconds."""
    if not events:
        return {"span_us": 0.0, "busiest_stream": "", "gap_us": 0.0, "gaps": 0, "kind_us": {}, "events": 0}
    lo, hi = min(e.start_us for e in events), max(e.end_us for e in events)
    per: dict[str, list[tuple[float, float]]] = {}
    kind_us: dict[str, float] = {}
    for e in events:
        per.setdefault(e.stream, []).append((e.start_us, e.end_us))
        kind_us[e.kind] = kind_us.get(e.kind, 0.0) + e.dur_us
    busiest = max(per, key=lambda s: (sum(b - a for a, b in _union(per[s])), s))
    gaps = idle(per[busiest], lo, hi)
    return {"span_us": round(hi - lo, 3), "busiest_stream": busiest, "gap_us": round(sum(b - a for a, b in gaps), 3),
            "gaps": len(gaps), "kind_us": {k: round(v, 3) for k, v in kind_us.items()},
            "events": sum(e.count for e in events)}


@dataclass(frozen=True)
class Trace:
    """What one call did, event by event; `totals` are those of the full trace (kept when events are merged)."""

    label: str
    events: tuple[Event, ...]
    ranges: tuple[Range, ...] = ()
    device: str = ""
    date: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    on_gpu: bool = True
    notes: tuple[str, ...] = ()
    stored: str = ""  # 'stored trace' when read back from the reference results
    totals: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Events and ranges as tuples, each with a finite start and a duration >= 0; totals computed."""
        object.__setattr__(self, "events", tuple(self.events))
        object.__setattr__(self, "ranges", tuple(self.ranges))
        odd = [x for x in (*self.events, *self.ranges) if not isinstance(x, (Event, Range))]
        if odd:
            raise InputError(f"trace {self.label!r} holds a {type(odd[0]).__name__}; events are timeline.Event and "
                             "ranges timeline.Range objects (timeline.record makes them).")
        bad = [e for e in self.events if not (abs(e.start_us) < float("inf") and 0 <= e.dur_us < float("inf"))]
        if bad:
            raise InputError(f"trace {self.label!r}: event {bad[0].name!r} has start {bad[0].start_us} and duration "
                             f"{bad[0].dur_us}; each needs a finite start and a duration >= 0 microseconds.")
        if not self.totals:
            object.__setattr__(self, "totals", _totals(self.events))

    def streams(self) -> list[str]:
        """Streams, busiest first."""
        busy: dict[str, float] = {}
        for e in self.events:
            busy[e.stream] = busy.get(e.stream, 0.0) + e.dur_us
        return sorted(busy, key=lambda s: (-busy[s], s))

    def gaps(self, stream: str | None = None) -> list[tuple[float, float]]:
        """Idle intervals of `stream` (default: the busiest) between the trace's first and last event (of the boxes
        held: a trace read back from a capped stored form has merged some, so use its totals for sums)."""
        if not self.events:
            return []
        stream = stream or self.totals["busiest_stream"]
        return idle([(e.start_us, e.end_us) for e in self.events if e.stream == stream],
                    min(e.start_us for e in self.events), max(e.end_us for e in self.events))

    def ms_by_kind(self) -> dict[str, float]:
        """GPU (or CPU) milliseconds per kind, summed over streams, in KINDS order, then 'gaps'."""
        kind_us = self.totals["kind_us"]
        out = {k: kind_us[k] / 1e3 for k in KINDS if kind_us.get(k)}
        return {**out, "gaps": self.totals["gap_us"] / 1e3}

    def to_json(self, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
        """The compact form (column lists; names, streams and kinds as indices), at most `max_bytes` of JSON."""
        events, ranges, notes = list(self.events), list(self.ranges), list(self.notes)
        limit = len(events) + len(ranges)
        while True:
            data = _columns(self, events, ranges, notes)
            size = len(json.dumps(data, separators=(",", ":")))
            if size <= max_bytes or limit <= 1:
                return data
            limit = max(1, min(limit - 1, int(limit * max_bytes / size * 0.9)))
            events, note = cap(self.events, limit)
            ranges = sorted(sorted(self.ranges, key=lambda r: -r.dur_us)[: max(1, limit // 20)],
                            key=lambda r: r.start_us)
            gone = len(self.ranges) - len(ranges)
            notes = [*self.notes, note] + ([f"the {gone} shortest ranges left out"] if gone else [])
            notes = [n for n in notes if n]

    @classmethod
    def from_json(cls, data: Mapping[str, Any], stored: str = "") -> Trace:
        """Read back what to_json wrote."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise InputError(f"not a stored timeline (no format {FORMAT!r}); pass what Trace.to_json() returned.")
        try:
            ev, rg, names = data["events"], data.get("ranges", {}), data["names"]
            counts = ev.get("count") or [1] * len(ev["start_us"])
            events = [Event(s, d, data["streams"][st], data["kinds"][k], names[n], c)
                      for s, d, st, k, n, c in zip(ev["start_us"], ev["dur_us"], ev["stream"], ev["kind"],
                                                   ev["name"], counts)]
            ranges = [Range(s, d, names[n]) for s, d, n in zip(rg.get("start_us", []), rg.get("dur_us", []),
                                                              rg.get("name", []))]
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise InputError(f"the stored timeline {data.get('label', '')!r} is damaged ({type(exc).__name__}: "
                             f"{exc}); store it again from a GPU run, or restore it from git.") from None
        return cls(data.get("label", ""), tuple(events), tuple(ranges), data.get("device", ""), data.get("date", ""),
                   dict(data.get("versions", {})), bool(data.get("on_gpu", True)), tuple(data.get("notes", ())),
                   stored, dict(data.get("totals", {})))


def _columns(trace: Trace, events: Sequence[Event], ranges: Sequence[Range], notes: Sequence[str]) -> dict[str, Any]:
    """The compact JSON of `trace` holding `events` and `ranges`."""
    names: dict[str, int] = {}
    streams = sorted({e.stream for e in events})
    kinds = [k for k in KINDS if any(e.kind == k for e in events)]
    col = {"start_us": [round(e.start_us, 3) for e in events], "dur_us": [round(e.dur_us, 3) for e in events],
           "stream": [streams.index(e.stream) for e in events], "kind": [kinds.index(e.kind) for e in events],
           "name": [names.setdefault(e.name, len(names)) for e in events]}
    if any(e.count > 1 for e in events):
        col["count"] = [e.count for e in events]
    rg = {"start_us": [round(r.start_us, 3) for r in ranges], "dur_us": [round(r.dur_us, 3) for r in ranges],
          "name": [names.setdefault(r.name, len(names)) for r in ranges]}
    totals = dict(trace.totals)
    return {"format": FORMAT, "label": trace.label, "device": trace.device, "date": trace.date,
            "versions": dict(trace.versions), "on_gpu": trace.on_gpu, "notes": list(notes), "totals": totals,
            "streams": streams, "kinds": kinds, "names": list(names), "events": col, "ranges": rg}


def cap(events: Sequence[Event], max_events: int) -> tuple[list[Event], str]:
    """At most `max_events` boxes: same-kind neighbours on a stream merged across ever longer gaps (up to 1/500 of
    the span), then the shortest dropped; returns them and a note saying what was done ('' when nothing was)."""
    events = sorted(events, key=lambda e: (e.stream, e.start_us))
    if len(events) <= max_events:
        return list(events), ""
    span = max(e.end_us for e in events) - min(e.start_us for e in events)
    tol, merged = 0.5, events
    while len(merged) > max_events and tol <= max(span / 500, 0.5):
        merged = []
        for e in events:
            last = merged[-1] if merged else None
            if last and last.stream == e.stream and last.kind == e.kind and e.start_us - last.end_us <= tol:
                end = max(last.end_us, e.end_us)
                merged[-1] = Event(last.start_us, round(end - last.start_us, 3), last.stream, last.kind, last.name,
                                   last.count + e.count)
            else:
                merged.append(e)
        tol *= 2
    note = (f"{len(events)} events drawn as {len(merged)} boxes: same-kind neighbours less than {tol / 2:g} us "
            "apart on one stream merged")
    if len(merged) > max_events:
        kept = sorted(sorted(merged, key=lambda e: -e.dur_us)[:max_events], key=lambda e: (e.stream, e.start_us))
        gone = sum(e.dur_us for e in merged) - sum(e.dur_us for e in kept)
        note += f"; the {len(merged) - len(kept)} shortest ({gone:.1f} us in all) left out"
        merged = kept
    return merged, note + " (the totals and the parts bar are the full trace's)"


# ---- recording --------------------------------------------------------------------------------------------

def _top_level(ops: list[dict]) -> list[dict]:
    """CPU ops not inside another op of the same thread."""
    out: list[dict] = []
    for e in sorted(ops, key=lambda e: (e["ts"], -e.get("dur", 0))):
        if not out or e["ts"] >= out[-1]["ts"] + out[-1].get("dur", 0):
            out.append(e)
    return out


def from_chrome(data: Mapping[str, Any], label: str = "", *, device: str = "",
                versions: Mapping[str, str] | None = None, hints: Sequence[tuple[str, str]] | None = None) -> Trace:
    """A Trace from torch.profiler's Chrome trace (its traceEvents): GPU kernels, copies and memsets by stream,
    or, when there are none, the top-level CPU ops of the busiest thread; GPU-side ranges when on the GPU."""
    evs = [e for e in data.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    gpu = [e for e in evs if e.get("cat") in _GPU_CATS]
    notes = []
    if gpu:
        picked = [(e, str(e.get("args", {}).get("stream", e.get("tid")))) for e in gpu]
        ranges = [e for e in evs if e.get("cat") == "gpu_user_annotation"]
    else:
        ops = [e for e in evs if e.get("cat") == "cpu_op"]
        threads: dict[Any, list[dict]] = {}
        for e in ops:
            threads.setdefault(e.get("tid"), []).append(e)
        main = max(threads, key=lambda t: sum(e.get("dur", 0) for e in threads[t]), default=None)
        picked = [(e, "CPU") for e in _top_level(threads.get(main, []))]
        ranges = [e for e in evs if e.get("cat") == "user_annotation"]
        notes.append("no GPU activity: the top-level CPU ops of the busiest thread are shown")
    t0 = min((e["ts"] for e in [*(e for e, _ in picked), *ranges]), default=0.0)
    events = [Event(round(e["ts"] - t0, 3), round(float(e.get("dur", 0.0)), 3), s, classify(e["name"], hints),
                    short_name(e["name"])) for e, s in picked]
    rows = [Range(round(e["ts"] - t0, 3), round(float(e.get("dur", 0.0)), 3), short_name(e["name"])) for e in ranges]
    return Trace(label, tuple(sorted(events, key=lambda e: e.start_us)), tuple(rows), device,
                 _dt.date.today().isoformat(), dict(versions or {}), bool(gpu), tuple(notes))


