"""One graded kernel: start it in its sandbox, run cells with per-cell timeouts and a deadline,
notice when it dies or hangs, and read the plain-data answers it displays. A watchdog kills the kernel
when its processes reach their limit (a fork bomb), and ``limit_reason`` tells which limit ended it.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook

from instructors.batch import limits
from instructors.batch.sandbox import Sandbox

TIMEOUT_ENAME = "CellTimeout"
ANSWER_MIME = "application/vnd.gpu-int8-course.answer+json"
PROBE_TIMEOUT = 3
START_TIMEOUT = 60
WATCH_S = 0.2  # how often the watchdog looks at the kernel's process count


class _CappedClient(NotebookClient):
    """An nbclient that keeps errors, the kernel's plain-data answers, and at most `max_output_chars`
    of printed text per cell (no images: grading never looks at them)."""

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
        """Store errors, answers, and printed text while the cell's total stays under the cap."""
        content = msg.get("content", {})
        if msg["msg_type"] == "error" or ANSWER_MIME in (content.get("data") or {}):
            return super().output(outs, msg, display_id, cell_index)
        text = content.get("text", "") or (content.get("data") or {}).get("text/plain", "")
        self.chars[cell_index] = total = self.chars.get(cell_index, 0) + len(str(text))
        if msg["msg_type"] != "stream" or total > self.max_output_chars:
            return None
        return super().output(outs, msg, display_id, cell_index)


def short(text: object, limit: int = 1500) -> str:
    """Clip a message for the feedback file."""
    text = str(text).strip()
    return text if len(text) <= limit else text[:limit] + " …[truncated]"


class Session:
    """One kernel in its sandbox."""

    def __init__(self, sandbox: Sandbox, cell_timeout: float, deadline: float, max_output_chars: int):
        self.nb = new_notebook()
        self.sandbox = sandbox
        self.deadline, self.cell_timeout = deadline, cell_timeout
        self.hit = ""  # a limit the watchdog enforced
        self._stop = threading.Event()
        self.outputs: list = []
        self.client = _CappedClient(
            self.nb, max_output_chars, allow_errors=True, interrupt_on_timeout=True, timeout=int(cell_timeout),
            startup_timeout=START_TIMEOUT, iopub_timeout=2, shutdown_kernel="immediate",
            error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "", "traceback": []},
            resources={"metadata": {"path": str(sandbox.workdir)}},
        )
        km = AsyncKernelManager(transport="ipc", connection_file=str(sandbox.conn / "kernel.json"))
        km._kernel_spec = KernelSpec(argv=sandbox.argv(), display_name="graded", language="python")
        self.client.km = km
        self.client.start_new_kernel(env=sandbox.env(), cwd=str(sandbox.workdir),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client.start_new_kernel_client()
        if sandbox.groups is not None and sandbox.groups.paths():
            threading.Thread(target=self._watch, args=(sandbox.groups,), daemon=True).start()

    def _watch(self, groups: limits.Groups) -> None:
        """Kill every process of the kernel once its process count reaches the limit."""
        while not self._stop.wait(WATCH_S):
            if groups.hit() == "processes":
                self.hit = "processes"
                groups.kill()
                return

    def limit_reason(self) -> str:
        """The limit that ended or failed the kernel ('memory', 'processes', 'CPU time' ...), or ''."""
        if self.hit:
            return self.hit
        if self.sandbox.groups is not None:
            found = self.sandbox.groups.hit()
            if found:
                return found
        prov = getattr(self.client.km, "provisioner", None)
        proc = getattr(prov, "process", None)
        code = proc.poll() if proc is not None else None
        return limits.explain_exit(code)

    def pid(self) -> int | None:
        """The kernel process id (the sandbox's, under bubblewrap)."""
        prov = getattr(self.client.km, "provisioner", None)
        proc = getattr(prov, "process", None)
        return getattr(proc, "pid", None)

    def run(self, source: str, timeout: float | None = None) -> tuple[str, str, str]:
        """Execute code; return (status, ename, evalue). Status: ok, error, timeout, dead or deadline."""
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
        finally:
            self.outputs = list(cell.get("outputs", []))
        last: dict[str, Any] = self.client.last_reply or {}
        reply: dict[str, Any] = last.get("content", {})
        if any(p.get("source") == "ask_exit" for p in reply.get("payload", [])):
            return "dead", "exit", "the cell asked the kernel to exit (exit() or quit())"
        if reply.get("status") != "error":
            return "ok", "", ""
        if reply.get("ename") == TIMEOUT_ENAME:
            return "timeout", TIMEOUT_ENAME, f"the cell ran longer than its {limit} s limit"
        return "error", str(reply.get("ename", "")), short(reply.get("evalue", ""))

    def answers(self) -> list[str]:
        """The plain-data answers the last cell displayed (JSON texts), in order."""
        out = []
        for o in self.outputs:
            data = o.get("data") or {}
            if ANSWER_MIME in data:
                v = data[ANSWER_MIME]
                out.append(v if isinstance(v, str) else __import__("json").dumps(v))
        return out

    def broken(self, status: str) -> bool:
        """True when the last cell killed the kernel, or hung it: a timeout that an interrupt did not
        end (a trivial cell gets no answer). Not when the total time is simply used up."""
        if status == "dead":
            return True
        if status != "timeout" or self.deadline - time.monotonic() <= 1:
            return False
        return self.run("pass", timeout=PROBE_TIMEOUT)[0] != "ok"

    def close(self) -> None:
        """Shut the kernel down (kill it if it does not answer)."""
        self._stop.set()
        try:
            self.client._cleanup_kernel()
        except Exception:  # noqa: BLE001 - a dead kernel may fail to clean up; nothing to keep
            pass
