"""Every printed conclusion of the course, judged against every stored run.

    python -m helpers.tools.audit          list what does not hold on every stored run (exit 1 if anything)

A conclusion printed from the record can still be wrong in ways one run cannot show. The auditor
rebuilds each one on every stored run (``reference/<card>/results.json``, the CPU run, and older runs
kept in ``reference/archive/<date>-<card>.json``) and reports, by rule:

- ``flip``: a verdict or direction differs between two runs while neither says "not resolved" (the
  claims tables, every ``findings`` sentence, and every reading a notebook prints from the record);
- ``spread``: a printed number lies outside its own record's spread;
- ``crossover``: a crossover or threshold is contradicted by a later point of its sweep (a scheme said to
  win "from M" loses, resolved, at a later M);
- ``bound``: a value whose rounds lie beyond its stated physical bound is printed as anything but a
  ``findings.DISTURBED`` measurement;
- ``roof``: a roofline's roof equals one of the points it bounds (a roof fitted to its points).

Each rule is a small function on plain data, so a planted case shows it failing (tests/tools/test_audit.py).

Serves: tooling — `make test` (tests/tools/test_audit.py) and chapters 1–12.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import io
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import bench, claims, cli, findings, reference
from helpers.errors import InputError
from helpers.spread import Spread, of_record

ROOT = reference.ROOT
PROG = "python -m helpers.tools.audit"
NOTEBOOK_DIRS = ("notebooks", "labs", "solutions")
PRINTERS = ("say", "sentence", "ratio_sentence", "against_target")  # the findings calls a notebook prints
UNDECIDED = (findings.NOT_RESOLVED, findings.DISTURBED, "not measured", "Not measured", "no stored", "not within",
             "nothing is concluded", "needs a GPU", "none stored", "stored yet", "holds no", "partly measured")
NUMBER = re.compile(r"[-+−]?\d[\d,]*(\.\d+)?(e[-+]?\d+)?")
NO_SPREAD = "no spread"  # the verdicts' note that a record stores none (e.g. chapter 10's NO_SPREAD)
TOLERANCE = 1e-6  # relative slack for a value on the edge of its own spread (float rounding)


@dataclass(frozen=True)
class Run:
    """One stored run: a label ('h200', 'cpu', 'archive/2026-11-30-h200') and its records."""

    label: str
    records: tuple[bench.Record, ...]


@dataclass(frozen=True)
class Problem:
    """One thing that does not hold: the rule broken, where it is printed, and what is wrong."""

    rule: str
    where: str
    text: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.where}: {self.text}"


def runs(root: Path = ROOT) -> list[Run]:
    """Every stored run: each card folder's results.json, then the kept older runs under reference/archive/."""
    ref = root / "reference"
    paths = sorted(ref.glob("*/results.json")) + sorted((ref / "archive").glob("*.json"))
    return [Run(str(p.relative_to(ref).with_suffix("")).removesuffix("/results"), tuple(bench.load_records(p)))
            for p in paths]


@contextlib.contextmanager
def as_run(run: Run) -> Iterator[None]:
    """Make every stored-record lookup (helpers.reference, helpers.findings) read `run` alone, with no session."""
    from helpers import records

    saved = reference.load, bench.session_records, reference.session_records, records.session_records
    reference.load = lambda source="h200": run.records  # type: ignore[assignment]
    bench.session_records = reference.session_records = records.session_records = lambda: []
    try:
        yield
    finally:
        reference.load, bench.session_records, reference.session_records, records.session_records = saved


# ---- the rules, on plain data ------------------------------------------------------------------------------

def decided(text: str) -> bool:
    """False when a verdict says it cannot decide (not resolved, disturbed, not measured)."""
    return not any(word in text for word in UNDECIDED)


def shape(text: str) -> str:
    """A verdict's first clause with its numbers masked, without "by the numbers" and "no spread stored": two
    runs that conclude the same direction give the same shape, whatever the numbers and the reasons after it."""
    text = NUMBER.sub("#", text.split(" (stored reference")[0].split(" (measured here")[0])
    text = text.removeprefix("by the numbers ").split("; " + NO_SPREAD)[0]
    return re.split(r"[:(;]|\. ", text)[0].strip()


def flips(where: str, verdicts: Mapping[str, str]) -> list[Problem]:
    """Rule 'flip': the runs (label -> verdict) that decided disagree with each other."""
    known = {label: v for label, v in verdicts.items() if decided(v)}
    shapes = {shape(v) for v in known.values()}
    if len(shapes) < 2:
        return []
    said = "; ".join(f"{label}: {v!r}" for label, v in known.items())
    return [Problem("flip", where, f"the verdict differs between runs, none saying not resolved ({said})")]


def outside_spread(records: Iterable[bench.Record]) -> list[Problem]:
    """Rule 'spread': a record whose value lies outside its own stored spread."""
    out = []
    for r in records:
        s = of_record(r)
        if s is None:
            continue
        slack = TOLERANCE * max(abs(s.lo), abs(s.hi), 1e-12)
        if not s.lo - slack <= r.value <= s.hi + slack:
            out.append(Problem("spread", r.name, f"{r.value:.4g} lies outside its spread {s}"))
    return out


Point = tuple[float, Spread | None]  # a time (lower is better) and its spread


def _beats(a: Point, b: Point) -> bool:
    """True when time a is lower than time b beyond both spreads (a resolved win)."""
    (va, sa), (vb, sb) = a, b
    if sa is not None and sb is not None:
        return sa.hi < sb.lo
    return va < vb


def later_contradictions(where: str, sweep: Mapping[float, Mapping[str, Point]], winners: Sequence[str],
                         losers: Sequence[str], start: float) -> list[Problem]:
    """Rule 'crossover': "`winners` beat `losers` from `start` on" is contradicted at each later point where
    the best of `losers` beats the best of `winners`, resolved."""
    out = []
    for x in sorted(k for k in sweep if k > start):
        pts = sweep[x]
        w = [pts[s] for s in winners if s in pts]
        lo = [pts[s] for s in losers if s in pts]
        if not w or not lo:
            continue
        best_w, best_l = min(w, key=lambda p: p[0]), min(lo, key=lambda p: p[0])
        if _beats(best_l, best_w):
            out.append(Problem("crossover", where, f"said to hold from {start:g}, but at {x:g} "
                               f"{'/'.join(losers)} ({best_l[0]:.4g}) beats {'/'.join(winners)} ({best_w[0]:.4g}), "
                               "resolved: report where each wins, not the first crossing"))
    return out


def bound_breaches(where: str, said: findings.Said, bounds: Mapping[str, float]) -> list[Problem]:
    """Rule 'bound': a sentence reads a value whose rounds lie beyond its physical bound (`bounds`, by
    measurement name) and does not call it a disturbed measurement (or calls it not resolved)."""
    out = []
    for key, name in said.names.items():
        if name not in bounds or not findings.beyond_bound(said.spreads.get(key), bounds[name]):
            continue
        if findings.DISTURBED not in said.verdict or findings.NOT_RESOLVED in said.verdict:
            s = said.spreads[key]
            out.append(Problem("bound", where, f"{name}: its rounds reach {s.hi:.3g}, beyond the physical bound "
                               f"{bounds[name]:.3g}, but the sentence says {said.verdict!r}: say "
                               f"{findings.DISTURBED!r} and measure again"))
    return out


def fitted_roofs(where: str, points: Sequence[tuple[str, str, float, float]],
                 roofs: Mapping[str, tuple[float, float]]) -> list[Problem]:
    """Rule 'roof': a roof (peak TFLOP/s, GB/s) per precision (or 'all') equal to a point it bounds (name, precision,
    FLOP/byte, TFLOP/s): taken from the points themselves, so the check "no point above its roof" cannot fail."""
    out = []
    for prec, (peak, gbs) in roofs.items():
        mine = [p for p in points if p[1] == prec]
        prec = "" if prec == "all" else prec  # one roof for every point: no precision to name
        if any(abs(t - peak) <= TOLERANCE * peak for _, _, _, t in mine):
            out.append(Problem("roof", where, f"the {prec + ' ' if prec else ''}compute roof {peak:.4g} TFLOP/s is one of its own points: "
                               "take it from an independent measurement (chapter 2's GEMM of that precision)"))
        if any(abs(t * 1e3 / ai - gbs) <= TOLERANCE * gbs for _, _, ai, t in mine if ai > 0 and t * 1e3 / ai < gbs * 1.5):
            out.append(Problem("roof", where, f"the {prec + ' ' if prec else ''}memory roof {gbs:,.0f} GB/s is one of its own points' "
                               "bandwidth: take it from the fastest read-only stream"))
    return out


# ---- what the course prints, rebuilt on one run ----------------------------------------------------------

def claim_verdicts() -> dict[str, str]:
    """Every registered claim's verdict on the current run (claims of all chapters loaded)."""
    for p in sorted(claims.CHAPTERS.glob("ch*_*/notes.py")):
        claims.load_chapter(p.parent.name.split("_")[0])
    return {f"claim {c.id}": claims.judge(c)["verdict"] for c in claims.registered()}


def _calls(path: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """A notebook's import lines from helpers, and the printed calls [(where, source)] it makes from them."""
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    imports: list[str] = []
    calls: list[tuple[str, str]] = []
    for n, cell in enumerate(cells):
        src = "".join(cell["source"])
        try:
            tree = ast.parse("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers"):
                imports.append(ast.unparse(node))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                calls += [(f"{path.name} cell {n}", ast.unparse(a)) for a in node.args if isinstance(a, ast.Call)]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "say"
                  and isinstance(node.func.value, ast.Name) and node.func.value.id == "findings"):
                calls.append((f"{path.name} cell {n}", ast.unparse(node).replace("findings.say(", "findings.sentence(", 1)))
    return imports, calls


def printed_calls(root: Path = ROOT) -> list[tuple[str, Callable[[], Any]]]:
    """Every call a notebook prints that reads only helpers (no notebook variable): [(where, thunk)]."""
    out: list[tuple[str, Callable[[], Any]]] = []
    for d in NOTEBOOK_DIRS:
        for path in sorted((root / d).glob("*.ipynb")):
            imports, calls = _calls(path)
            ns: dict[str, Any] = {}
            for line in imports:
                with contextlib.suppress(Exception):
                    exec(line, ns)  # noqa: S102 - the notebook's own import line
            for where, src in calls:
                code = ast.parse(src, mode="eval")
                free = {n.id for n in ast.walk(code) if isinstance(n, ast.Name)}
                if free and free <= set(ns) | set(dir(builtins)):
                    out.append((f"{where}: {src[:60]}", functools.partial(eval, src, ns)))  # the notebook's call
    return out


def _said(thunk: Callable[[], Any]) -> tuple[str, list[findings.Said]]:
    """Run one printed call quietly: the text it gives (or prints) and the sentences it built."""
    buf = io.StringIO()
    with findings.overheard() as said, contextlib.redirect_stdout(buf):
        try:
            got = thunk()
        except Exception as exc:  # noqa: BLE001 - a call that needs live data says so, not a verdict
            got = f"not measured ({type(exc).__name__})"
    return (got if isinstance(got, str) else buf.getvalue()), said


def audit(all_runs: Sequence[Run] | None = None, root: Path = ROOT) -> list[Problem]:
    """Every problem of every rule, on every stored run."""
    all_runs = list(runs(root) if all_runs is None else all_runs)
    problems = outside_spread(r for run in all_runs for r in run.records)
    calls = printed_calls(root)
    verdicts: dict[str, dict[str, str]] = {}
    for run in all_runs:
        bounds = {r.name: float(r.extra["bound"]) for r in run.records
                  if isinstance(r.extra.get("bound"), (int, float))}
        with as_run(run):
            for where, v in claim_verdicts().items():
                verdicts.setdefault(where, {})[run.label] = v
            for where, thunk in calls:
                text, said = _said(thunk)
                for i, s in enumerate(said):
                    verdicts.setdefault(f"{where} [{i}]", {})[run.label] = s.verdict or s.text
                    problems += [Problem(p.rule, f"{p.where} on {run.label}", p.text)
                                 for p in bound_breaches(where, s, bounds)]
                if not said:
                    verdicts.setdefault(where, {})[run.label] = text
            problems += [Problem(p.rule, f"{p.where} on {run.label}", p.text) for p in sweeps() + stored_roofline()]
    for where, by_run in verdicts.items():
        problems += flips(where, by_run)
    return sorted(set(problems), key=lambda p: (p.rule, p.where))


def sweeps() -> list[Problem]:
    """Rules 'crossover' and 'roof' on the chapters' stored sweeps (chapter 12's batch sweep) of the current run.

    Chapter 12 prints, per M, the set of schemes that are fastest apart from the rest by more than the spread
    (``batch_sweep.fastest``), not a first crossing: each set is checked against its own point, so no later point
    can contradict it; the rule checks that no M is reported won by a scheme whose interval overlaps a faster one.
    """
    from helpers.chapters.ch12_language_models import batch_sweep, tables

    rows = [r for r in tables.SWEEP.stored_rows(reference.lookup_all("ch12.sweep.")) if r.get("µs") is not None]
    if not rows:
        return []
    sweep: dict[float, dict[str, Point]] = {}
    for r in rows:
        s = Spread(r["lo_us"], r["hi_us"], "stored") if r.get("lo_us") is not None and r.get("hi_us") is not None \
            else None
        sweep.setdefault(r["M"], {})[r["scheme"]] = (r["µs"], s)
    out = []
    for m, winners in batch_sweep.fastest(rows).items():
        if len(winners) == 1:
            others = tuple(k for k in sweep[m] if k != winners[0])
            out += later_contradictions(f"chapter 12: {winners[0]} is the fastest at M = {m:g}",
                                        {m: sweep[m]}, winners, others, m)
    return out + _sweep_roofs(rows)


def stored_roofline() -> list[Problem]:
    """Rule 'roof' on chapter 2's stored GPU roofline, under the roof the notebook draws it with
    (``ch02 experiments.roof``: measured apart from the points, ``ch02_gpu_architecture.roofs``)."""
    from helpers.chapters.ch02_gpu_architecture import experiments as ch02

    got = ch02.roof(ch02.GPU_ROOFLINE.run(stored=True), "gpu")
    if got is None:
        return []
    points, roof, _ = got
    return fitted_roofs("chapter 2 roofline", [(p.name, "all", p.intensity, p.tflops) for p in points],
                        {"all": (roof.peak_tflops, roof.bandwidth_gbs)})


def _sweep_roofs(rows: list[dict]) -> list[Problem]:
    """Rule 'roof' on chapter 12's sweep roofline: the roofs it draws, caught as the figure check reads them."""
    import matplotlib

    from helpers import figure_check, plots
    from helpers.chapters.ch12_language_models import figures

    matplotlib.use("Agg")
    seen: list[tuple[Any, Any]] = []
    real = figure_check.roof_problems

    def spy(points: Any, roofs: Any, *a: Any, **k: Any) -> list[str]:
        seen.append((list(points), dict(roofs)))
        return real(points, roofs, *a, **k)

    stored_d2d = reference.lookup("ch12.gemv.d2d_gbs")  # the copy rate the notebook draws the stored sweep with
    if stored_d2d is None:
        return []
    d2d = stored_d2d.value
    figure_check.roof_problems = spy
    saving = os.environ.pop(plots.FIGURES_VAR, None)  # the audit draws to read the roofs, and saves nothing
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            fig = figures.sweep_roofline(rows, d2d)
        matplotlib.pyplot.close(fig)
    except Exception:  # noqa: BLE001 - a roofline that cannot be drawn from this run has no roofs to judge
        return []
    finally:
        figure_check.roof_problems = real
        if saving is not None:
            os.environ[plots.FIGURES_VAR] = saving
    return [p for points, roofs in seen for p in fitted_roofs("chapter 12 sweep roofline", points, roofs)]


def main(argv: list[str]) -> int:
    """List every problem; exit 1 when there is any."""
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1])
        return 0
    if argv:
        raise InputError(f"{PROG} takes no arguments, got {' '.join(argv)}. Run it alone.")
    all_runs = runs()
    problems = audit(all_runs)
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s) on {len(all_runs)} stored run(s): {', '.join(r.label for r in all_runs)}.")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
