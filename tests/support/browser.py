"""Plumbing for the JupyterLab tests: JupyterLab started as `make lab` starts it, and headless Chromium.

The server is jupyter/lab.sh (what `make lab` runs) plus --no-browser, 127.0.0.1, a free port and
a token, in its own process group, with fresh config, settings and workspace folders (as a new
student has: nothing from ~/.jupyter leaks in). It serves a temporary copy of the course tree, so
that autosave never writes outputs into the repository.
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

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = "jupyter/lab.sh"  # `make lab` runs it: the one definition of how the server starts
START = "notebooks/00_start_here.ipynb"
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
    home: Path
    _log: Any = field(default=None, repr=False)

    def url(self, path: str = "/lab") -> str:
        """Full URL of `path` on this server, with the token."""
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}{path}{sep}token={self.token}"

    def start_url(self) -> str:
        """The page `make lab` opens in the browser: the file jupyter writes for it (file:// URL)."""
        found = sorted((self.home / "runtime").glob("jpserver-file-to-run-*-open.html"))
        if not found:
            raise AssertionError("jupyter wrote no page that opens a file: does "
                                 f"{LAUNCHER} still name {START}?\n{self.log_tail()}")
        return found[0].as_uri()

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
    """Environment for the server: this venv, and fresh Jupyter folders (as a new student has)."""
    env = {k: v for k, v in os.environ.items() if k not in _STRIP_ENV}
    env["COURSE_VENV"] = sys.prefix
    env["JUPYTER_CONFIG_DIR"] = str(home / "config")
    env["JUPYTERLAB_SETTINGS_DIR"] = str(home / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(home / "workspaces")
    env["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    return env


def lab_command(root: Path, port: int, token: str) -> list[str]:
    """`make lab`'s command line (jupyter/lab.sh in `root`) plus headless, address, port and token."""
    return ["bash", str(root / LAUNCHER), "--no-browser", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}"]


def start_lab(root: Path, log_path: Path, timeout: float = 120.0) -> LabServer:
    """Start JupyterLab as `make lab` does, from the course tree at `root`; wait until it answers."""
    port, token = free_port(), secrets.token_hex(16)
    home = Path(tempfile.mkdtemp(prefix="lab-home-"))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by LabServer.stop
    proc = subprocess.Popen(lab_command(root, port, token), cwd=root, env=lab_env(home),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = LabServer(proc, port, token, root, log_path, home, log)
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


def course_files() -> list[Path]:
    """The course tree as a fresh clone has it: what git tracks, plus new files it does not ignore."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=REPO, capture_output=True, check=True).stdout.decode()
        return [REPO / f for f in out.split("\0") if f and (REPO / f).is_file()]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: all but build outputs
        skip = {".git", ".venv", "artifacts", "__pycache__", ".ipynb_checkpoints", ".mypy_cache",
                ".pytest_cache", ".hypothesis"}
        return [p for p in REPO.rglob("*") if p.is_file() and not skip & set(p.relative_to(REPO).parts)]


@contextlib.contextmanager
def course_server(name: str) -> Iterator[LabServer]:
    """JupyterLab started as `make lab` does, over a temporary copy of the course tree.

    A copy, so that autosave and the kernels' files never land in the repository.
    """
    root = Path(tempfile.mkdtemp(prefix=f"lab-{name}-"))
    for src in course_files():
        target = root / src.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    server = start_lab(root, ARTIFACTS / f"{name}-server.log")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(server.home, ignore_errors=True)


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


# The notebook in the current tab (other tabs' panels are hidden, so they have no size).
PANEL = ".jp-NotebookPanel:visible"
_PANEL_JS = ("const panel = [...document.querySelectorAll('.jp-NotebookPanel')]"
             ".find(p => p.getBoundingClientRect().width > 0);")


def open_notebook(page: Any, server: LabServer, relpath: str, workspace: str = "",
                  timeout_ms: int = 120_000) -> None:
    """Open a notebook by URL (in a named workspace, if given) and wait until its kernel is idle."""
    prefix = f"/lab/workspaces/{workspace}" if workspace else "/lab"
    page.goto(server.url(f"{prefix}/tree/{relpath}"), wait_until="domcontentloaded")
    wait_kernel_idle(page, timeout_ms)


def file_browser_names(page: Any) -> list[str]:
    """The names listed in the file browser's current folder."""
    page.locator(".jp-DirListing-item").first.wait_for()
    return [n.strip() for n in page.locator(".jp-DirListing-itemText").all_inner_texts()]


def file_browser_open(page: Any, relpath: str) -> list[list[str]]:
    """Open `relpath` from the file browser, from its root, by double-clicks as a student does.

    Returns the listing of every folder passed through (the root first).
    """
    page.locator(".jp-BreadCrumbs-home").first.click()
    listings, parts = [], relpath.split("/")
    for depth, name in enumerate(parts):
        crumb = "/".join(parts[:depth])
        if crumb:  # wait until the browser shows the folder just entered
            page.locator(f".jp-BreadCrumbs-item[data-path='{crumb}']").wait_for()
        page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$")).wait_for()
        listings.append(file_browser_names(page))
        page.locator(".jp-DirListing-item", has=page.locator(
            ".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$"))).dblclick()
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=parts[-1]).wait_for()
    wait_kernel_idle(page)
    return listings


def kernel_dialog_visible(page: Any) -> bool:
    """True when a modal dialog (such as 'Select Kernel') is open."""
    return page.locator(".jp-Dialog").count() > 0


def kernel_name(page: Any) -> str:
    """The kernel display name shown in the current notebook's toolbar."""
    return page.locator(f"{PANEL} .jp-KernelName").first.inner_text().strip()


def wait_kernel_idle(page: Any, timeout_ms: int = 120_000) -> None:
    """Wait until the current notebook shows its cells and its kernel exists and reports idle."""
    page.wait_for_function(
        "() => {" + _PANEL_JS + """
            if (!panel || !panel.querySelector('.jp-Cell')) return false;
            const el = panel.querySelector('.jp-Notebook-ExecutionIndicator');
            const name = panel.querySelector('.jp-KernelName');
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
    """Wait until no cell of the current notebook is queued or running ('[*]') and it is idle."""
    page.wait_for_function(
        "() => {" + _PANEL_JS + """
            if (!panel) return false;
            const prompts = [...panel.querySelectorAll('.jp-InputPrompt')];
            const el = panel.querySelector('.jp-Notebook-ExecutionIndicator');
            return prompts.every(p => !p.textContent.includes('*'))
                && el && el.getAttribute('data-status') === 'idle';
        }""",
        timeout=timeout_ms,
    )


def cell(page: Any, index: int) -> Any:
    """The `index`-th cell of the current notebook (all cells are in the page)."""
    return page.locator(f"{PANEL} .jp-Notebook .jp-Cell").nth(index)


def cell_output(page: Any, index: int) -> str:
    """The text of a cell's outputs (empty when it has none)."""
    area = cell(page, index).locator(".jp-OutputArea")
    return (area.first.text_content() or "") if area.count() else ""


def cell_ran(page: Any, index: int) -> bool:
    """True when the cell's prompt shows an execution count, such as [3]."""
    prompt = cell(page, index).locator(".jp-InputPrompt").first.text_content() or ""
    return re.search(r"\[\d+\]", prompt) is not None


def set_cell_source(page: Any, index: int, source: str) -> None:
    """Replace the text of the `index`-th cell with `source` (typed into its editor)."""
    target = cell(page, index)
    target.scroll_into_view_if_needed()
    target.locator(".cm-content").first.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(source)
    page.keyboard.press("Escape")


_PROMPTS_JS = "() => {" + _PANEL_JS + """
    return [...panel.querySelectorAll('.jp-Notebook .jp-Cell')].map(
        c => c.classList.contains('jp-CodeCell') ? (c.querySelector('.jp-InputPrompt') || {}).textContent || '' : null);
}"""


def run_cells_from(page: Any, index: int, count: int, timeout_ms: int = 180_000) -> None:
    """Run `count` cells from the `index`-th one, with Shift+Enter as a student does, and wait until every code
    cell among them shows a new execution count and the kernel is idle (an idle kernel just after the keys were
    pressed is not yet a finished run)."""
    before = page.evaluate(_PROMPTS_JS)[index:index + count]
    cell(page, index).locator(".jp-InputPrompt").first.click()
    for _ in range(count):
        page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        "([start, before]) => { const now = (" + _PROMPTS_JS + ")().slice(start, start + before.length);"
        " return now.every((t, i) => t === null || (/\\[\\d+\\]/.test(t) && t !== before[i])); }",
        arg=[index, before], timeout=timeout_ms)
    wait_done(page)


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
