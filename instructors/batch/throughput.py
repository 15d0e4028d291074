"""Benchmark: submissions graded per hour here, locally (--jobs 1, --jobs 2) and as 2 shards run at once, merged.

    python -m instructors.batch.throughput [--labs lab00 lab04] [--copies 3] [--rounds 5] [--out OUT.json]

Each round grades `copies` student-like copies of each named lab's official solution three ways, in an
order that rotates from round to round: one batch with --jobs 1, one with --jobs 2, and two shard
processes (--shard 0/2 and 1/2, --jobs 1 each, as two machines would run them) followed by the merge.
A round's time counts everything an instructor waits for, each lab's calibration included (a shard
calibrates the labs it has, so two shards pay it twice). Prints the median and the range of the rounds
and the 1-minute load average before and after; with --out, writes them as records
(grading.throughput.*) that `python -m helpers.tools.report store-records OUT.json` adds to reference/cpu.

Serves: instructors (how long a class takes; the throughput in docs/instructors.md).
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
from instructors.batch.grade import grade, merge

ROOT = Path(__file__).resolve().parents[2]
WAYS = ("local_jobs1", "local_jobs2", "shards2")


def _copies(solutions: list[Path], copies: int, folder: Path) -> int:
    """Write `copies` student-like copies of each solution (one more markdown cell each); return how many."""
    for sol in solutions:
        nb = json.loads(sol.read_text(encoding="utf-8"))
        nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["Submitted for the throughput test."]})
        for k in range(copies):
            path = folder / f"student{k}" / sol.name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dumps(nb), encoding="utf-8")
    return copies * len(solutions)


def _one(way: str, subs: Path, out: Path) -> float:
    """Grade the copies one way; return the wall seconds."""
    start = time.monotonic()
    if way == "shards2":
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        procs = [subprocess.Popen([sys.executable, "-m", "instructors.batch", "grade", str(subs), "--shard",
                                   f"{i}/2", "--out", str(out / f"shard-{i}"), "--solutions", str(ROOT / "solutions")],
                                  env=env, cwd=ROOT, stdout=subprocess.DEVNULL) for i in range(2)]
        if any(p.wait() != 0 for p in procs):
            raise RuntimeError("a shard failed")
        merge([out / "shard-0", out / "shard-1"], out / "merged")
    else:
        grade([subs], out, solutions_dir=ROOT / "solutions", jobs=int(way[-1]), quiet=True)
    return time.monotonic() - start


def run(labs: list[str], copies: int, rounds: int, out: Path | None = None) -> dict[str, list[float]]:
    """Time every way `rounds` times, interleaved; return the seconds per way."""
    solutions = [s for s in sorted((ROOT / "solutions").glob("lab*.ipynb")) if s.stem.split("_")[0] in labs]
    if len(solutions) != len(set(labs)):
        raise InputError(f"--labs {' '.join(labs)}: no such lab. Name labs like lab00 lab04.")
    seconds: dict[str, list[float]] = {w: [] for w in WAYS}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="grading-throughput-") as tmp:
        n = _copies(solutions, copies, Path(tmp) / "subs")
        for r in range(rounds):
            for way in WAYS[r % 3:] + WAYS[:r % 3]:
                seconds[way].append(_one(way, Path(tmp) / "subs", Path(tmp) / f"{way}-{r}"))
                print(f"round {r + 1}: {way}: {n} submissions in {seconds[way][-1]:.0f} s "
                      f"({3600 * n / seconds[way][-1]:.0f} per hour)", flush=True)
    load_after = os.getloadavg()[0]
    if out is not None:
        save(seconds, n, labs, load_before, load_after, out)
    return seconds


def save(seconds: dict[str, list[float]], n: int, labs: list[str], load_before: float, load_after: float,
         out: Path) -> None:
    """Write submissions per hour (median of the rounds, every round in `extra`) as grading.throughput.* records."""
    bench.set_notebook("grading throughput")
    recs = []
    for way, times in seconds.items():
        per_hour = [3600 * n / t for t in times]
        recs.append(bench.record(f"grading.throughput.{way}_per_hour", statistics.median(per_hour), "submissions/h",
                                 rounds=[round(x, 1) for x in per_hour], spread=[round(min(per_hour), 1),
                                 round(max(per_hour), 1)], submissions=n, labs=labs,
                                 calibrations=len(labs) * (2 if way == "shards2" else 1),
                                 load_avg_1min_before=f"{load_before:.1f}", load_avg_1min_after=f"{load_after:.1f}"))
    bench.save_records(recs, out)


def _command(argv: list[str]) -> int:
    """[--labs LAB ...] [--copies N] [--rounds N] [--out OUT.json]."""
    ap = cli.Parser(prog="python -m instructors.batch.throughput", description=__doc__.split("\n\n")[0])
    ap.add_argument("--labs", nargs="+", default=["lab00", "lab04"], help="labs whose solutions are copied")
    ap.add_argument("--copies", type=cli.positive_int, default=3, help="copies of each lab (default 3)")
    ap.add_argument("--rounds", type=cli.positive_int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--out", type=Path, help="also write the results as records to this JSON file")
    args = ap.parse_args(argv)
    if args.out is not None and args.out.is_dir():
        raise InputError(f"{args.out} is a folder. Pass the JSON file to write, e.g. artifacts/throughput.json.")
    seconds = run(args.labs, args.copies, args.rounds, args.out)
    for way, times in seconds.items():
        print(f"{way}: median {statistics.median(times):.0f} s per round ({min(times):.0f}–{max(times):.0f})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line; bad input is one line on stderr and exit status 2."""
    return cli.run(_command, argv)


if __name__ == "__main__":
    sys.exit(main())
