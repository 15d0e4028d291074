"""Batch grading for instructors.

    python -m helpers.grading grade SUBMISSION.ipynb|FOLDER... --out DIR [options]

Each submission is copied to a temporary folder and run in a fresh kernel (started in another,
empty, temporary folder) with a per-cell and a total timeout. Then the graded test cells of the
matching solutions/<lab>.ipynb (hidden tests included) run against what the student defined;
a test cell scores its points when it raises nothing. Only after every kernel has ended does
this process write DIR/gradebook.csv and DIR/feedback/<student>__<lab>.md.
Submissions are matched by file name: lab04_topic__alice.ipynb or alice/lab04_topic.ipynb.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from helpers.errors import InputError
from helpers.grading.gradebook import Graded, write_feedback, write_gradebook
from helpers.grading.runner import RunResult, TestOutcome, TestCell, run_submission
from helpers.grading.submissions import Submission, discover, file_hash, graded_tests, is_test_cell

GRADEBOOK = "gradebook.csv"
FEEDBACK = "feedback"


def _zero(tests: list[TestCell], why: str) -> RunResult:
    """A result that scores every test zero for one reason."""
    return RunResult([TestOutcome(t.grade_id, 0.0, t.points, False, why) for t in tests], notes=[why])


def _require_kernel(name: str) -> None:
    """Fail early, with the fix, when the kernel to grade with is not installed."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        raise InputError(f"no Jupyter kernel named {name!r}. See `jupyter kernelspec list`, or "
                         f"leave --kernel at python3 (the grader's own Python).") from None


def grade_one(sub: Submission, *, cell_timeout: float = 60, total_timeout: float = 600,
              max_output_chars: int = 20_000, kernel_name: str = "python3") -> RunResult:
    """Grade one submission (read from a temporary copy; the original is never opened for writing)."""
    if sub.solution is None:
        return RunResult([], notes=[f"no solution notebook matches '{sub.path.name}'; name it like "
                                    f"labNN_topic__student.ipynb"])
    tests = graded_tests(json.loads(sub.solution.read_text(encoding="utf-8")))
    before = file_hash(sub.path)
    with tempfile.TemporaryDirectory(prefix="submission-") as tmp:  # gone before the kernel starts
        copy = Path(tmp) / "submission.ipynb"
        shutil.copyfile(sub.path, copy)
        try:
            nb = nbformat.read(copy, as_version=4)
        except Exception as exc:  # noqa: BLE001 - any unreadable file scores zero, with the reason
            return _zero(tests, f"the file is not a readable notebook ({type(exc).__name__}: {exc})"[:400])
    nb.cells = [c for c in nb.cells if not is_test_cell(c)]  # the solution's tests replace them
    result = run_submission(nb, tests, kernel_name=kernel_name, cell_timeout=cell_timeout,
                            total_timeout=total_timeout, max_output_chars=max_output_chars)
    if file_hash(sub.path) != before:
        result.notes.append("the submitted file changed on disk while it was graded")
    return result


def grade(paths: list[str | Path], out: str | Path, *, solutions_dir: str | Path = "solutions",
          cell_timeout: float = 60, total_timeout: float = 600, max_output_chars: int = 20_000,
          kernel_name: str = "python3", jobs: int = 1, quiet: bool = False) -> list[Graded]:
    """Grade every submission under `paths`; then write out/gradebook.csv and out/feedback/*.md."""
    if not paths:
        raise InputError("no submissions given. Pass notebooks or folders: "
                         "python -m helpers.grading grade submissions/ --out artifacts/grades")
    if cell_timeout <= 0 or total_timeout <= 0:
        raise InputError(f"timeouts must be positive seconds; got cell {cell_timeout}, total {total_timeout}.")
    if not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a whole number of kernels at a time (1 or more); got {jobs!r}.")
    _require_kernel(kernel_name)
    subs = discover(list(paths), Path(solutions_dir))

    def one(sub: Submission) -> Graded:
        try:
            result = grade_one(sub, cell_timeout=cell_timeout, total_timeout=total_timeout,
                               max_output_chars=max_output_chars, kernel_name=kernel_name)
        except Exception as exc:  # noqa: BLE001 - one broken submission must not stop the batch
            result = RunResult([], notes=[f"the grader failed on this file: {type(exc).__name__}: {exc}"])
        g = Graded(sub, result)
        if not quiet:
            got, possible = g.points()
            print(f"{sub.student}: {sub.path.name}: {got:g} / {possible:g} points "
                  f"in {g.result.seconds:.1f} s", flush=True)
        return g

    if not quiet:
        print(f"grading {len(subs)} submission(s), {jobs} at a time …", flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each submission has its own kernel
        graded = list(pool.map(one, subs))
    out = Path(out)
    write_gradebook(graded, out / GRADEBOOK)  # only now: every kernel has ended
    write_feedback(graded, out / FEEDBACK)
    if not quiet:
        print(f"wrote {out / GRADEBOOK} and {len(graded)} feedback file(s) in {out / FEEDBACK}")
    return graded


def main(argv: list[str]) -> int:
    """Command line for `python -m helpers.grading grade`."""
    ap = argparse.ArgumentParser(prog="python -m helpers.grading grade", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="submitted notebooks or folders of them")
    ap.add_argument("--out", default="artifacts/grades", help="where gradebook.csv and feedback/ go")
    ap.add_argument("--solutions", default="solutions", help="folder of solution notebooks")
    ap.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell (default 60)")
    ap.add_argument("--total-timeout", type=float, default=600, help="seconds per submission (default 600)")
    ap.add_argument("--max-output", type=int, default=20_000, help="output characters kept per cell")
    ap.add_argument("--kernel", default="python3", help="kernel name (default python3: this Python)")
    ap.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time (default 1)")
    args = ap.parse_args(argv)
    try:
        grade(args.paths, args.out, solutions_dir=args.solutions, cell_timeout=args.cell_timeout,
              total_timeout=args.total_timeout, max_output_chars=args.max_output, kernel_name=args.kernel, jobs=args.jobs)
    except InputError as err:
        print(f"error: {err}")
        return 2
    return 0
