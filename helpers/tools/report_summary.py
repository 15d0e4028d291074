"""The reference run's summary.md: headline measurements against their targets, notebook statuses, figure
problems, every other measurement.

Serves: tooling — `make gpu-report` (helpers.tools.report).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helpers import bench, spread
from helpers.reference import TARGETS, TARGETS_BY_NAME
from helpers.tools.report_failure import details, one_line

SUMMARY_HEADER = "# Reference run: "  # helpers.tools.report_store recognises the report's own summary.md by it

CPU_FILE_PREFIXES = ("ort_cpu.", "suite.cpu_", "suite.fresh_clone")  # headline names stored in reference/cpu (MEASUREMENTS.md)


@dataclass
class NotebookRun:
    """How one notebook's execution went."""

    path: str
    seconds: float
    ok: bool
    error: str = ""
    failure: dict | None = None  # helpers.tools.report_failure.describe: cell, line, type, message, frames
    attempts: list[dict] = field(default_factory=list)  # earlier tries of this notebook (a failed first run)
    phase: str = ""  # with --jobs N: the phase it ran in (helpers.tools.report_plan), and whether beside others
    start_s: float | None = None  # when its (last) try started, seconds after the run began
    slowest_cells: list[dict] = field(default_factory=list)  # report_exec.slowest_cells: where its time went

    @property
    def flaky(self) -> bool:
        """Failed once, then passed when run again."""
        return self.ok and any(not a.get("ok") for a in self.attempts)

    def status(self) -> str:
        """The summary's status cell: ok, flaky (and how it failed first), or FAILED and where."""
        first = next((a for a in self.attempts if not a.get("ok")), None)
        if self.flaky and first is not None:
            return f"flaky: failed at first ({one_line(first.get('failure'), first.get('error', ''))}), passed when re-run"
        if self.ok:
            return "ok"
        tries = " twice" if first else ""
        return f"FAILED{tries}: {one_line(self.failure, self.error)}".rstrip(": ")

    def to_json(self) -> dict:
        """The runs.json row."""
        return {"path": self.path, "seconds": self.seconds, "ok": self.ok, "error": self.error,
                **({"failure": self.failure} if self.failure else {}),
                **({"attempts": self.attempts} if self.attempts else {}),
                **({"phase": self.phase} if self.phase else {}),
                **({"start_s": self.start_s} if self.start_s is not None else {}),
                **({"slowest_cells": self.slowest_cells} if self.slowest_cells else {})}


def slowest_cell(run: NotebookRun) -> str:
    """'cell 20 `speed = ...`: 161 s (73 %)' for the summary's table ('' where the run kept no cell timing)."""
    if not run.slowest_cells:
        return ""
    c = run.slowest_cells[0]
    share = f" ({100 * c['seconds'] / run.seconds:.0f} %)" if run.seconds > 0 else ""
    return f"cell {c['cell']} `{c['line']}`: {c['seconds']:.0f} s{share}"


def failure_sections(runs: Sequence[NotebookRun]) -> list[str]:
    """A section per failed try (a failed notebook, and the first try of a flaky one): cell, exception, frames."""
    lines: list[str] = []
    for run in runs:
        tries = [a for a in run.attempts if not a.get("ok")] + ([run.to_json()] if not run.ok else [])
        for n, t in enumerate(tries, 1):
            if t.get("failure"):
                label = f"try {n} of {len(tries) + run.ok}" if len(tries) + run.ok > 1 else "its only try"
                lines += ["", f"### {run.path} failed ({label})", "", *details(t["failure"])]
    return (["", "## Failures"] + lines) if lines else []


def schedule_section(runs: Sequence[NotebookRun]) -> list[str]:
    """With --jobs N: each phase, and which notebooks ran in it, beside which (from the runs' phases)."""
    phases = list(dict.fromkeys(r.phase.removesuffix(" (beside)") for r in runs if r.phase))
    if not phases:
        return []
    lines = ["", "## Schedule (which notebooks ran at the same time)", ""]
    for ph in phases:
        main = [Path(r.path).stem for r in runs if r.phase == ph]
        side = [Path(r.path).stem for r in runs if r.phase == ph + " (beside)"]
        lines.append(f"- phase {ph}: {', '.join(main) or 'none'}"
                     + (f"; beside them, with the GPU hidden and few threads: {', '.join(side)}" if side else ""))
    return lines


def _fmt_value(r: bench.Record | None) -> str:
    """A record's value for the summary, or 'missing'."""
    return "missing" if r is None else f"{r.value:.4g} {r.unit}"


def header(records: Sequence[bench.Record], runs: Sequence[NotebookRun], minutes: float | None) -> str:
    """The summary's first lines, read from what it summarises: the cards, the records' dates, how many
    notebooks ran clean (and flaky), and the whole run's wall time."""
    devices = list(dict.fromkeys(r.device for r in records)) or ["no records"]
    dates = sorted({r.date for r in records}) or [time.strftime("%Y-%m-%d")]
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    flaky = sum(r.flaky for r in runs)
    took = "not timed (no suite.gpu_report_minutes record)" if minutes is None else f"{minutes:.1f} min"
    timed = next((r for r in records if r.name == "suite.gpu_report_minutes"), None)
    if timed is not None and minutes == timed.value and len(dates) > 1:
        took += f" (the full run of {timed.date})"
    return (f"{SUMMARY_HEADER}{', '.join(devices)}, {when}\n\nWhole run: {took}, {sum(r.ok for r in runs)}/{len(runs)} "
            f"notebooks ran clean" + (f" ({flaky} of them only when re-run: flaky)" if flaky else "") + ".")


def summary_markdown(records: list[bench.Record], runs: Sequence[NotebookRun], minutes: float | None,
                     figures: Sequence[dict] = ()) -> str:
    """The summary: headline measurements against their targets, notebook statuses, then the figures with
    problems (``helpers.figure_check.read_problems``: a roof below its data, a jumpy sweep, no labels)."""
    by_name = {r.name: r for r in records}
    from helpers.reference import SOFTWARE, pin_differences, software

    sw = software(records=records)
    lines = [header(records, runs, minutes), "",
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
    timed = any(run.slowest_cells for run in runs)  # runs stored before cells were timed have no such column
    lines += ["", "## Notebooks", "", "| notebook | seconds | status |" + " slowest cell |" * timed,
              "|---|---|---|" + "---|" * timed]
    for run in runs:
        cells = (run.status(), slowest_cell(run)) if timed else (run.status(),)
        lines.append(f"| {run.path} | {run.seconds:.0f} | "
                     + " | ".join(c.replace("|", "\\|") for c in cells) + " |")  # a pipe would split a cell
    lines += failure_sections(runs) + schedule_section(runs)
    if figures:
        lines += ["", f"## Figure problems ({len(figures)} figures)", ""]
        lines += [f"- {f['notebook']} ({f['figure']}): {p}" for f in figures for p in f["problems"]]
    others = [r for r in records if r.name not in TARGETS_BY_NAME]
    if others:
        lines += ["", "## All other measurements", "", "| notebook | measurement | value |", "|---|---|---|"]
        for r in others:
            lines.append(f"| {r.notebook or ''} | `{r.name}` | {_fmt_value(r)} |")
    return "\n".join(lines) + "\n"
