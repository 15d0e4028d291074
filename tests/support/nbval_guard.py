"""A pytest plugin for `make notebooks` (nbval): no silent long cells, no figure problems.

Loaded by the Makefile's `notebooks` target with ``-p tests.support.nbval_guard``:
- a cell that runs longer than ``SILENT_LIMIT_S`` without a progress bar (tqdm output) fails, named by
  notebook and cell;
- the figure problems that ``helpers.figure_check`` appended to ``$WORKBOOK_FIGURE_LINT`` while the
  notebooks ran fail the run at the end, listed by notebook and figure.
(Files left in nbval's private TMPDIR are checked after the run by ``python -m helpers.tools.report check-tmp``.)
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

from helpers.figure_check import LINT_VAR, read_problems

SILENT_LIMIT_S = float(os.environ.get("WORKBOOK_SILENT_LIMIT_S", "10"))
PROGRESS = re.compile(r"\d+%\|")  # tqdm's bar, as text or as the text/plain of its widget


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run on figure problems found while the notebooks ran."""
    for f in read_problems(os.environ.get(LINT_VAR, "")) if os.environ.get(LINT_VAR) else []:
        _failed.extend(f"figure in {f['notebook']} ({f['figure']}): {p}" for p in f["problems"])
    if _failed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the figure problems that failed the run."""
    if _failed:
        terminalreporter.section(f"notebook-run checks FAILED ({len(_failed)})")
        for line in _failed:
            terminalreporter.line(line)
