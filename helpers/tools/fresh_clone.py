"""Time a fresh clone to JupyterLab serving through `make lab`: python -m helpers.tools.fresh_clone OUT.json

Clones the repository (its committed files, as a student gets them) into a temporary folder, runs
`make lab` there with empty pip and uv caches (so every download counts), stops JupyterLab as soon
as it answers, removes the clone, and saves suite.fresh_clone_to_lab_minutes (with the clone,
install and start times in its `extra`) as a JSON list of records, the format of reference/*/results.json.
OUT.json must be new or an earlier output of this command (helpers.cli's output contract): that is checked
before the clone starts.

    --overlay Makefile jupyter/lab.sh   copy these working-tree files over the clone first
                                        (to time a change before it is committed)
    --make INSTALLER=pip                extra arguments for make (e.g. the installer to use)

JupyterLab is told its port and token, and not to open a browser, through a private Jupyter
config folder, so nothing of the user's ~/.jupyter is read or written.

Serves: tooling — the README's fresh-clone time (suite.fresh_clone_to_lab_minutes, reference/cpu).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import bench, cli
from helpers.errors import InputError, WorkbookError

PROG = "python -m helpers.tools.fresh_clone"
INSTEAD = "another JSON file, e.g. artifacts/fresh_clone.json"  # what a refusal tells the user to pass
NAME = "suite.fresh_clone_to_lab_minutes"
REPO = Path(__file__).resolve().parents[2]
STAMP = ".venv/.setup-done"  # the Makefile's sign that `make setup` finished


@dataclass
class Timeline:
    """Seconds from the start of the clone to each step, and what ran."""

    clone_s: float = 0.0
    setup_s: float | None = None
    serving_s: float | None = None
    notes: dict[str, str] = field(default_factory=dict)


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int, token: str) -> bool:
    """True when JupyterLab on `port` serves /lab."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as r:  # noqa: S310
            return r.status == 200
    except OSError:
        return False


def _jupyter_home(home: Path, port: int, token: str) -> dict[str, str]:
    """Private Jupyter folders whose config gives the server its port and token and no browser."""
    config = home / "config"
    config.mkdir(parents=True)
    server = {"ServerApp": {"ip": "127.0.0.1", "port": port, "port_retries": 0, "open_browser": False},
              "IdentityProvider": {"token": token}}
    (config / "jupyter_server_config.json").write_text(json.dumps(server), encoding="utf-8")
    return {"JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "JUPYTER_DATA_DIR": str(home / "data")}


def _stop(proc: subprocess.Popen) -> None:
    """Stop `make lab` and everything it started (its own process group)."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _log_tail(path: Path, lines: int = 25) -> str:
    """The last lines of a log file."""
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def run_make_lab(clone: Path, work: Path, make_args: list[str], timeout_s: float, t0: float,
                 timeline: Timeline, progress: Any) -> None:
    """Run `make lab` in `clone` until JupyterLab answers; fill in `timeline`."""
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, **_jupyter_home(work / "jupyter", port, token),
           "PIP_CACHE_DIR": str(work / "pip-cache"), "UV_CACHE_DIR": str(work / "uv-cache")}
    env.pop("PIP_NO_CACHE_DIR", None)  # an empty cache folder, so that pip behaves as on a new machine
    log_path = work / "make-lab.log"
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(["make", "lab", *make_args], cwd=clone, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while time.monotonic() - t0 < timeout_s:
                if timeline.setup_s is None and (clone / STAMP).exists():
                    timeline.setup_s = time.monotonic() - t0
                    progress.set_description("starting JupyterLab")
                    progress.update(1)
                if _answers(port, token):
                    timeline.serving_s = time.monotonic() - t0
                    timeline.notes["load_avg_1min_serving"] = f"{os.getloadavg()[0]:.2f}"
                    progress.update(1)
                    return
                if proc.poll() is not None:
                    raise WorkbookError(f"`make lab` exited with code {proc.returncode} before JupyterLab "
                                     f"answered; its log ends:\n{_log_tail(log_path)}")
                progress.refresh()  # keeps the elapsed time moving during the long install
                time.sleep(1)
            raise WorkbookError(f"JupyterLab did not answer within {timeout_s / 60:.0f} min; raise "
                             f"--timeout-min. The log of `make lab` ends:\n{_log_tail(log_path)}")
        finally:
            _stop(proc)
            text = log_path.read_text(encoding="utf-8", errors="replace")
            timeline.notes["installer"] = ("pip (uv failed)" if "uv failed" in text
                                           else "uv + pip for torch" if "with uv" in text else "pip")


def time_fresh_clone(repo: Path = REPO, overlay: tuple[str, ...] = (), make_args: tuple[str, ...] = (),
                     timeout_min: float = 60.0) -> Timeline:
    """Clone `repo`, copy `overlay` files over it, run `make lab` until it serves; return the times."""
    from tqdm.auto import tqdm

    if shutil.which("make") is None or shutil.which("git") is None:
        raise InputError("this needs make and git on PATH: install them (apt-get install -y make git).")
    for rel in overlay:
        if not (repo / rel).is_file():
            raise InputError(f"--overlay {rel}: no such file in {repo}. Name files relative to the repository.")
    print(f"Timing a fresh clone to JupyterLab serving via `make lab`; {expected_time()}.", flush=True)
    timeline = Timeline()
    timeline.notes["load_avg_1min_before"] = f"{os.getloadavg()[0]:.2f}"
    with tempfile.TemporaryDirectory(prefix="fresh-clone-") as tmp, \
            tqdm(total=3, desc="git clone", unit="step") as progress:
        work, clone = Path(tmp), Path(tmp) / "clone"
        t0 = time.monotonic()
        subprocess.run(["git", "clone", "--quiet", str(repo), str(clone)], check=True)
        for rel in overlay:
            shutil.copy2(repo / rel, clone / rel)
        timeline.clone_s = time.monotonic() - t0
        progress.set_description("make lab: installing (the bulk)")
        progress.update(1)
        run_make_lab(clone, work, list(make_args), timeout_min * 60, t0, timeline, progress)
        progress.set_description("serving; now removing the clone")
    timeline.notes["overlay"] = " ".join(overlay)
    timeline.notes["make_args"] = " ".join(make_args)
    return timeline


def expected_time() -> str:
    """What the stored CPU reference says this takes, or a plain estimate when it has no record."""
    from helpers import reference

    rec = reference.lookup(NAME, "cpu")
    if rec is None:
        return "expect several minutes: it downloads and installs torch, JupyterLab and the rest"
    return f"the stored CPU reference took {rec.value:.1f} min ({rec.device}, {rec.date})"


def save(timeline: Timeline, out: Path) -> bench.Record:
    """Record the total and its parts, and write them to `out` as a JSON list of records (helpers.cli's contract)."""
    assert timeline.serving_s is not None
    bench.set_notebook("make lab (fresh clone)")
    rec = bench.record(NAME, timeline.serving_s / 60, "min", clone_s=round(timeline.clone_s, 1),
                       setup_s=round(timeline.setup_s or 0.0, 1),
                       lab_start_s=round(timeline.serving_s - (timeline.setup_s or 0.0), 1),
                       caches="empty pip and uv caches", **timeline.notes)
    with cli.replacing(out, PROG, force_flag=None, instead=INSTEAD) as tmp:
        bench.save_records([rec], tmp)
    return rec


def _command(argv: list[str]) -> int:
    """OUT.json [--overlay FILE ...] [--make ARG ...] [--timeout-min N]."""
    ap = cli.Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="JSON file to write the record to")
    ap.add_argument("--overlay", nargs="*", default=[], help="working-tree files to copy over the clone")
    ap.add_argument("--make", nargs="*", default=[], help="extra make arguments, e.g. INSTALLER=pip")
    ap.add_argument("--timeout-min", type=float, default=60.0, help="give up after this many minutes")
    a = ap.parse_args(argv)
    if a.out.is_dir():
        raise InputError(f"{a.out} is a folder. Pass the JSON file to write, e.g. artifacts/fresh_clone.json.")
    cli.check_output_file(a.out, PROG, force_flag=None, instead=INSTEAD)  # before the long clone and install
    timeline = time_fresh_clone(overlay=tuple(a.overlay), make_args=tuple(a.make), timeout_min=a.timeout_min)
    rec = save(timeline, a.out)
    print(f"{NAME} = {rec.value:.1f} min (clone {timeline.clone_s:.0f} s, make setup "
          f"{rec.extra['setup_s']:.0f} s, JupyterLab start {rec.extra['lab_start_s']:.0f} s; "
          f"{timeline.notes['installer']}), written to {a.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line; bad input is one line on stderr and exit status 2."""
    return cli.run(_command, argv)


if __name__ == "__main__":
    sys.exit(main())
