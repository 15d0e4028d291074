"""Rank the class's kernels of labs 11–13 against the speed of light.

    python -m instructors.batch rank SUBMISSIONS... --out DIR [--grades GRADES] [--card h200] [--runs 5]

For every submitted notebook of lab 11, 12 or 13 and every ranked exercise in it: the kernel its check() cell
tests is read from the notebook's syntax (``rank_extract``: none of the submission's code runs), the static
pre-check looks for known cheat families (``rank_guard``: in the kernel it rejects, elsewhere it flags), and with
``--grades`` (a ``grade`` output folder) only kernels that scored full marks there are ranked: correctness decides
the grade, this only ranks. On a machine with a GPU each kernel is then timed in a process of its own
(``rank_gpu``: L2 flushed, fresh inputs, outputs re-checked with secret seeds); without one it is re-checked once
in numba's simulator on inputs from a secret seed and listed as "no GPU: not timed".

DIR receives limits.csv (the speed-of-light table of each exercise on the card, from the card's stored run),
verdicts.csv (each kernel's verdict and every cheat sign found) and leaderboard.csv + leaderboard.html
(``rank_board``). DIR follows helpers.cli's output contract, as grade's does.

Serves: instructors (ranking of labs 11, 12 and 13).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from helpers import cli
from helpers.errors import InputError
from helpers.grading import speed_of_light as sol
from instructors.batch import rank_board, rank_guard
from instructors.batch.manual import write_csv
from instructors.batch.rank_board import NOT_TIMED, TIMED, Entry
from instructors.batch.rank_extract import functions, kernels, read_cells
from instructors.batch.rank_problems import OUT_INDEX, recheck
from instructors.batch.submissions import Submission, discover

PROG = "python -m instructors.batch rank"
RUNS = 5
GPU_TIMEOUT = 900.0  # seconds for one kernel's timing process
VERDICT_HEADER = ["student", "exercise", "verdict", "pre-check", "findings", "submission"]


def full_marks(solutions_dir: Path) -> dict[str, float]:
    """grade_id -> its points in the solution notebooks (the marks a correct answer scores)."""
    out = {}
    for nb in sorted(Path(solutions_dir).glob("lab1[123]_*.ipynb")):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and "grade_id" in meta:
                out[str(meta["grade_id"])] = float(meta.get("points", 0))
    return out


def correct_in_gradebook(grades: Path, solutions_dir: Path) -> Callable[[Submission, str], bool]:
    """A test of (submission, exercise): did the gradebook in `grades` give it full marks?"""
    path = Path(grades) / "gradebook.csv"
    if not path.is_file():
        raise InputError(f"{path} does not exist: pass a folder written by `python -m instructors.batch "
                         "grade` as --grades, or leave --grades out.")
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    marks = full_marks(solutions_dir)
    by_path = {str(Path(r.get("submission", "")).resolve()): r for r in rows}
    by_student = {(r.get("student"), r.get("lab")): r for r in rows}

    def correct(s: Submission, exercise: str) -> bool:
        row = by_path.get(str(Path(s.path).resolve())) or by_student.get((s.student, s.lab))
        gid = exercise.replace(".", "-")
        try:
            return row is not None and gid in marks and float(row.get(gid) or "nan") >= marks[gid] > 0
        except ValueError:
            return False

    return correct


def time_on_gpu(description: dict, exercise: str, runs: int) -> dict:
    """Time one kernel in its own process (rank_gpu); its result, or a rejection saying why it gave none."""
    with tempfile.TemporaryDirectory(prefix="rank-") as tmp:
        job, result = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job.write_text(json.dumps({"exercise": exercise, "description": description, "runs": runs}), "utf-8")
        try:
            proc = subprocess.run([sys.executable, "-m", "instructors.batch.rank_gpu", str(job), str(result)],
                                  capture_output=True, text=True, timeout=GPU_TIMEOUT, cwd=cli.COURSE)
        except subprocess.TimeoutExpired:
            return {"verdict": f"rejected: its timing took over {GPU_TIMEOUT:g} s", "shapes": {}}
        if proc.returncode != 0 or not result.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return {"verdict": f"rejected: the timing process failed ({tail[0][:200]})", "shapes": {}}
        return json.loads(result.read_text(encoding="utf-8"))


def judge(s: Submission, exercise: str, description: dict | str, notebook: list, gpu: bool, runs: int,
          correct: Callable[[Submission, str], bool] | None) -> tuple[Entry, list]:
    """One kernel's entry, and the cheat signs found for it (its own and the notebook's)."""
    entry = Entry(s.student, exercise, str(s.path), "")
    if isinstance(description, str):
        entry.verdict = f"no kernel: {description}"
        return entry, []
    found = rank_guard.kernel_findings(functions(description), OUT_INDEX[exercise]) + notebook
    entry.flags = "; ".join(f.text() for f in found if not f.rejects)
    entry.precheck = rank_guard.verdict(found)
    if any(f.rejects for f in found):
        entry.verdict = rank_guard.verdict(found)
    elif correct is not None and not correct(s, exercise):
        entry.verdict = "not ranked: not full marks in the gradebook"
    elif gpu:
        result = time_on_gpu(description, exercise, runs)
        entry.verdict, entry.device = result["verdict"], result.get("device", "")
        entry.seconds = {k: float(v["seconds"]) for k, v in result.get("shapes", {}).items()}
    else:
        why = recheck(description, exercise)
        entry.verdict = f"rejected: wrong on fresh inputs in the simulator: {why}" if why else NOT_TIMED
    return entry, found


def _validate(paths: Sequence, card: str, runs: int) -> None:
    """Clear errors for bad arguments, before anything is written."""
    if not paths:
        raise InputError(f"no submissions given. Pass notebooks or folders: {PROG} submissions/ --out artifacts/rank")
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 100:
        raise InputError(f"runs must be a whole number of timed runs per shape, 1..100; got {runs!r}.")
    sol.rates(card)  # a card without stored rates is refused here, with the fix


def rank(paths: Sequence[str | Path], out: str | Path, *, grades: str | Path | None = None, card: str = "h200",
         runs: int = RUNS, solutions_dir: str | Path | None = None, gpu: bool | None = None,
         say: Callable[[str], None] = print) -> list[Entry]:
    """Rank every ranked kernel of the submissions; write limits, verdicts and the leaderboard under `out`."""
    from helpers.device import device_label, has_gpu

    _validate(paths, card, runs)
    solutions_dir = Path(solutions_dir or cli.COURSE / "solutions")
    subs = discover(list(paths), solutions_dir)
    correct = correct_in_gradebook(Path(grades), solutions_dir) if grades is not None else None
    gpu = has_gpu() if gpu is None else gpu
    if gpu and sol.card_of(device_label()) != card:
        raise InputError(f"this GPU is {device_label()}, but --card {card} names the stored {card.upper()} run: "
                         "its limits are not this card's. Store chapters 2 and 3's run of this card "
                         "(python -m helpers.tools.report) and pass its folder name, or rank on that card.")
    entries, verdicts = [], []
    with cli.output_dir(out, PROG, inputs=[*paths, solutions_dir]) as folder:
        write_csv(folder / "limits.csv", list(sol.table("lab11.naive", card)[0]),
                  [row for ex in sol.TARGETS for row in sol.table(ex, card)], ".limits-")
        for s in subs:
            exercises = [ex for ex in sol.TARGETS if s.lab.startswith(ex.split(".")[0] + "_")]
            if not exercises:
                continue
            cells = read_cells(s.path)
            found = kernels(cells, exercises)
            names = {f["name"] for d in found.values() if isinstance(d, dict) for f in functions(d)}
            notebook = rank_guard.notebook_findings(cells.sources, names)
            for ex, d in found.items():
                entry, signs = judge(s, ex, d, notebook, gpu, runs, correct)
                say(f"{s.student} {ex}: {entry.verdict}")
                entries.append(entry)
                verdicts.append({"student": s.student, "exercise": ex, "verdict": entry.verdict,
                                 "pre-check": entry.precheck or "no kernel to check",
                                 "findings": " | ".join(f.text() for f in signs), "submission": str(s.path)})
        write_csv(folder / "verdicts.csv", VERDICT_HEADER, verdicts, ".verdicts-")
        rank_board.write(folder, entries, card)
    timed = sum(e.verdict == TIMED for e in entries)
    say(f"wrote {Path(out) / 'leaderboard.html'}: {timed} of {len(entries)} kernels timed"
        f"{'' if gpu else ' (no GPU here: none is timed)'}")
    return entries


def main(argv: list[str]) -> int:
    """rank SUBMISSIONS... --out DIR [--grades DIR] [--card CARD] [--runs N] [--solutions DIR]."""
    ap = cli.Parser(prog=PROG, description="rank the kernels of labs 11-13 against the speed of light")
    ap.add_argument("paths", nargs="*", type=Path, help="submitted notebooks or folders")
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder, or an earlier rank output")
    ap.add_argument("--grades", type=Path, help="a grade output folder: rank only kernels with full marks there")
    ap.add_argument("--card", default="h200", help="the stored card whose rates set the limits (default h200)")
    ap.add_argument("--runs", type=cli.whole_number(1), default=RUNS, help="timed runs per shape (default 5)")
    ap.add_argument("--solutions", type=Path, default=None, help="the solution notebooks (default solutions/)")
    args = ap.parse_args(argv)
    rank(args.paths, args.out, grades=args.grades, card=args.card, runs=args.runs, solutions_dir=args.solutions)
    return 0
