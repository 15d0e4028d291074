"""A pytest plugin for `make notebooks` (nbval): no silent long cells, no figure problems.

Loaded by the Makefile's `notebooks` target with ``-p tests.support.nbval_guard``:
- a cell that runs longer than ``SILENT_LIMIT_S`` without a progress bar (tqdm output) fails, named by
  notebook and cell;
- the figure problems that ``helpers.figure_check`` appended to ``$WORKBOOK_FIGURE_LINT`` while the
  notebooks ran fail the run at the end, listed by notebook and figure;
- ``--lane alone`` runs only the notebooks that time this machine's CPU (helpers.tools.report_plan.CPU_TIMING),
  which the Makefile runs one at a time with nothing beside them; ``--lane beside`` runs every other one (two at a
  time, with pytest-xdist) and fails the run when one of them recorded a time in ``$WORKBOOK_RESULTS``: a time
  measured beside another notebook is not this machine's.
(Files left in nbval's private TMPDIR are checked after the run by ``python -m helpers.tools.report check-tmp``.)
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

# Loaded (-p) before nbval, whose nbformat never checks IRI formats: each pytest process skips the 1-2 s grammar
# build of rfc3987_syntax (instructors.batch.worker.skip_unused_imports says why).
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import pytest  # noqa: E402

from helpers.figure_check import LINT_VAR, read_problems  # noqa: E402
from helpers.records import RESULTS_VAR  # noqa: E402
from helpers.tools.report_plan import times_the_cpu  # noqa: E402

SILENT_LIMIT_S = float(os.environ.get("WORKBOOK_SILENT_LIMIT_S", "10"))
PROGRESS = re.compile(r"\d+%\|")  # tqdm's bar, as text or as the text/plain of its widget
LANES = ("all", "alone", "beside")
# What a notebook run beside another may record: accuracy, quality and sizes, never a time (nor a rate or a ratio
# of times: a unit not listed here counts as one; a ratio counts as one unless its name says it is of sizes).
UNTIMED_UNITS = frozenset({"%", "pts", "perplexity", "bool", "fraction", "dB", "count", "layers", "MB"})


class SilentCellError(AssertionError):
    """A cell ran long without telling the student what it was doing."""


def shows_progress(outputs: list[Any]) -> bool:
    """True when a cell's outputs include a tqdm progress bar (stream text or widget)."""
    for out in outputs or []:
        text = out.get("text") or (out.get("data") or {}).get("text/plain") or ""
        if PROGRESS.search(text if isinstance(text, str) else "".join(text)):
            return True
    return False


_failed: list[str] = []  # the figure problems of the whole run, listed at its end


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Time each notebook cell; fail it when it ran long and showed no progress."""
    if not hasattr(item, "test_outputs"):
        return (yield)
    start = time.perf_counter()
    result = yield
    seconds = time.perf_counter() - start
    if seconds > SILENT_LIMIT_S and not shows_progress(item.test_outputs):
        first = next((ln for ln in item.cell.source.splitlines() if ln.strip()), "")
        raise SilentCellError(f"{item.parent.path.name} {item.name} ran {seconds:.0f} s without a progress bar "
                              f"(first line: {first!r}); show tqdm progress saying what it does")
    return result


def pytest_addoption(parser: pytest.Parser) -> None:
    """--lane: which notebooks this run holds (all; those that time the CPU; the others, beside each other)."""
    parser.addoption("--lane", choices=LANES, default="all",
                     help="alone: only the notebooks that time the CPU (helpers.tools.report_plan.CPU_TIMING); "
                          "beside: every other one, and fail one that records a time (run them with -n 2)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the notebooks of this run's lane."""
    lane = config.getoption("--lane")
    if lane == "all":
        return
    keep = [i for i in items if times_the_cpu(Path(i.path)) == (lane == "alone")]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def timed(record: dict) -> bool:
    """True for a record that may be a measured time: a unit not in UNTIMED_UNITS, or a ratio not of sizes."""
    unit = record.get("unit")
    return unit not in UNTIMED_UNITS and not (unit == "ratio" and "size_ratio" in str(record.get("name", "")))


def _records() -> list[str]:
    """The lines of $WORKBOOK_RESULTS ([] when unset or not written yet)."""
    path = os.environ.get(RESULTS_VAR)
    try:
        return Path(path).read_text(encoding="utf-8").splitlines() if path else []
    except OSError:
        return []


_before = 0  # records in $WORKBOOK_RESULTS before this run (the other lane's run wrote them)


def pytest_sessionstart(session: pytest.Session) -> None:
    global _before
    _before = len(_records())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run on figure problems found while the notebooks ran, and (--lane beside) on a recorded time."""
    for f in read_problems(os.environ.get(LINT_VAR, "")) if os.environ.get(LINT_VAR) else []:
        _failed.extend(f"figure in {f['notebook']} ({f['figure']}): {p}" for p in f["problems"])
    if session.config.getoption("--lane") == "beside" and not hasattr(session.config, "workerinput"):
        for rec in (json.loads(line) for line in _records()[_before:] if line.strip()):
            if timed(rec):
                who = rec.get("notebook") or "a notebook"
                _failed.append(f"{who} recorded {rec.get('name')} in {rec.get('unit')} while it ran beside another "
                               "notebook, so that time is not this machine's. Add the notebook to "
                               "helpers.tools.report_plan.CPU_TIMING: it then runs alone")
    if _failed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the figure problems (and recorded times) that failed the run."""
    if _failed:
        terminalreporter.section(f"notebook-run checks FAILED ({len(_failed)})")
        for line in _failed:
            terminalreporter.line(line)
