"""The reference run's summary.md: headline measurements against their targets, notebook statuses, figure
problems, every other measurement.

Serves: tooling — `make gpu-report` (helpers.tools.report).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from helpers import bench, spread
from helpers.reference import TARGETS, TARGETS_BY_NAME

CPU_FILE_PREFIXES = ("ort_cpu.", "suite.cpu_", "suite.fresh_clone")  # headline names stored in reference/cpu (MEASUREMENTS.md)


@dataclass
class NotebookRun:
    """How one notebook's execution went."""

    path: str
    seconds: float
    ok: bool
    error: str = ""


def _fmt_value(r: bench.Record | None) -> str:
    """A record's value for the summary, or 'missing'."""
    return "missing" if r is None else f"{r.value:.4g} {r.unit}"


def summary_markdown(records: list[bench.Record], runs: Sequence[NotebookRun], minutes: float,
                     figures: Sequence[dict] = ()) -> str:
    """The summary: headline measurements against their targets, notebook statuses, then the figures with
    problems (``helpers.figure_check.read_problems``: a roof below its data, a jumpy sweep, no labels)."""
    by_name = {r.name: r for r in records}
    device = records[0].device if records else "unknown device"
    date = records[0].date if records else time.strftime("%Y-%m-%d")
    from helpers.reference import SOFTWARE, pin_differences, software

    sw = software(records=records)
    lines = [f"# Reference run: {device}, {date}", "",
             f"Whole run: {minutes:.1f} min, {sum(r.ok for r in runs)}/{len(runs)} notebooks ran clean.", "",
             "Software: " + ", ".join(f"{label} {sw[k]}" for k, label in SOFTWARE if k in sw) + ".",
             "Where it differs from the course's pins: " + ("; ".join(pin_differences(records=records)) or "nowhere")
             + ".", "",
             "## Headline measurements", "",
             "| measurement | value | target | met | meaning |", "|---|---|---|---|---|"]
    for t in TARGETS:
        r, where = by_name.get(t.name), ""
        if r is None and t.name.startswith(CPU_FILE_PREFIXES):
            from helpers.reference import lookup

            r = lookup(t.name, "cpu")
            where = f" (CPU file: {r.device}, {r.date})" if r else ""
        s = spread.of_record(r) if r else None  # a spread straddling the target is no verdict either way
        verdict = ("missing" if r is None else f"not resolved ({s.lo:.3g}..{s.hi:.3g})" if t.straddled(s) else
                   {True: "yes", False: "**no**", None: "reported"}[t.met(r.value)])
        lines.append(f"| `{t.name}` | {_fmt_value(r)}{where} | {t.text} | {verdict} | {t.meaning} |")
    lines += ["", "## Notebooks", "", "| notebook | seconds | status |", "|---|---|---|"]
    for run in runs:
        status = "ok" if run.ok else "FAILED: " + run.error.splitlines()[-1][:200] if run.error else "FAILED"
        lines.append(f"| {run.path} | {run.seconds:.0f} | {status} |")
    if figures:
        lines += ["", f"## Figure problems ({len(figures)} figures)", ""]
        lines += [f"- {f['notebook']} ({f['figure']}): {p}" for f in figures for p in f["problems"]]
    others = [r for r in records if r.name not in TARGETS_BY_NAME]
    if others:
        lines += ["", "## All other measurements", "", "| notebook | measurement | value |", "|---|---|---|"]
        for r in others:
            lines.append(f"| {r.notebook or ''} | `{r.name}` | {_fmt_value(r)} |")
    return "\n".join(lines) + "\n"
