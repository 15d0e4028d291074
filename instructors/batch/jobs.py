"""The batch's side of a worker: start it in its own session, give it its job on stdin, read its
result (only a result line carrying the job's secret, from a worker that exited normally), retry
when it dies, and calibrate each lab's time limits on the official solution. ``stop_all`` (an
interrupt) kills every running worker's process group and lets no new one start.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instructors.batch import procs, sandbox
from instructors.batch.runner import RunResult, TestOutcome
from instructors.batch.worker import PROGRESS, RESULT

# The folder that holds this grader's own helpers package: the worker imports it from there even where the
# course is not pip-installed (a plain checkout run from its root), since the worker starts in a scratch folder.
GRADER_ROOT = Path(__file__).resolve().parents[2]

WORKER_ATTEMPTS = 3
MIN_TEST_S = 30.0   # no test case gets less than this, however fast the reference was
MARGIN_S = 180.0    # a worker gets its submission's total time plus this, then it is killed
CALIBRATION_LIMITS = {"cell_timeout": 900.0, "total_timeout": 3600.0}  # the reference run is measured, not limited
_LIVE: set[int] = set()
_KEEP: set[int] = set()  # the batch process's own children from before grading started
_LOCK = threading.Lock()
STOP = threading.Event()  # set by an interrupt: no worker starts, running ones are killed


class Stopped(Exception):
    """The batch was interrupted: this job's result does not count (it is graded on the next run)."""


def stop_all() -> None:
    """Stop the batch: no new worker starts, and every running worker's process group is killed now."""
    STOP.set()
    with _LOCK:
        live = list(_LIVE)
    for pid in live:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def kill_leftovers() -> None:
    """Kill every descendant of the batch that is not one of its own children from before grading."""
    procs.kill_descendants(keep=set(_KEEP))


def adopt_orphans() -> None:
    """Make this process the reaper of what submissions leave behind; remember its own children."""
    procs.become_subreaper()
    _KEEP.update(procs.descendants())


@dataclass
class Calibration:
    """What the official solution of one lab did on this machine, and the limits derived from it."""

    lab: str
    expected: Path
    cell_timeout: float
    total_timeout: float
    test_limits: dict[str, float] = field(default_factory=dict)
    failure: str = ""  # why the official solution did not score full marks (then the lab is not graded)
    seconds: float = 0.0
    result: RunResult | None = None  # the official solution's own grading


def result_from_dict(d: dict) -> RunResult:
    """A RunResult from a worker's JSON."""
    return RunResult([TestOutcome(**o) for o in d.get("outcomes", [])],
                     [tuple(e) for e in d.get("cell_errors", [])], list(d.get("notes", [])),
                     float(d.get("seconds", 0.0)), str(d.get("not_graded", "")),
                     list(d.get("cell_seconds", [])), list(d.get("manual", [])))


def _run_once(job: dict, timeout: float) -> tuple[dict | None, str, str]:
    """Run one worker; return (result or None, last progress line, why it failed)."""
    nonce = secrets.token_hex(16)
    if STOP.is_set():
        raise Stopped
    with _LOCK:  # started and registered in one step: another job's clean-up never sees it unregistered
        proc = subprocess.Popen([sys.executable, "-m", "instructors.batch.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                cwd=job["scratch"], env=_worker_env())
        _LIVE.add(proc.pid)
    if STOP.is_set():  # stopped while it started: stop_all may not have seen it
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        out, err = proc.communicate(json.dumps(dict(job, nonce=nonce)).encode(), timeout=timeout)
        why = "" if proc.returncode == 0 else (f"the grading worker ended with status {proc.returncode}"
                                               + _last_line(err))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        why = f"the grading worker did not finish within {timeout:.0f} s"
    finally:
        with _LOCK:
            _LIVE.discard(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything left in the worker's session
        except OSError:
            pass
        with _LOCK:
            procs.kill_descendants(keep=set(_LIVE) | _KEEP)
    if STOP.is_set():
        raise Stopped
    lines = out.decode(errors="replace").splitlines()
    progress = [ln[len(PROGRESS):] for ln in lines if ln.startswith(PROGRESS)]
    last = progress[-1] if progress else ""
    if why:
        return None, last, why
    for ln in reversed(lines):
        if ln.startswith(f"{RESULT}{nonce} "):
            return json.loads(ln[len(RESULT) + len(nonce) + 1:]), last, ""
    return None, last, "the grading worker sent no result"


def _worker_env() -> dict[str, str]:
    """The worker's environment: this one, one thread per library, and the grader's package first on its path."""
    path = os.pathsep.join(p for p in (str(GRADER_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**sandbox.ONE_THREAD, **os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": path}


def _last_line(err: bytes) -> str:
    """': <the worker's last line on stderr>' (its own error, never the student's output), or ''."""
    lines = [ln.strip() for ln in err.decode(errors="replace").splitlines() if ln.strip()]
    return f": {lines[-1][:300]}" if lines else ""


def run_job(job: dict, timeout: float) -> RunResult:
    """Run a worker, retrying when it dies: the cell or test it was at is skipped on the retry."""
    job = dict(job, skip=list(job.get("skip", [])), bad_tests=dict(job.get("bad_tests", {})))
    notes: list[str] = []
    why = ""
    for _ in range(WORKER_ATTEMPTS):
        result, last, why = _run_once(job, timeout)
        if result is not None:
            r = result_from_dict(result)
            r.notes = notes + r.notes
            return r
        if last.startswith("cell "):
            i = int(last.split()[1])
            job["skip"].append(i)
            notes.append(f"code cell {i + 1} stopped the grading worker ({why}); it was skipped on a fresh worker")
        elif last.startswith("test "):
            gid = last.split(" ", 1)[1]
            job["bad_tests"][gid] = "this test stopped the grading worker while calling your code"
            notes.append(f"test {gid} stopped the grading worker ({why})")
        else:
            notes.append(why)
    return RunResult([], notes=notes, not_graded=why or "the grading worker kept failing")


def calibrate(lab: str, job: dict, factor: float) -> Calibration:
    """Grade the official solution; derive this lab's time limits from how long it took here."""
    expected = Path(job["expected"])
    limits = dict(job["limits"], **CALIBRATION_LIMITS)
    r = run_job(dict(job, mode="calibrate", limits=limits), limits["total_timeout"] + MARGIN_S)
    cal = Calibration(lab, expected, job["limits"]["cell_timeout"], job["limits"]["total_timeout"],
                      seconds=r.seconds, result=r)
    lost = [f"{o.grade_id}: {o.message}" for o in r.outcomes if not o.passed]
    if r.not_graded or lost or not expected.is_file():
        cal.failure = (f"the official solution of {lab} did not score full marks on this machine "
                       f"({r.not_graded or '; '.join(lost)[:500] or 'no expected answers'})")
        return cal
    cal.cell_timeout = max(cal.cell_timeout, factor * max(r.cell_seconds, default=0.0))
    cal.total_timeout = max(cal.total_timeout, factor * r.seconds)
    cal.test_limits = {o.grade_id: max(MIN_TEST_S, factor * o.seconds) for o in r.outcomes}
    return cal


def calibration_dict(cal: Calibration) -> dict[str, Any]:
    """A Calibration as JSON-ready data (for the batch's record)."""
    return {"lab": cal.lab, "cell_timeout": cal.cell_timeout, "total_timeout": cal.total_timeout,
            "test_limits": cal.test_limits, "failure": cal.failure, "seconds": cal.seconds}
