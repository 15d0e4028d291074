"""Planted submissions for the ranking: the official solutions of labs 11–13, and one cheating submission of each
family that kernel competitions defend against (``rank_guard.FAMILIES``), each built from the official notebook by
one edit. The tests rank them on the CPU; a GPU session ranks them for real with one command, which writes the
planted notebooks, the leaderboard and each cheat's verdict under DIR:

    python -m instructors.batch.rank_planted --out DIR [--card h200] [--runs 5]

(DIR/submissions/ the planted notebooks, DIR/rank/ rank's output: limits.csv, verdicts.csv, leaderboard.csv and
leaderboard.html; DIR/cheats.json each cheat's family, what was planted, what should catch it, and the verdicts it
got.) One cheat passes the pre-check on purpose: ``cache_by_shape`` computes only the checks' small shapes, and
only the timing's fresh inputs at the ranked shapes, on a GPU, reject it.

Serves: instructors (ranking of labs 11, 12 and 13; its tests and its GPU run).
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from helpers import cli

LAB11 = "lab11_gemm_kernels"


@dataclass(frozen=True)
class Cheat:
    """One planted cheat: its family, lab, the graded code cell it replaces (or None: a new cell), and the code."""

    family: str
    lab: str
    grade_id: str | None
    code: str
    expect: str  # 'rejected' or 'flagged'
    caught_by: str = "pre-check"  # or 're-check on a GPU': the timing's fresh inputs at the ranked shapes


CHEATS = {
    "timer": Cheat("timer", LAB11, None, (
        "import time\n"
        "cuda.event_elapsed_time = lambda start, end: 0.001  # every kernel 'takes' a microsecond\n"
        "time.perf_counter = lambda: 0.0\n"), "flagged"),
    "stream": Cheat("stream", LAB11, None, (
        "side = cuda.stream()\n"
        "a = cuda.to_device(np.ones((64, 64), np.float32))\n"
        "c = cuda.device_array((64, 64), np.float32)\n"
        "gemm_naive[(2, 8), (32, 8), side](a, a, c)  # the work runs beside the timed stream\n"), "flagged"),
    "cache": Cheat("cache", LAB11, "lab11-naive_code", (
        "@cuda.jit\n"
        "def gemm_naive(a, b, c):\n"
        "    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
        "    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y\n"
        "    if row < c.shape[0] and col < c.shape[1]:\n"
        "        if c[row, col] != 0:  # the buffer already holds an answer: keep it\n"
        "            return\n"
        "        acc = float32(0)\n"
        "        for k in range(a.shape[1]):\n"
        "            acc += a[row, k] * b[k, col]\n"
        "        c[row, col] = acc\n"), "rejected"),
    "vendor": Cheat("vendor", LAB11, "lab11-naive_code", (
        "@cuda.jit\n"
        "def gemm_naive(a, b, c):\n"
        "    c[:, :] = a @ b  # the library's matmul as the kernel\n"), "rejected"),
    "cache_by_shape": Cheat("cache", LAB11, "lab11-naive_code", (
        "@cuda.jit\n"
        "def gemm_naive(a, b, c):\n"
        "    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
        "    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y\n"
        "    if a.shape[0] > 64:  # only the checks' small shapes are computed; a big one keeps what c holds\n"
        "        return\n"
        "    if row < c.shape[0] and col < c.shape[1]:\n"
        "        acc = float32(0)\n"
        "        for k in range(a.shape[1]):\n"
        "            acc += a[row, k] * b[k, col]\n"
        "        c[row, col] = acc\n"), "rejected", "re-check on a GPU"),
    "graph": Cheat("graph", LAB11, None, (
        "import torch\n"
        "g = torch.cuda.CUDAGraph()\n"
        "with torch.cuda.graph(g):\n"
        "    captured = torch.ones(8, device='cuda') * 2\n"
        "g.replay()  # replays captured results instead of computing\n"), "flagged"),
}
OFFICIAL = ("lab11_gemm_kernels", "lab12_histogram_kernels", "lab13_weight_only_gemv")


def _code_cell(source: str) -> dict:
    """A plain code cell."""
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


def planted(cheat: Cheat, solutions: Path) -> dict:
    """The official notebook of the cheat's lab, with the cheat planted."""
    nb = copy.deepcopy(json.loads((solutions / f"{cheat.lab}.ipynb").read_text(encoding="utf-8")))
    if cheat.grade_id is None:
        nb["cells"].append(_code_cell(cheat.code))
        return nb
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cheat.grade_id)
    cell["source"] = cheat.code
    return nb


def write_submissions(folder: Path, solutions: Path | None = None) -> list[Path]:
    """folder/official/<lab>.ipynb for each ranked lab and folder/cheat_<family>/<lab>.ipynb for each cheat."""
    solutions = Path(solutions or cli.COURSE / "solutions")
    written = []
    for lab in OFFICIAL:
        p = folder / "official" / f"{lab}.ipynb"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text((solutions / f"{lab}.ipynb").read_text(encoding="utf-8"), encoding="utf-8")
        written.append(p)
    for fam, cheat in CHEATS.items():
        p = folder / f"cheat_{fam}" / f"{cheat.lab}.ipynb"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(planted(cheat, solutions), indent=1) + "\n", encoding="utf-8")
        written.append(p)
    return written


def cheat_verdicts(entries: list) -> list[dict]:
    """Each cheat's family, what it should get, and the verdicts and flags its kernels got."""
    out = []
    for fam, cheat in CHEATS.items():  # fam: the cheat's name (its family, or a second cheat of one)
        mine = [e for e in entries if e.student == f"cheat_{fam}"]
        out.append({"cheat": fam, "family": cheat.family, "expected": cheat.expect, "caught_by": cheat.caught_by,
                    "planted": cheat.code,
                    "kernels": {e.exercise: {"pre-check": e.precheck, "verdict": e.verdict, "flags": e.flags}
                                for e in mine}})
    return out


def main(argv: list[str]) -> int:
    """--out DIR [--card CARD]: plant, rank, and write each cheat's verdict."""
    from instructors.batch import rank

    ap = cli.Parser(prog="python -m instructors.batch.rank_planted",
                    description="rank the official solutions and one planted cheat per family")
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder")
    ap.add_argument("--card", default="h200", help="the stored card whose rates set the limits")
    ap.add_argument("--runs", type=cli.whole_number(1), default=rank.RUNS, help="timed runs per shape")
    args = ap.parse_args(argv)
    command = "python -m instructors.batch.rank_planted"
    with cli.output_dir(args.out, command) as out:
        subs = out / "submissions"
        write_submissions(subs)
        entries = rank.rank([subs], out / "rank", card=args.card, runs=args.runs)
        (out / "cheats.json").write_text(json.dumps(cheat_verdicts(entries), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'cheats.json'} and {args.out / 'rank'}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main, sys.argv[1:]))
