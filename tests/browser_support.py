"""Plumbing for the JupyterLab tests: a headless lab server on a free port, and headless Chromium.

The server runs from this virtualenv with a token, on 127.0.0.1, in its own process group,
with its own config, settings and workspace folders (nothing from the user's ~/.jupyter leaks in).
Notebooks are served from a temporary copy, so that autosave never writes outputs into the repo.
Every failure message names a screenshot and ends with the tail of the server log.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts" / "browser"
KERNEL = "gpu-int8-course"
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
# Variables that would make the lab's kernels believe they run under pytest/nbval.
_STRIP_ENV = ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "WORKBOOK_WIDGETS")


def chromium_path() -> str | None:
    """Debian's chromium, or None when it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    """(status, body) of a GET; HTTP errors return their status instead of raising."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - localhost only
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("utf-8", "replace")


@dataclass
class LabServer:
    """A running `jupyter lab` process and how to reach it."""

    proc: subprocess.Popen
    port: int
    token: str
    root: Path
    log_path: Path
    _log: Any = field(default=None, repr=False)

    def url(self, path: str = "/lab") -> str:
        """Full URL of `path` on this server, with the token."""
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}{path}{sep}token={self.token}"

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server log (for failure messages)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and the kernels it started (its group)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # Kernels live in the same process group; make sure none outlives the server.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()


def lab_env(home: Path) -> dict[str, str]:
    """Environment for the server: this venv first on PATH, private Jupyter config folders."""
    env = {k: v for k, v in os.environ.items() if k not in _STRIP_ENV}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["JUPYTER_CONFIG_DIR"] = str(home / "config")
    env["JUPYTERLAB_SETTINGS_DIR"] = str(home / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(home / "workspaces")
    env["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    return env


def start_lab(root: Path, log_path: Path, timeout: float = 120.0,
              extra_args: tuple[str, ...] = ()) -> LabServer:
    """Start `jupyter lab` headless on a free port with a token, serving `root`; wait for it."""
    port, token = free_port(), secrets.token_hex(16)
    home = Path(tempfile.mkdtemp(prefix="lab-home-"))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", *extra_args,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by LabServer.stop
    proc = subprocess.Popen(cmd, cwd=root, env=lab_env(home), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    server = LabServer(proc, port, token, root, log_path, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            server.stop()
            raise RuntimeError(f"jupyter lab exited with code {proc.returncode} before answering.\n"
                               f"Server log ({log_path}):\n{server.log_tail()}")
        with contextlib.suppress(OSError):
            if http_get(server.url("/api/status"), timeout=5)[0] == 200:
                return server
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"jupyter lab did not answer on port {port} within {timeout:.0f} s.\n"
                       f"Server log ({log_path}):\n{server.log_tail()}")


def served_path(nb: Path) -> str:
    """Where a notebook appears in the served folder: its repo-relative path, else labs/<name>."""
    try:
        return nb.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return f"labs/{nb.name}"


@contextlib.contextmanager
def lab_server(notebooks: list[Path], name: str) -> Iterator[LabServer]:
    """A lab server over a temporary folder holding copies of `notebooks` (see served_path)."""
    root = Path(tempfile.mkdtemp(prefix=f"lab-{name}-"))
    for nb in notebooks:
        dest = root / served_path(nb)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(nb, dest)
    server = start_lab(root, ARTIFACTS / f"{name}-server.log")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def chromium_page(viewport: tuple[int, int] = (1400, 1000)) -> Iterator[Any]:
    """A Playwright page in headless Debian chromium with a fresh profile (--user-data-dir)."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError("chromium is not installed: apt-get install -y chromium "
                           "(or skip the browser tests: make test BROWSER=0)")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, \
            sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=exe, headless=True, args=list(CHROMIUM_FLAGS),
            viewport={"width": viewport[0], "height": viewport[1]},
        )
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            ctx.close()


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under artifacts/browser/ and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def failure(page: Any, server: LabServer, name: str, what: str) -> str:
    """A failure message: what went wrong, the screenshot taken now, and the server log tail."""
    try:
        shot = str(screenshot(page, f"FAILED-{name}"))
    except Exception as exc:  # noqa: BLE001 - a broken page must not hide the real failure
        shot = f"(no screenshot: {exc})"
    return (f"{what}\nScreenshot: {shot}\n"
            f"Server log ({server.log_path}), last lines:\n{server.log_tail()}")


def open_notebook(page: Any, server: LabServer, relpath: str, timeout_ms: int = 120_000) -> None:
    """Open a notebook in JupyterLab and wait until its kernel is idle."""
    page.goto(server.url(f"/lab/tree/{relpath}"), wait_until="domcontentloaded")
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=timeout_ms)
    wait_kernel_idle(page, timeout_ms)


def kernel_dialog_visible(page: Any) -> bool:
    """True when a modal dialog (such as 'Select Kernel') is open."""
    return page.locator(".jp-Dialog").count() > 0


def kernel_name(page: Any) -> str:
    """The kernel display name shown in the notebook toolbar."""
    return page.locator(".jp-NotebookPanel .jp-KernelName").first.inner_text().strip()


def wait_kernel_idle(page: Any, timeout_ms: int = 120_000) -> None:
    """Wait until the notebook's kernel exists and reports idle (toolbar indicator)."""
    page.wait_for_function(
        """() => {
            const el = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
            const name = document.querySelector('.jp-NotebookPanel .jp-KernelName');
            return el && el.getAttribute('data-status') === 'idle' && name
                && !/no kernel|starting/i.test(name.textContent || '');
        }""",
        timeout=timeout_ms,
    )


def run_all_cells(page: Any) -> None:
    """Run > Run All Cells from the menu bar, as a student would."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def wait_done(page: Any, timeout_ms: int = 180_000) -> None:
    """Wait until no cell is queued or running ('[*]') and the kernel is idle again."""
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-InputPrompt')];
            const el = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
            return prompts.every(p => !p.textContent.includes('*'))
                && el && el.getAttribute('data-status') === 'idle';
        }""",
        timeout=timeout_ms,
    )


def set_cell_source(page: Any, index: int, source: str) -> None:
    """Replace the text of the `index`-th cell with `source` (typed into its editor)."""
    cell = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()
    editor = cell.locator(".cm-content").first
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(source)
    page.keyboard.press("Escape")


@contextlib.contextmanager
def explain_failures(page: Any, server: LabServer, name: str) -> Iterator[None]:
    """Turn any failure in the block into an AssertionError with a screenshot and the server log."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - Playwright timeouts, assertions, anything
        raise AssertionError(failure(page, server, name, f"{type(exc).__name__}: {exc}")) from exc


def news_toasts(page: Any) -> list[str]:
    """Texts of visible notification toasts that mention news or updates."""
    toasts = page.locator(".Toastify__toast").all_inner_texts()
    return [t for t in toasts if re.search(r"news|update", t, re.I)]
