"""Plumbing for the JupyterHub test: throw-away system users, the course's hub on the loopback, log-ins.

Everything made here is removed on exit, and only that: the users (course-specific prefix plus a random
part, so no real account is ever touched) with their homes and mail spools, the ACL entries that let
them pass through closed folders above the course's Python, and the permission bits `hub serve` takes
from the course checkout (put back as they were).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from instructors.batch import hub
from tests.support.browser import REPO, free_port, http_get

PREFIX = "gich"  # "GPU INT8 course hub": every user the test makes starts with it
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"


def _run(*cmd: str, data: str | None = None) -> None:
    """Run a system command; fail with its output."""
    done = subprocess.run(cmd, input=data, capture_output=True, text=True, env={"PATH": SBIN}, timeout=60)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr or done.stdout}")


def missing_tools() -> str | None:
    """Why the hub test cannot run here (not root, no useradd/setfacl/runuser, no proxy), or None."""
    if os.geteuid() != 0:
        return "needs root (it creates system users for the students)"
    for tool in ("useradd", "userdel", "chpasswd", "setfacl", "runuser", "pgrep", "pkill"):
        if not any(Path(d, tool).exists() for d in SBIN.split(":")):
            return f"{tool} is missing (make browser-deps installs it)"
    if not hub.PROXY.exists():
        return f"the hub's proxy is missing ({hub.PROXY}): make hub-deps installs it"
    return None


@dataclass
class ClassUsers:
    """The system users of one test: name -> password."""

    passwords: dict[str, str]
    acl: list[tuple[Path, bool]] = field(default_factory=list)  # folders given ACL entries, and had one before


def _closed_above(*paths: Path) -> list[Path]:
    """Folders above the `paths` (as given and resolved) that other users cannot pass through."""
    above = {d for p in paths for q in (Path(os.path.abspath(p)), Path(os.path.realpath(p))) for d in q.parents}
    return sorted(d for d in above if not os.stat(d).st_mode & stat.S_IXOTH)


@contextlib.contextmanager
def class_users(roles: list[str]) -> Iterator[ClassUsers]:
    """Create one system user per role (private home, random password), let them reach the course's Python."""
    tag = secrets.token_hex(2)
    users = ClassUsers({f"{PREFIX}{tag}_{role}": secrets.token_urlsafe(12) for role in roles})
    made: list[str] = []
    try:
        for name, password in users.passwords.items():
            _run("useradd", "--create-home", "--shell", "/bin/bash", "--key", "HOME_MODE=0700", name)
            made.append(name)
            os.chmod(Path("~" + name).expanduser(), 0o700)
            _run("chpasswd", data=f"{name}:{password}\n")
        grants = ",".join(f"u:{n}:x" for n in users.passwords)
        for folder in _closed_above(Path(sys.executable), Path(sys.prefix) / "bin" / "jupyterhub-singleuser"):
            had_acl = hub.has_acl(folder)
            _run("setfacl", "-m", grants, str(folder))
            users.acl.append((folder, had_acl))
        yield users
    finally:
        for folder, had_acl in users.acl:  # a folder without an ACL before gets none back (not even a mask)
            with contextlib.suppress(RuntimeError):
                if had_acl:
                    _run("setfacl", "-x", ",".join(f"u:{n}" for n in users.passwords), str(folder))
                else:
                    _run("setfacl", "-b", str(folder))
        for name in made:
            subprocess.run(["pkill", "-KILL", "-u", name], env={"PATH": SBIN}, capture_output=True)
            with contextlib.suppress(RuntimeError):
                _run("userdel", "--remove", name)


@contextlib.contextmanager
def checkout_modes() -> Iterator[None]:
    """Put back the permission bits of the checkout's top-level entries (`hub serve` closes them)."""
    before = {p: stat.S_IMODE(os.lstat(p).st_mode) for p in REPO.iterdir() if not p.is_symlink()}
    try:
        yield
    finally:
        for p, mode in before.items():
            with contextlib.suppress(OSError):
                os.chmod(p, mode)


@dataclass
class Hub:
    """A running `hub serve` and where it lives."""

    proc: subprocess.Popen
    url: str
    folder: Path
    log: Path
    tmp: Path  # the hub's TMPDIR (removed when it stopped)
    proxy_pid: int | None = None
    exit_code: int | None = None
    left_in_tmp: list[str] = field(default_factory=list)  # what the stopped hub left in its TMPDIR

    def tail(self, lines: int = 40) -> str:
        """The last lines of the hub's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def instructor(*args: str | Path) -> str:
    """Run `python -m instructors.batch ARGS` as the instructor (root here); return its output."""
    done = subprocess.run([sys.executable, "-m", "instructors.batch", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise AssertionError(f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


@contextlib.contextmanager
def running_hub(students: list[str], instructors: list[str], cache: Path, log: Path,
                timeout: float = 60.0) -> Iterator[Hub]:
    """`hub serve` on 127.0.0.1 with a temporary hub folder; stopped with SIGINT (Ctrl-C) on exit."""
    folder, tmp = Path(tempfile.mkdtemp(prefix="course-hub-")), Path(tempfile.mkdtemp(prefix="course-hub-tmp-"))
    port = free_ports(3)  # the hub, its API and the proxy's API take three ports in a row (instructors.batch.hub)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "instructors.batch", "hub", "serve",
                                 "--students", ",".join(students), "--instructors", ",".join(instructors),
                                 "--hub", str(folder), "--port", str(port), "--cache", str(cache)],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "TMPDIR": str(tmp)})
    running = Hub(proc, f"http://127.0.0.1:{port}", folder, log, tmp)
    try:
        deadline = time.monotonic() + timeout
        while not _up(running):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the hub did not start (exit {proc.poll()}):\n{running.tail()}")
            time.sleep(0.3)
        running.proxy_pid = int((folder / "state" / "jupyterhub-proxy.pid").read_text())
        yield running
    finally:
        running.exit_code = stop(proc)
        if running.proxy_pid is None:  # the hub never came up: its proxy may be left (a running hub's must end itself)
            _stop_orphan_proxy(folder / "state" / "jupyterhub-proxy.pid")
        running.left_in_tmp = sorted(p.name for p in tmp.iterdir())
        subprocess.run(["rm", "-rf", str(folder), str(tmp)])


def free_ports(count: int) -> int:
    """A port p on 127.0.0.1 with p .. p + count - 1 all free right now (free_port checks one only: a hub that failed
    to bind the port after it, taken by another socket, made a make-test run fail)."""
    for _ in range(200):
        first = free_port()
        if first + count - 1 <= 65535 and all(_port_free(first + i) for i in range(1, count)):
            return first
    raise RuntimeError(f"no {count} free ports in a row on 127.0.0.1")


def _port_free(port: int) -> bool:
    """Whether nothing holds `port` on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stop_orphan_proxy(pid_file: Path) -> None:
    """End the proxy a hub started and left behind when it failed (it outlives the hub's exit)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text())
        if alive(pid):
            os.kill(pid, signal.SIGTERM)


def alive(pid: int | None) -> bool:
    """True while process `pid` exists (and is not a zombie)."""
    if pid is None:
        return False
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


def processes_of(user: str, wait: float = 0.0) -> list[str]:
    """The command lines of the processes `user` still runs, waiting up to `wait` seconds for them to end. A zombie
    (dead, its exit status not yet collected by its parent or by init) does not run and is left out."""
    import time

    end = time.monotonic() + wait
    while True:
        done = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-u", user], capture_output=True, text=True,
                              env={"PATH": SBIN})
        running = [ln.strip() for ln in done.stdout.splitlines() if ln.split()[1:2] and not ln.split()[1].startswith("Z")]
        if not running or time.monotonic() >= end:
            return running
        time.sleep(0.2)


def _up(running: Hub) -> bool:
    """True once the hub's log-in page answers."""
    try:
        return http_get(f"{running.url}/hub/login", timeout=2)[0] == 200
    except OSError:
        return False


def stop(proc: subprocess.Popen, timeout: float = 20.0) -> int:
    """Ctrl-C the hub's process group; SIGKILL what is left after `timeout`. Returns the exit status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    return int(proc.returncode)


def log_in(page: Any, url: str, user: str, password: str, wait: bool = True, then: str = "") -> None:
    """Log in on the hub's page as a person does (the hub starts their server), then go to `then` (a path in
    their JupyterLab, e.g. lab/tree/x.ipynb); with `wait`, until JupyterLab is up."""
    after = "/hub/spawn?next=" + quote(f"/user/{user}/{then}") if then else ""  # the hub starts it, then goes on
    page.goto(f"{url}/hub/login" + (f"?next={quote(after)}" if after else ""), wait_until="domcontentloaded")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit", no_wait_after=not wait)
    if wait:
        wait_lab(page, user)


def wait_lab(page: Any, user: str) -> None:
    """Wait until the page shows the user's own JupyterLab (after the hub's spawn-pending page)."""
    page.wait_for_url(f"**/user/{user}/lab**", timeout=90_000)
    page.locator(".jp-LabShell").wait_for(timeout=90_000)


@contextlib.contextmanager
def explained(running: Hub, pages: dict[str, Any]) -> Iterator[None]:
    """Turn a failure into an AssertionError with a screenshot of each user's page and the hub's log."""
    from tests.support.browser import screenshot

    try:
        yield
    except Exception as exc:  # noqa: BLE001 - Playwright timeouts, assertions, anything
        shots = []
        for user, page in pages.items():
            try:
                shots.append(str(screenshot(page, f"FAILED-hub-{user.split('_')[-1]}")))
            except Exception as err:  # noqa: BLE001 - a broken page must not hide the real failure
                shots.append(f"(no screenshot of {user}: {err})")
        raise AssertionError(f"{type(exc).__name__}: {exc}\nScreenshots: {', '.join(shots)}\n"
                             f"Hub log ({running.log}), last lines:\n{running.tail()}") from exc
