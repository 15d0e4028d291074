"""Run one submission in a fresh kernel, then the solution's graded test cells against it.

The kernel starts in an empty temporary folder. The student's cells run first (errors allowed,
each under a per-cell timeout, all under a total one); a cell that kills or hangs the kernel is
skipped on a fresh kernel. Only then are the hidden tests sent to the kernel, one cell each:
a test scores its points when it raises nothing.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook

TIMEOUT_ENAME = "CellTimeout"
MAX_ATTEMPTS = 4
PROBE_TIMEOUT = 3
GUARD_TIMEOUT = 60  # the set-up cell is ours: it may take longer than a student's cell

# Sent after the student's cells, before the tests: undo what a submission could have changed
# by accident or mischief that decides whether a test passes (a shadowed check() or Case,
# swallowed exceptions, rewritten input, another working folder).
GUARD = """\
def _grading_guard(workdir):
    import os
    ip = get_ipython()
    ip.custom_exceptions = ()
    ip.ast_transformers[:] = []
    ip.input_transformers_post[:] = []
    os.chdir(workdir)
_grading_guard({workdir!r})
del _grading_guard
import helpers
from helpers.grading import Case, check
"""


@dataclass
class TestCell:
    """One graded test cell of a solution notebook (hidden tests included)."""

    grade_id: str
    points: float
    source: str


@dataclass
class TestOutcome:
    """The result of one test cell."""

    grade_id: str
    points: float
    max_points: float
    passed: bool
    message: str


@dataclass
class RunResult:
    """Everything the grader learned from one submission."""

    outcomes: list[TestOutcome]
    cell_errors: list[tuple[int, str, str]] = field(default_factory=list)  # (cell, ename, evalue)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


class _CappedClient(NotebookClient):
    """An nbclient that keeps errors and at most `max_output_chars` of printed text per cell
    (no images: grading never looks at them), counts the text, and records replies."""

    def __init__(self, nb: NotebookNode, max_output_chars: int, **kw: Any):
        super().__init__(nb, **kw)
        self.max_output_chars = max_output_chars
        self.chars: dict[int, int] = {}
        self.last_reply: dict | None = None
        self.on_cell_executed = self._remember_reply

    def _remember_reply(self, cell: NotebookNode, cell_index: int, execute_reply: dict) -> None:
        """Keep the execute reply of the last cell (its status, ename and evalue)."""
        self.last_reply = execute_reply

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
        """Store errors, and printed text while the cell's total stays under the cap."""
        if msg["msg_type"] == "error":
            return super().output(outs, msg, display_id, cell_index)
        content = msg.get("content", {})
        text = content.get("text", "") or (content.get("data") or {}).get("text/plain", "")
        self.chars[cell_index] = total = self.chars.get(cell_index, 0) + len(str(text))
        if msg["msg_type"] != "stream" or total > self.max_output_chars:
            return None
        return super().output(outs, msg, display_id, cell_index)


def _short(text: object, limit: int = 1500) -> str:
    """Clip a message for the feedback file."""
    text = str(text).strip()
    return text if len(text) <= limit else text[:limit] + " …[truncated]"


class _Session:
    """One kernel: start it, run cells with timeouts and a deadline, notice when it dies or hangs."""

    def __init__(self, workdir: str, kernel_name: str, cell_timeout: float, deadline: float,
                 max_output_chars: int):
        self.nb = new_notebook()
        self.deadline, self.cell_timeout = deadline, cell_timeout
        self.client = _CappedClient(
            self.nb, max_output_chars, kernel_name=kernel_name, allow_errors=True,
            interrupt_on_timeout=True, timeout=int(cell_timeout), startup_timeout=60,
            error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "", "traceback": []},
            resources={"metadata": {"path": workdir}}, iopub_timeout=2, shutdown_kernel="immediate",
        )
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
        self.client.km = self.client.create_kernel_manager()
        self.client.start_new_kernel(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client.start_new_kernel_client()

    def run(self, source: str, timeout: float | None = None) -> tuple[str, str, str]:
        """Execute code; return (status, ename, evalue). Status: ok, error, timeout or dead."""
        left = self.deadline - time.monotonic()
        if left <= 1:
            return "deadline", "", ""
        limit = max(1, int(min(timeout or self.cell_timeout, left)))
        self.client.timeout = limit
        cell = new_code_cell(source)
        self.nb.cells.append(cell)
        self.client.last_reply = None
        try:
            self.client.execute_cell(cell, len(self.nb.cells) - 1)
        except DeadKernelError:
            return "dead", "DeadKernel", "the kernel died (sys.exit in a subprocess, os._exit, a crash?)"
        last: dict[str, Any] = self.client.last_reply or {}
        reply: dict[str, Any] = last.get("content", {})
        if any(p.get("source") == "ask_exit" for p in reply.get("payload", [])):
            return "dead", "exit", "the cell asked the kernel to exit (exit() or quit())"
        if reply.get("status") != "error":
            return "ok", "", ""
        if reply.get("ename") == TIMEOUT_ENAME:
            return "timeout", TIMEOUT_ENAME, f"the cell ran longer than its {limit} s limit"
        return "error", str(reply.get("ename", "")), _short(reply.get("evalue", ""))

    def broken(self, status: str) -> bool:
        """True when the last cell killed the kernel, or hung it: a timeout that an interrupt
        did not end (a trivial cell gets no answer). Not when the total time is simply used up."""
        if status == "dead":
            return True
        if status != "timeout" or self.deadline - time.monotonic() <= 1:
            return False
        return self.run("pass", timeout=PROBE_TIMEOUT)[0] != "ok"

    def close(self) -> None:
        """Shut the kernel down (kill it if it does not answer)."""
        try:
            self.client._cleanup_kernel()
        except Exception:  # noqa: BLE001 - a dead kernel may fail to clean up; nothing to keep
            pass


def _test_message(status: str, ename: str, evalue: str, test: TestCell) -> str:
    """What a failed test cell tells the student."""
    if status == "deadline":
        return "not run: the submission used up its total time limit"
    if ename == "NameError":
        return (f"NameError: {evalue}. The test needs this name: did you rename or delete the "
                f"function or the cell that defines it?")
    if ename == "NotImplementedError":
        return f"NotImplementedError: {evalue or 'the stub was not replaced'}"
    return f"{ename}: {evalue}" if evalue else ename


def run_submission(nb: NotebookNode, tests: list[TestCell], *, kernel_name: str = "python3",
                   cell_timeout: float = 60, total_timeout: float = 600,
                   max_output_chars: int = 20_000) -> RunResult:
    """Run a submission's code cells in a fresh kernel in an empty folder, then the test cells."""
    start = time.monotonic()
    deadline = start + total_timeout
    sources = ["".join(c.source) if isinstance(c.source, list) else c.source
               for c in nb.cells if c.cell_type == "code"]
    cells = [src for src in sources if src.strip()]
    skip: set[int] = set()  # student cells that killed or hung the kernel
    bad_tests: dict[str, str] = {}  # test cells that did
    result = RunResult([])
    with tempfile.TemporaryDirectory(prefix="grade-") as workdir:
        for _attempt in range(MAX_ATTEMPTS):
            result = RunResult([], notes=[n for n in result.notes])
            try:
                session = _Session(workdir, kernel_name, cell_timeout, deadline, max_output_chars)
            except Exception as exc:  # noqa: BLE001 - report it in the feedback; grade the others
                result.notes.append(f"the kernel did not start: {type(exc).__name__}: {_short(exc, 300)}")
                break
            try:
                restart = _run_cells(session, cells, skip, result)
                if not restart:
                    restart = _run_tests(session, tests, bad_tests, workdir, result)
            finally:
                session.close()
            if not restart:
                break
        else:
            result.notes.append(f"gave up after {MAX_ATTEMPTS} fresh kernels")
    done = {o.grade_id for o in result.outcomes}
    for t in tests:  # anything never reached scores zero, with the reason
        if t.grade_id not in done:
            msg = bad_tests.get(t.grade_id, "not run: the kernel kept dying or the time ran out")
            result.outcomes.append(TestOutcome(t.grade_id, 0.0, t.points, False, msg))
    result.seconds = time.monotonic() - start
    return result


def _run_cells(session: _Session, cells: list[str], skip: set[int],
               result: RunResult) -> bool:
    """Run the student's cells; return True when a cell killed/hung the kernel (restart)."""
    for i, source in enumerate(cells):
        if i in skip:
            continue
        status, ename, evalue = session.run(source)
        if status == "deadline":
            result.notes.append(f"stopped at code cell {i + 1}: total time limit reached")
            return False
        if session.broken(status):
            skip.add(i)
            why = f"stopped the kernel ({evalue})" if status == "dead" else "hung the kernel (even after an interrupt)"
            result.notes.append(f"code cell {i + 1} {why}; it was skipped on a fresh kernel")
            return True
        if status in ("error", "timeout"):
            result.cell_errors.append((i + 1, ename, evalue))
        printed = session.client.chars.get(len(session.nb.cells) - 1, 0)
        if printed > session.client.max_output_chars:
            result.notes.append(f"code cell {i + 1} printed {printed:,} characters; only the first "
                                f"{session.client.max_output_chars:,} were kept (output truncated)")
    return False


def _run_tests(session: _Session, tests: list[TestCell], bad_tests: dict[str, str],
               workdir: str, result: RunResult) -> bool:
    """Run the guard, then each test cell; return True when a test killed the kernel (restart)."""
    status, ename, evalue = session.run(GUARD.format(workdir=workdir), timeout=GUARD_TIMEOUT)
    if status not in ("ok", "deadline"):
        result.notes.append(f"the grading set-up cell failed: {ename}: {evalue}")
    for t in tests:
        if t.grade_id in bad_tests:
            result.outcomes.append(TestOutcome(t.grade_id, 0.0, t.points, False, bad_tests[t.grade_id]))
            continue
        status, ename, evalue = session.run(t.source)
        if session.broken(status):
            why = "killed the kernel" if status == "dead" else "hung the kernel"
            bad_tests[t.grade_id] = f"this test {why} while calling your code"
            return True
        ok = status == "ok"
        msg = "passed" if ok else _test_message(status, ename, evalue, t)
        result.outcomes.append(TestOutcome(t.grade_id, t.points if ok else 0.0, t.points, ok, msg))
    return False
