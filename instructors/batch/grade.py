"""Batch grading for instructors.

    python -m instructors.batch grade SUBMISSION.ipynb|FOLDER... --out DIR [options]

Before the first kernel starts, every submission and the solutions are copied into a private batch
folder, with an answer-key-free copy of the course package. For each lab the official solution is
graded first on this machine: it must score full marks (else that lab's rows say "not graded"), and
its times set the limits (a factor times what the reference took, never below the given minimums).
Each submission is then graded by its own worker process (instructors.batch.worker) that runs the
student's code in a sandboxed kernel and judges the answers itself. After each submission this
process alone rewrites DIR/gradebook.csv, DIR/summary.csv, DIR/manual.csv (the questions read by the
instructor, instructors.batch.manual) and DIR/feedback/; DIR/.grading/results.json
lets a re-run skip submissions already graded (unless their file changed). Each kernel runs under
resource limits (instructors.batch.limits); cells a student may not edit are restored from the
lab's current version first (instructors.batch.overwrite). The first Ctrl-C, SIGTERM, SIGHUP or SIGQUIT stops the
batch cleanly (instructors.batch.interrupts); --shard I/N and --merge spread one batch over many
machines (instructors.batch.shards); --overrides FILE merges an instructor's corrections.
Exit status: 0 when every submission was graded, 3 when some were not (the grader's failure), 2 for
bad input, 128 + the signal's number when interrupted.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Lock

from helpers import cli
from helpers.errors import InputError
from instructors.batch import interrupts, limits, manual, options, release, sandbox, shards
from instructors.batch import jobs as batch_jobs
from instructors.batch import overrides as corrections
from instructors.batch.gradebook import (Graded, gradebook_rows, manual_rows, write_feedback, write_gradebook,
                                         write_skipped, write_summary)
from instructors.batch.runner import RunResult
from instructors.batch.submissions import Submission, discover, file_hash, read_roster, skipped_files

GRADEBOOK, SUMMARY, FEEDBACK, STATE, SKIPPED = "gradebook.csv", "summary.csv", "feedback", ".grading", "skipped.csv"
NOT_GRADED_EXIT = 3
PROG = "python -m instructors.batch grade"  # as the output folder's marker names it


def _finite(x: object) -> bool:
    """True for a real number that is not NaN or infinite."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _validate(paths: Sequence, cell_timeout: float, total_timeout: float, jobs_: int, factor: float,
              max_output: int = 20_000) -> None:
    """Clear errors for bad arguments (NaN, infinities and out-of-range values included)."""
    if not paths:
        raise InputError("no submissions given. Pass notebooks or folders: "
                         "python -m instructors.batch grade submissions/ --out artifacts/grades")
    if not (_finite(cell_timeout) and _finite(total_timeout)) or cell_timeout <= 0 or total_timeout <= 0:
        raise InputError(f"timeouts must be positive, finite seconds; got cell {cell_timeout}, total {total_timeout}.")
    if isinstance(jobs_, bool) or not isinstance(jobs_, int) or jobs_ < 1:
        raise InputError(f"jobs must be a whole number of submissions at a time (1 or more); got {jobs_!r}.")
    if not _finite(factor) or factor < 1:
        raise InputError(f"time-factor must be a finite number, 1 or more (a multiple of the reference time); "
                         f"got {factor}.")
    if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 1:
        raise InputError(f"max-output must be a whole number of characters, 1 or more; got {max_output!r}.")


SOCKET_PATH_MAX = 100  # a kernel's socket path must fit in 107 bytes (Linux sun_path), with room for its name


def _cal(batch: Path, lab: str) -> Path:
    """A lab's calibration folder (short, so the kernel's socket path stays short)."""
    return batch / f"cal-{hashlib.sha256(lab.encode()).hexdigest()[:8]}"


def _check_tmpdir() -> None:
    """Refuse a $TMPDIR whose path is too long for the graded kernels' sockets, before any work."""
    longest = len(os.path.join(tempfile.gettempdir(), "grading-batch-12345678", "job-99999", "conn99", "kernel-ipc-99"))
    if longest > SOCKET_PATH_MAX:
        raise InputError(f"TMPDIR={tempfile.gettempdir()} is too long a path for the graded kernels' sockets "
                         f"(at most {SOCKET_PATH_MAX - longest + len(tempfile.gettempdir())} characters). Set "
                         f"TMPDIR to a shorter folder, e.g. TMPDIR=/tmp.")


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
    rows = [shards.state_row(g, h) for g, h in zip(graded, hashes) if g is not None]
    folder = out / STATE
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".results-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(rows, f)
    os.replace(tmp, folder / "results.json")


def grade(paths: Sequence[str | Path], out: str | Path, *, solutions_dir: str | Path = "solutions",
          cell_timeout: float = 60, total_timeout: float = 600, max_output_chars: int = 20_000,
          jobs: int = 1, quiet: bool = False, sandbox_mode: str = "auto", roster: str | Path | None = None,
          exercises: str | Path | None = None, resume: bool = True, time_factor: float = 5.0,
          resources: limits.Resources | None = None, shard: tuple[int, int] | None = None,
          overrides: str | Path | None = None) -> list[Graded]:
    """Grade every submission under `paths` (or this shard's part); write out/gradebook.csv, summary.csv,
    skipped.csv and feedback/*.md. Raises interrupts.Interrupted when stopped by a signal (interrupts.SIGNALS)."""
    _validate(paths, cell_timeout, total_timeout, jobs, time_factor, max_output_chars)
    res = resources or limits.Resources()
    limits.validate(res)
    _check_tmpdir()
    mode = sandbox.mode(sandbox_mode)
    every = discover(list(paths), Path(solutions_dir), read_roster(roster))
    subs, places = shards.select(every, shard)
    out = Path(out).resolve()
    given, instead = [solutions_dir, *paths], "a new or empty folder, e.g. --out artifacts/grades"
    cli.check_output_dir(out, PROG, keep=True, inputs=given, instead=instead)  # never a folder it did not write,
    shards.refuse_other_part(out / STATE, out, shard)  # decided before anything there is read
    fixes, marks = _corrections(every, out, overrides)
    cli.claim_output_dir(out, PROG, keep=True, inputs=given, instead=instead)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    if overrides is None and fixes:
        say(f"applying the {len(fixes)} override line(s) last given for {out}; pass --overrides FILE to change them")
    corrections.keep(out / STATE, fixes)
    shards.save(out / STATE, shard, places, len(every), subs, shards.identity(every))
    skipped = skipped_files(list(paths))
    write_skipped(skipped, out / SKIPPED)
    for path, why in skipped:
        say(f"not graded: {path}: {why}")
    with interrupts.stoppable() as stop:
        batch_jobs.adopt_orphans()
        batch = Path(tempfile.mkdtemp(prefix="grading-batch-"))
        groups = limits.make_parent(batch.name)
        try:
            return _grade_batch(subs, out, batch, mode, say, cell_timeout=cell_timeout, total_timeout=total_timeout,
                                max_output_chars=max_output_chars, jobs=jobs, exercises=exercises, resume=resume,
                                factor=time_factor, stop=stop, fixes=fixes, marks=marks,
                                extra={"resources": res.to_dict(), "cgroups": groups})
        finally:
            batch_jobs.kill_leftovers()
            for g in groups:
                limits.remove_tree(g)
            shutil.rmtree(batch, ignore_errors=True)


def _corrections(every: list[Submission], out: Path, overrides: str | Path | None
                 ) -> tuple[list[dict[str, str]], dict]:
    """The overrides (given, else the last ones given for `out`), checked against the whole batch, and the
    points filled into out/manual.csv; refuses before any work."""
    fixes = corrections.read(overrides) if overrides is not None else corrections.recall(out / STATE)
    maxima = {s.lab: manual.maxima(s.solution) for s in every}
    corrections.validate(fixes, [(s.student, s.lab, str(s.path)) for s in every], maxima)
    corrections.refuse_hand_edits(out, out / STATE, (GRADEBOOK, SUMMARY))
    return fixes, manual.read_marks(out / manual.MANUAL)


def _grade_batch(subs: list[Submission], out: Path, batch: Path, mode: str, say, *, cell_timeout: float,
                 total_timeout: float, max_output_chars: int, jobs: int, exercises: str | Path | None,
                 resume: bool, factor: float, stop: interrupts.Stop, fixes: list[dict[str, str]],
                 marks: dict, extra: dict) -> list[Graded]:
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
    base = {"course": str(course), "sandbox": mode, "exercises": str(exercises or ""), **extra}
    labs = sorted({subs[i].lab for i in pending if subs[i].solution is not None})
    official: dict[str, str] = {}
    for lab in labs:  # the solutions are copied before any kernel starts, too
        (_cal(batch, lab)).mkdir()
        sol = next(s.solution for s in subs if s.lab == lab and s.solution is not None)
        shutil.copyfile(sol, _cal(batch, lab) / "solution.ipynb")
        official[lab] = file_hash(_cal(batch, lab) / "solution.ipynb")
    lock = Lock()
    stop.check(len(subs) - len(pending), len(subs))

    def calibrate(lab: str) -> batch_jobs.Calibration:
        scratch = _cal(batch, lab)
        sol_copy = str(scratch / "solution.ipynb")
        say(f"calibrating {lab} on its official solution …")
        cal = batch_jobs.calibrate(lab, dict(base, notebook=sol_copy, solution=sol_copy, scratch=str(scratch),
                                             expected=str(scratch / "expected.json"), limits=limits), factor)
        if cal.failure:
            say(f"  {cal.failure}")
        return cal

    def one(i: int) -> None:
        s = subs[i]
        try:
            if batch_jobs.STOP.is_set():
                return
            cal = cals[s.lab].result() if s.lab in cals else None
            if cal is not None and cal.result is not None and not cal.failure and official[s.lab] == hashes[i]:
                result = cal.result  # the official solution itself: its calibration run is its grading
            else:
                result = _grade_one(i, s, copies[i], batch, base, cal, limits)
        except batch_jobs.Stopped:
            return  # interrupted: not recorded, so the next run grades it
        if not result.not_graded:  # the questions read by the instructor, with the answers as handed in
            result = dataclasses.replace(result, manual=manual.answers(copies[i], s.solution))
        g = Graded(s, result)
        with lock:
            graded[i] = g
            _write(out, graded, keys, {i}, fixes, marks)
        got, possible = g.points()
        say(f"{s.student}: {s.path.name}: " + (f"not graded ({result.not_graded})" if result.not_graded
                                              else f"{got:g} / {possible:g} points") + f" in {result.seconds:.1f} s"
            + (f" (+ {g.possible() - possible:g} read by you: manual.csv)" if result.manual else ""))

    with ThreadPoolExecutor(max_workers=jobs) as pool:  # FIFO: every calibration is taken before a submission
        cals = {lab: pool.submit(calibrate, lab) for lab in labs}
        for future in [pool.submit(one, i) for i in pending]:
            future.result()
    done = [g for g in graded if g is not None]
    _write(out, graded, keys, set(range(len(subs))), fixes, marks)
    stop.check(len(done), len(subs))
    say(f"wrote {out / GRADEBOOK}, {out / SUMMARY}, {out / manual.MANUAL} and {len(done)} feedback file(s) in "
        f"{out / FEEDBACK}")
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
    job = dict(base, mode="grade", notebook=str(copy), solution=str(_cal(batch, s.lab) / "solution.ipynb"),
               expected=str(cal.expected), scratch=str(scratch), limits=job_limits, test_limits=cal.test_limits)
    try:
        return batch_jobs.run_job(job, cal.total_timeout + batch_jobs.MARGIN_S)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write(out: Path, graded: list[Graded | None], hashes: list[str], changed: set[int],
           fixes: list[dict[str, str]] | None = None, marks: dict | None = None) -> None:
    """Rewrite the gradebook, the summary, manual.csv, the changed feedback files and the resumable state."""
    done = [g for g in graded if g is not None]
    index = {id(g): k for k, g in enumerate(done)}
    _, rows = gradebook_rows(done, fixes, marks)
    corrected = {r["submission"]: float(r["points"]) for r in rows if r.get("points")}
    write_gradebook(done, out / GRADEBOOK, fixes, marks)
    write_summary(done, out / SUMMARY, corrected)
    manual.write(manual_rows(done, marks), out / manual.MANUAL)
    write_feedback(done, out / FEEDBACK, only={index[id(graded[i])] for i in changed if graded[i] is not None})
    _save_state(out, graded, hashes)
    corrections.remember(out, out / STATE, (GRADEBOOK, SUMMARY))


def merge(folders: Sequence[str | Path], out: str | Path, overrides: str | Path | None = None) -> list[Graded]:
    """Merge the output folders of a batch's shards into one gradebook, summary and feedback in `out`."""
    graded, keys = shards.collect([Path(f) for f in folders], STATE)
    out = Path(out).resolve()
    cli.check_output_dir(out, PROG, keep=True, inputs=list(folders), instead="a new or empty folder for the merge")
    fixes, marks = _corrections([g.submission for g in graded], out, overrides)
    cli.claim_output_dir(out, PROG, keep=True, inputs=list(folders), instead="a new or empty folder for the merge")
    corrections.keep(out / STATE, fixes)
    _write(out, list(graded), keys, set(range(len(graded))), fixes, marks)
    return graded


def exit_status(graded: list[Graded]) -> int:
    """0 when every submission was graded, NOT_GRADED_EXIT when the grader failed on some."""
    return NOT_GRADED_EXIT if any(g.result.not_graded for g in graded) else 0


def main(argv: list[str]) -> int:
    """Command line for `python -m instructors.batch grade`."""
    ap = cli.Parser(prog="python -m instructors.batch grade", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="submitted notebooks or folders of them")
    ap.add_argument("--out", default="artifacts/grades", help="where gradebook.csv, summary.csv and feedback/ go")
    ap.add_argument("--solutions", default="solutions", help="folder of solution notebooks")
    ap.add_argument("--cell-timeout", type=options.seconds, default=60, help="minimum seconds per cell (default 60)")
    ap.add_argument("--total-timeout", type=options.seconds, default=600, help="minimum seconds per submission (default 600)")
    ap.add_argument("--time-factor", type=options.factor, default=5.0,
                    help="limits are this many times the official solution's time here (default 5)")
    ap.add_argument("--max-output", type=cli.positive_int, default=20_000, help="output characters kept per cell")
    ap.add_argument("--jobs", type=cli.positive_int, default=1, help="submissions graded at the same time (default 1)")
    ap.add_argument("--sandbox", default="auto", choices=sandbox.MODES,
                    help="bwrap (namespaces), plain, or auto: bwrap where it works (default)")
    ap.add_argument("--roster", help="CSV with a header row (e.g. alias,student) mapping names and ids to students")
    ap.add_argument("--fresh", action="store_true", help="grade everything again (ignore earlier results)")
    ap.add_argument("--exercises", help="a folder of extra labNN.py answer-key modules")
    ap.add_argument("--overrides", help="your CSV of corrections and added columns (student,lab,...), merged")
    ap.add_argument("--memory", type=options.size(limits.GIB), default=limits.Resources.memory_bytes,
                    help="GiB of memory per kernel: address space and cgroup (default 8; 0: no limit)")
    ap.add_argument("--cpu-time", type=options.whole, default=0,
                    help="CPU seconds per kernel process (default: twice the submission's total time)")
    ap.add_argument("--max-file-size", type=options.size(limits.MIB),
                    default=limits.Resources.file_bytes, help="MiB, the largest file a kernel writes (default 1024)")
    ap.add_argument("--max-processes", type=options.whole, default=limits.Resources.processes,
                    help="processes and threads per kernel (default 2048)")
    ap.add_argument("--tmp-size", type=options.size(limits.MIB), default=limits.Resources.tmp_bytes,
                    help="MiB of the kernel's private /tmp under bubblewrap (default 512)")
    ap.add_argument("--shard", type=shards.parse, help="grade part I of N of the batch (0 <= I < N): see --merge")
    ap.add_argument("--merge", nargs="+", metavar="SHARD_OUT", help="merge the --out folders of a batch's shards")
    try:
        args = ap.parse_args(argv)
        if args.merge:
            if args.paths or args.shard:
                raise InputError("--merge takes the shards' output folders only: no submissions and no --shard.")
            graded = merge(args.merge, args.out, overrides=args.overrides)
            print(f"merged {len(graded)} submission(s) of {len(args.merge)} shard(s) into {Path(args.out)}")
        else:
            res = limits.Resources(args.memory, args.cpu_time, args.max_file_size, args.max_processes, args.tmp_size)
            graded = grade(args.paths, args.out, solutions_dir=args.solutions, cell_timeout=args.cell_timeout,
                           total_timeout=args.total_timeout, max_output_chars=args.max_output, jobs=args.jobs,
                           sandbox_mode=args.sandbox, roster=args.roster, exercises=args.exercises,
                           resume=not args.fresh, time_factor=args.time_factor, resources=res, shard=args.shard,
                           overrides=args.overrides)
    except InputError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except interrupts.Interrupted as stopped:
        print(stopped, file=sys.stderr)
        return stopped.exit_status()
    except KeyboardInterrupt:  # before the batch started or after it ended: nothing to clean up
        print("stopped before grading started or after it ended; run the same command again", file=sys.stderr)
        return 130
    status = exit_status(graded)
    if status:
        print(f"{sum(bool(g.result.not_graded) for g in graded)} submission(s) were not graded (the grader's own "
              f"failure; see the gradebook's status column). Fix the cause and run again: graded ones are kept.")
    return status
