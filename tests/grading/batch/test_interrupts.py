"""The first Ctrl-C (SIGINT), SIGTERM, SIGHUP (a closed terminal) or SIGQUIT (Ctrl-\\) of a real grade batch stops it within 5 s: nothing left running, nothing
left in $TMPDIR, one line and a non-zero exit without a traceback, a gradebook that matches its resumable
record; and running the same command again completes the batch with no row lost or duplicated. The rerun reads only
what the stopped batch saved, which each signal's test checks: it runs once, after the Ctrl-C."""

from __future__ import annotations

import csv
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from tests.support.grading import ADD, LAB, MUL, student_nb, write_exercises, write_nb, write_solution

ROOT = Path(__file__).resolve().parents[3]
SLOW = "import time\ntime.sleep(3)"  # still running when the signal comes (1 s after the quick one)


def _rows(out: Path) -> list[dict]:
    """The gradebook's rows ([] before the first one is written)."""
    path = out / "gradebook.csv"
    return list(csv.DictReader(path.open(encoding="utf-8"))) if path.is_file() else []


def _ours(marker: str) -> list[str]:
    """Processes whose command line or environment mention `marker` (this test's $TMPDIR)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            text = (p / "cmdline").read_bytes() + (p / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in text:
            found.append(f"{p.name}: {(p / 'cmdline').read_bytes()[:120]!r}")
    return found


def _batch(tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    """The command, environment and output folder of a small batch whose later submissions are slow."""
    write_solution(tmp_path / "solutions")
    keys = write_exercises(tmp_path / "keys")
    subs = tmp_path / "subs"
    write_nb(subs / f"{LAB}__a_quick.ipynb", student_nb(ADD, MUL))
    for name in ("b_slow", "c_slow", "d_slow"):
        write_nb(subs / f"{LAB}__{name}.ipynb", student_nb(ADD, SLOW, MUL))
    scratch = Path(tempfile.mkdtemp(prefix="gi-", dir="/tmp"))  # short: the kernels' socket paths must fit
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "instructors.batch", "grade", str(subs), "--out", str(out),
           "--solutions", str(tmp_path / "solutions"), "--exercises", str(keys), "--jobs", "2",
           "--cell-timeout", "60", "--total-timeout", "120", "--time-factor", "2"]
    env = dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=str(ROOT))
    return cmd, env, out


@pytest.mark.slow
@pytest.mark.parametrize("signum, resume", [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, False)],
                         ids=["SIGINT-then-rerun", "SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_batch_cleanly_and_a_rerun_resumes(tmp_path: Path, signum: int, resume: bool) -> None:
    cmd, env, out = _batch(tmp_path)
    try:
        _stop_then_resume(cmd, env, out, signum, resume)
    finally:
        shutil.rmtree(env["TMPDIR"], ignore_errors=True)


def test_every_signal_that_would_end_a_batch_stops_it_cleanly_instead() -> None:
    """SIGQUIT takes the same path as the three signals above (a real batch each): the same handler."""
    from instructors.batch import interrupts

    with interrupts.stoppable() as stop:
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}
    assert all(h == stop.handle for h in handlers.values()), handlers


def _stop_then_resume(cmd: list[str], env: dict[str, str], out: Path, signum: int, resume: bool) -> None:
    """Signal the batch once the quick submission is graded, check everything, run it again (when `resume`)."""
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    limit = time.monotonic() + 240
    while not _rows(out) and proc.poll() is None and time.monotonic() < limit:
        time.sleep(0.2)  # until the quick submission is graded: the slow ones are running now
    assert proc.poll() is None and [r["status"] for r in _rows(out)] == ["graded"], proc.communicate()
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert took < 5, f"took {took:.1f} s to stop"
    assert proc.returncode == 128 + signum, (stdout, stderr)
    assert "Traceback" not in stderr + stdout, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stopped after ") and lines[0].endswith(
        "of 4; run the same command again to resume"), stderr
    time.sleep(0.5)
    assert _ours(env["TMPDIR"]) == [], "processes left running"
    assert list(Path(env["TMPDIR"]).iterdir()) == [], "scratch left in $TMPDIR"

    rows = _rows(out)
    state = json.loads((out / ".grading" / "results.json").read_text(encoding="utf-8"))
    assert sorted(r["submission"] for r in rows) == sorted(r["path"] for r in state)  # consistent
    assert 1 <= len(rows) < 4 and all(r["status"] == "graded" for r in rows)
    assert lines[0] == f"stopped after {len(rows)} of 4; run the same command again to resume"
    assert len(list((out / "feedback").glob("*.md"))) == len(rows)
    if not resume:
        return

    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr
    after = _rows(out)
    assert sorted(r["student"] for r in after) == ["a_quick", "b_slow", "c_slow", "d_slow"]
    assert all(r["points"] == "5" for r in after), after
    assert {r["submission"]: r["points"] for r in rows}.items() <= {r["submission"]: r["points"] for r in after}.items()
    assert list(Path(env["TMPDIR"]).iterdir()) == []
