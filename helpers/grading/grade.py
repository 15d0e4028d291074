"""Batch grading for instructors.

    python -m helpers.grading grade SUBMISSION.ipynb|FOLDER... --out DIR [options]

Before the first kernel starts, every submission and the solutions are copied into a private batch
folder, with an answer-key-free copy of the course package. For each lab the official solution is
graded first on this machine: it must score full marks (else that lab's rows say "not graded"), and
its times set the limits (a factor times what the reference took, never below the given minimums).
Each submission is then graded by its own worker process (helpers.grading.worker) that runs the
student's code in a sandboxed kernel and judges the answers itself. After each submission this
process alone rewrites DIR/gradebook.csv, DIR/summary.csv and DIR/feedback/; DIR/.grading/results.json
lets a re-run skip submissions already graded (unless their file changed).
Exit status: 0 when every submission was graded, 3 when some were not (the grader's failure).

Serves: instructors (batch grading).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Lock

from helpers.errors import InputError
from helpers.grading import jobs as batch_jobs
from helpers.grading import release, sandbox
from helpers.grading.gradebook import Graded, write_feedback, write_gradebook, write_summary
from helpers.grading.runner import RunResult
from helpers.grading.submissions import Submission, discover, file_hash, read_roster

GRADEBOOK, SUMMARY, FEEDBACK, STATE = "gradebook.csv", "summary.csv", "feedback", ".grading"
NOT_GRADED_EXIT = 3


def _validate(paths: Sequence, cell_timeout: float, total_timeout: float, jobs_: int, factor: float) -> None:
    """Clear errors for bad arguments."""
    if not paths:
        raise InputError("no submissions given. Pass notebooks or folders: "
                         "python -m helpers.grading grade submissions/ --out artifacts/grades")
    if cell_timeout <= 0 or total_timeout <= 0:
        raise InputError(f"timeouts must be positive seconds; got cell {cell_timeout}, total {total_timeout}.")
    if not isinstance(jobs_, int) or jobs_ < 1:
        raise InputError(f"jobs must be a whole number of submissions at a time (1 or more); got {jobs_!r}.")
    if factor < 1:
        raise InputError(f"time-factor must be 1 or more (a multiple of the reference time); got {factor}.")


def _previous(out: Path) -> dict[str, dict]:
    """Results of an earlier run of this batch, by submission path (for resuming)."""
    path = out / STATE / "results.json"
    try:
        return {r["path"]: r for r in json.loads(path.read_text(encoding="utf-8"))}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def resume_key(submission_hash: str, s: Submission) -> str:
    """What a grade reused on resume must match: the submission's bytes and its lab's official solution's."""
    solution = file_hash(s.solution) if s.solution is not None and s.solution.is_file() else ""
    return hashlib.sha256(f"{submission_hash}:{solution}".encode()).hexdigest()


def _save_state(out: Path, graded: list[Graded | None], hashes: list[str]) -> None:
    """Write the resumable record of every submission graded so far (atomically)."""
    import dataclasses

    rows = [{"path": str(g.submission.path), "sha256": h, "lab": g.submission.lab,
             "result": dataclasses.asdict(g.result)} for g, h in zip(graded, hashes) if g is not None]
    folder = out / STATE
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".results-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(rows, f)
    os.replace(tmp, folder / "results.json")


def grade(paths: Sequence[str | Path], out: str | Path, *, solutions_dir: str | Path = "solutions",
          cell_timeout: float = 60, total_timeout: float = 600, max_output_chars: int = 20_000,
          jobs: int = 1, quiet: bool = False, sandbox_mode: str = "auto", roster: str | Path | None = None,
          exercises: str | Path | None = None, resume: bool = True, time_factor: float = 5.0) -> list[Graded]:
    """Grade every submission under `paths`; write out/gradebook.csv, summary.csv and feedback/*.md."""
    _validate(paths, cell_timeout, total_timeout, jobs, time_factor)
    mode = sandbox.mode(sandbox_mode)
    subs = discover(list(paths), Path(solutions_dir), read_roster(roster))
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    batch_jobs.adopt_orphans()
    batch = Path(tempfile.mkdtemp(prefix="grading-batch-"))
    try:
        return _grade_batch(subs, out, batch, mode, say, cell_timeout=cell_timeout, total_timeout=total_timeout,
                            max_output_chars=max_output_chars, jobs=jobs, exercises=exercises, resume=resume,
                            factor=time_factor)
    finally:
        shutil.rmtree(batch, ignore_errors=True)



def _grade_batch(subs: list[Submission], out: Path, batch: Path, mode: str, say, *, cell_timeout: float,
                 total_timeout: float, max_output_chars: int, jobs: int, exercises: str | Path | None,
                 resume: bool, factor: float) -> list[Graded]:
    """Copy everything, calibrate each lab, grade the pending submissions, write as each one ends."""
    (batch / "subs").mkdir()
    copies, hashes = [], []
    for i, s in enumerate(subs):  # every submission is copied before any kernel starts
        dest = batch / "subs" / f"{i}.ipynb"
        shutil.copyfile(s.path, dest)
        copies.append(dest)
        hashes.append(file_hash(dest))
    course = release.student_package(batch / "course")
    earlier = _previous(out) if resume else {}
    keys = [resume_key(h, s) for h, s in zip(hashes, subs)]  # a changed solution regrades its lab
    graded: list[Graded | None] = [None] * len(subs)
    pending = []
    for i, s in enumerate(subs):
        old = earlier.get(str(s.path))
        if old and old.get("sha256") == keys[i] and not old["result"].get("not_graded"):
            graded[i] = Graded(s, batch_jobs.result_from_dict(old["result"]))
        else:
            pending.append(i)
    say(f"grading {len(pending)} submission(s) ({len(subs) - len(pending)} already graded), {jobs} at a time, "
        f"sandbox: {mode} …")
    limits = {"cell_timeout": cell_timeout, "total_timeout": total_timeout, "max_output_chars": max_output_chars}
    base = {"course": str(course), "sandbox": mode, "exercises": str(exercises or "")}
    labs = sorted({subs[i].lab for i in pending if subs[i].solution is not None})
    official: dict[str, str] = {}
    for lab in labs:  # the solutions are copied before any kernel starts, too
        (batch / f"cal-{lab}").mkdir()
        sol = next(s.solution for s in subs if s.lab == lab and s.solution is not None)
        shutil.copyfile(sol, batch / f"cal-{lab}" / "solution.ipynb")
        official[lab] = file_hash(batch / f"cal-{lab}" / "solution.ipynb")
    lock = Lock()

    def calibrate(lab: str) -> batch_jobs.Calibration:
        scratch = batch / f"cal-{lab}"
        sol_copy = str(scratch / "solution.ipynb")
        say(f"calibrating {lab} on its official solution …")
        cal = batch_jobs.calibrate(lab, dict(base, notebook=sol_copy, solution=sol_copy, scratch=str(scratch),
                                             expected=str(scratch / "expected.json"), limits=limits), factor)
        if cal.failure:
            say(f"  {cal.failure}")
        return cal

    def one(i: int) -> None:
        s = subs[i]
        cal = cals[s.lab].result() if s.lab in cals else None
        if cal is not None and cal.result is not None and not cal.failure and official[s.lab] == hashes[i]:
            result = cal.result  # the official solution itself: its calibration run is its grading
        else:
            result = _grade_one(i, s, copies[i], batch, base, cal, limits)
        g = Graded(s, result)
        with lock:
            graded[i] = g
            _write(out, graded, keys, {i})
        got, possible = g.points()
        say(f"{s.student}: {s.path.name}: " + (f"not graded ({result.not_graded})" if result.not_graded
                                              else f"{got:g} / {possible:g} points") + f" in {result.seconds:.1f} s")

    with ThreadPoolExecutor(max_workers=jobs) as pool:  # FIFO: every calibration is taken before a submission
        cals = {lab: pool.submit(calibrate, lab) for lab in labs}
        for future in [pool.submit(one, i) for i in pending]:
            future.result()
    done = [g for g in graded if g is not None]
    _write(out, graded, keys, set(range(len(subs))))
    say(f"wrote {out / GRADEBOOK}, {out / SUMMARY} and {len(done)} feedback file(s) in {out / FEEDBACK}")
    return done


def _grade_one(i: int, s: Submission, copy: Path, batch: Path, base: dict, cal: batch_jobs.Calibration | None,
               limits: dict) -> RunResult:
    """Grade one submission with its lab's calibration."""
    if s.solution is None:
        return RunResult([], notes=[f"no solution notebook matches '{s.path.name}'; name it like "
                                    f"labNN_topic__student.ipynb"])
    if cal is None or cal.failure:
        return RunResult([], not_graded=cal.failure if cal else "the lab was not calibrated")
    scratch = batch / f"job-{i}"
    scratch.mkdir()
    job_limits = dict(limits, cell_timeout=cal.cell_timeout, total_timeout=cal.total_timeout)
    job = dict(base, mode="grade", notebook=str(copy), solution=str(batch / f"cal-{s.lab}" / "solution.ipynb"),
               expected=str(cal.expected), scratch=str(scratch), limits=job_limits, test_limits=cal.test_limits)
    try:
        return batch_jobs.run_job(job, cal.total_timeout + batch_jobs.MARGIN_S)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write(out: Path, graded: list[Graded | None], hashes: list[str], changed: set[int]) -> None:
    """Rewrite the gradebook, the summary, the changed feedback files and the resumable state."""
    done = [g for g in graded if g is not None]
    index = {id(g): k for k, g in enumerate(done)}
    write_gradebook(done, out / GRADEBOOK)
    write_summary(done, out / SUMMARY)
    write_feedback(done, out / FEEDBACK, only={index[id(graded[i])] for i in changed if graded[i] is not None})
    _save_state(out, graded, hashes)


def exit_status(graded: list[Graded]) -> int:
    """0 when every submission was graded, NOT_GRADED_EXIT when the grader failed on some."""
    return NOT_GRADED_EXIT if any(g.result.not_graded for g in graded) else 0


def main(argv: list[str]) -> int:
    """Command line for `python -m helpers.grading grade`."""
    ap = argparse.ArgumentParser(prog="python -m helpers.grading grade", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="submitted notebooks or folders of them")
    ap.add_argument("--out", default="artifacts/grades", help="where gradebook.csv, summary.csv and feedback/ go")
    ap.add_argument("--solutions", default="solutions", help="folder of solution notebooks")
    ap.add_argument("--cell-timeout", type=float, default=60, help="minimum seconds per cell (default 60)")
    ap.add_argument("--total-timeout", type=float, default=600, help="minimum seconds per submission (default 600)")
    ap.add_argument("--time-factor", type=float, default=5.0,
                    help="limits are this many times the official solution's time here (default 5)")
    ap.add_argument("--max-output", type=int, default=20_000, help="output characters kept per cell")
    ap.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time (default 1)")
    ap.add_argument("--sandbox", default="auto", choices=sandbox.MODES,
                    help="bwrap (namespaces), plain, or auto: bwrap where it works (default)")
    ap.add_argument("--roster", help="CSV of alias,student rows mapping names and ids to students")
    ap.add_argument("--fresh", action="store_true", help="grade everything again (ignore earlier results)")
    ap.add_argument("--exercises", help="a folder of extra labNN.py answer-key modules")
    args = ap.parse_args(argv)
    try:
        graded = grade(args.paths, args.out, solutions_dir=args.solutions, cell_timeout=args.cell_timeout,
                       total_timeout=args.total_timeout, max_output_chars=args.max_output, jobs=args.jobs,
                       sandbox_mode=args.sandbox, roster=args.roster, exercises=args.exercises,
                       resume=not args.fresh, time_factor=args.time_factor)
    except InputError as err:
        print(f"error: {err}")
        return 2
    status = exit_status(graded)
    if status:
        print(f"{sum(bool(g.result.not_graded) for g in graded)} submission(s) were not graded (the grader's own "
              f"failure; see the gradebook's status column). Fix the cause and run again: graded ones are kept.")
    return status
