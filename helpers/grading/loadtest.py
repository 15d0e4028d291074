"""Benchmark: does a correct submission keep full marks when the machine is busy, and how fast is grading?

    python -m helpers.grading.loadtest [--busy 2] [--jobs 1] [--labs lab00 lab04 ...]

Starts `--busy` processes that keep CPU cores fully busy, then grades, with the default settings,
a copy of every official solution (so it is graded as a student's submission, against the
calibration the official solution made under the same load). Prints each lab's score and
seconds per submission; exits 1 if any copy lost a point.

Serves: instructors (checking the grader on their machine; the throughput in docs/instructors.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from helpers.grading.grade import grade
from helpers.tools.notebooks import dumps

ROOT = Path(__file__).resolve().parents[2]


def _copy(solution: Path, folder: Path) -> Path:
    """A student-like copy of a solution: same code, one more markdown cell (so its file differs)."""
    nb = json.loads(solution.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["Submitted for the load test."]})
    path = folder / "student" / solution.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(nb), encoding="utf-8")
    return path


def run(busy: int = 2, jobs: int = 1, labs: list[str] | None = None) -> int:
    """Grade copies of the solutions with `busy` cores kept busy; return the number of copies that lost points."""
    solutions = sorted((ROOT / "solutions").glob("lab*.ipynb"))
    if labs:
        solutions = [s for s in solutions if s.stem.split("_")[0] in labs]
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    lost = 0
    try:
        with tempfile.TemporaryDirectory(prefix="grading-loadtest-") as tmp:
            copies = [_copy(s, Path(tmp)) for s in solutions]
            print(f"grading {len(copies)} solution copies with {busy} busy process(es), --jobs {jobs} "
                  f"(expect about a minute per lab) …", flush=True)
            start = time.monotonic()
            graded = grade(copies, Path(tmp) / "out", solutions_dir=ROOT / "solutions", jobs=jobs, quiet=True)
            wall = time.monotonic() - start
            for g in sorted(graded, key=lambda g: g.submission.lab):
                got, possible = g.points()
                ok = not g.result.not_graded and got == possible
                lost += not ok
                why = g.result.not_graded or "; ".join(o.message[:120] for o in g.result.outcomes if not o.passed)
                print(f"{g.submission.lab:36s} {got:4g} / {possible:<4g} {g.result.seconds:6.1f} s  "
                      f"{'ok' if ok else 'LOST POINTS: ' + why}")
            print(f"{len(graded)} submissions in {wall:.0f} s (calibration included): "
                  f"{wall / max(1, len(graded)):.1f} s per submission", flush=True)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    return lost


def main(argv: list[str]) -> int:
    """Command line."""
    ap = argparse.ArgumentParser(prog="python -m helpers.grading.loadtest", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--busy", type=int, default=2, help="processes keeping a core busy (default 2)")
    ap.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time (default 1)")
    ap.add_argument("--labs", nargs="*", help="only these labs (e.g. lab00 lab07)")
    args = ap.parse_args(argv)
    return 1 if run(args.busy, args.jobs, args.labs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
