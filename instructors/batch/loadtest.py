"""Benchmark: does a correct submission keep full marks when the machine is busy, and how fast is grading?

    python -m instructors.batch.loadtest [--busy 2] [--jobs 1] [--labs lab00 lab04 ...] [--sandbox auto]
                                             [--out OUT.json]

Starts `--busy` processes that keep CPU cores fully busy, then grades, with the default settings,
a copy of every official solution (so it is graded as a student's submission, against the
calibration the official solution made under the same load). Prints each lab's score and
seconds per submission; exits 1 if any copy lost a point. With --out, also writes the timings as
records into a new JSON file (or one it wrote before, unchanged: helpers.cli's output contract, checked
before anything is graded; never a file of yours, a link, or a file in the course folder) (grading.loadtest.*, with the sandbox mode used), which `python -m helpers.tools.report store-records
OUT.json` adds to reference/cpu (or, with `--into h200`, to reference/h200), where
docs/instructors.md cites them.

Serves: instructors (checking the grader on their machine; the throughput in docs/instructors.md).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from helpers import bench, cli
from helpers.errors import InputError
from helpers.tools.notebooks import dumps
from instructors.batch import options
from instructors.batch.grade import grade

ROOT = Path(__file__).resolve().parents[2]
PROG = "python -m instructors.batch.loadtest"  # as the output folder's marker names it
INSTEAD = "a new JSON file, e.g. --out artifacts/loadtest.json"


def _copy(solution: Path, folder: Path) -> Path:
    """A student-like copy of a solution: same code, one more markdown cell (so its file differs)."""
    nb = json.loads(solution.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["Submitted for the load test."]})
    path = folder / "student" / solution.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(nb), encoding="utf-8")
    return path


def _expected() -> str:
    """How long the stored CPU reference's load test took, or that there is none."""
    from helpers import reference

    rec = reference.lookup("grading.loadtest.wall_seconds", "cpu")
    if rec is None:
        return "no stored run to compare with"
    return f"the stored run took {rec.value:.0f} s for {rec.extra.get('submissions', '?')} labs ({rec.device}, {rec.date})"


def save(seconds: dict[str, float], wall: float, busy: int, jobs: int, lost: int, load: float, out: Path,
         mode: str = "plain") -> None:
    """Write the load test's timings as records: per submission (median, each lab in `extra`) and the whole run."""
    bench.set_notebook("grading load test")
    common = {"busy_processes": busy, "jobs": jobs, "submissions": len(seconds), "lost_points": lost,
              "load_avg_1min_during": f"{load:.1f}", "sandbox": mode, "cpu_cores": os.cpu_count()}
    bench.save_records([
        bench.record("grading.loadtest.seconds_per_submission", statistics.median(seconds.values()), "s",
                     per_lab={k: round(v, 1) for k, v in seconds.items()}, **common),
        bench.record("grading.loadtest.wall_seconds", wall, "s", **common),
    ], out)


def run(busy: int = 2, jobs: int = 1, labs: list[str] | None = None, out: Path | None = None,
        sandbox_mode: str = "auto") -> int:
    """Grade copies of the solutions with `busy` cores kept busy; return the number of copies that lost points."""
    from instructors.batch import sandbox

    mode = sandbox.mode(sandbox_mode)
    solutions = sorted((ROOT / "solutions").glob("lab*.ipynb"))
    if labs:
        solutions = [s for s in solutions if s.stem.split("_")[0] in labs]
        if not solutions:
            raise InputError(f"--labs {' '.join(labs)}: no such lab. Name labs like lab00 lab07.")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    lost = 0
    try:
        with tempfile.TemporaryDirectory(prefix="grading-loadtest-") as tmp:
            copies = [_copy(s, Path(tmp)) for s in solutions]
            print(f"grading {len(copies)} solution copies with {busy} busy process(es), --jobs {jobs}, sandbox {mode} "
                  f"({_expected()}) …", flush=True)
            start = time.monotonic()
            graded = grade(copies, Path(tmp) / "out", solutions_dir=ROOT / "solutions", jobs=jobs, quiet=True,
                           sandbox_mode=mode)
            wall, load = time.monotonic() - start, os.getloadavg()[0]
            for g in sorted(graded, key=lambda g: g.submission.lab):
                got, possible = g.points()
                ok = not g.result.not_graded and got == possible
                lost += not ok
                why = g.result.not_graded or "; ".join(o.message[:120] for o in g.result.outcomes if not o.passed)
                print(f"{g.submission.lab:36s} {got:4g} / {possible:<4g} {g.result.seconds:6.1f} s  "
                      f"{'ok' if ok else 'LOST POINTS: ' + why}")
                for note in g.result.notes:
                    print(f"{'':36s} note: {note[:160]}")
            print(f"{len(graded)} submissions in {wall:.0f} s (calibration included): "
                  f"{wall / max(1, len(graded)):.1f} s per submission", flush=True)
            if out is not None and graded:
                with cli.replacing(out, PROG, force_flag=None, instead=INSTEAD) as part:  # new or its own only
                    save({g.submission.lab: g.result.seconds for g in graded}, wall, busy, jobs, lost, load, part,
                         mode)
                print(f"timings written to {out}")
    finally:
        for b in burners:
            b.kill()
            b.wait()
    return lost


def _command(argv: list[str]) -> int:
    """[--busy N] [--jobs N] [--labs LAB ...] [--out OUT.json]."""
    ap = cli.Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=options.whole, default=2, help="processes keeping a core busy (default 2)")
    ap.add_argument("--jobs", type=cli.positive_int, default=1, help="submissions graded at the same time (default 1)")
    ap.add_argument("--labs", nargs="*", help="only these labs (e.g. lab00 lab07)")
    ap.add_argument("--sandbox", choices=("auto", "bwrap", "plain"), default="auto",
                    help="bubblewrap where it works (auto, the grader's default), or as named")
    ap.add_argument("--out", type=Path, help="also write the timings as records to this JSON file")
    args = ap.parse_args(argv)
    if args.out is not None:  # decided before any grading: a new file, or one this command wrote, unchanged
        cli.check_output_file(args.out, PROG, force_flag=None, inputs=[ROOT / "solutions"], instead=INSTEAD)
    return 1 if run(args.busy, args.jobs, args.labs, args.out, args.sandbox) else 0


def main(argv: list[str] | None = None) -> int:
    """Command line; bad input is one line on stderr and exit status 2."""
    return cli.run(_command, argv)


if __name__ == "__main__":
    sys.exit(main())
