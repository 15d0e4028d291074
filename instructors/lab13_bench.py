"""Time lab 13's solution kernel (the answer key's W4A16 GEMV) on a GPU with the lab's own timing
(``helpers.labs.lab13_weight_only_gemv.bench``: checked exact first, then beside FP16 cuBLAS and the course's
kernels) and write the lab13.* records that the lab's stored results come from.

    python -m instructors.lab13_bench --out DIR     # DIR/results.json

Serves: instructors (lab 13's stored timing of the solution).
"""

from __future__ import annotations

from pathlib import Path

from helpers import bench, cli
from helpers.labs.lab13_weight_only_gemv.bench import ROUNDS, measure, record
from instructors.keys.lab13_weight_only_gemv import gemv_w4

PROG = "python -m instructors.lab13_bench"


def main(argv: list[str]) -> int:
    """--out DIR: time the solution's kernel and write DIR/results.json."""
    from helpers.device import require_gpu

    ap = cli.Parser(prog=PROG, description="Time lab 13's solution GEMV on this GPU; write the lab13.* records.")
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder for results.json")
    ap.add_argument("--rounds", type=cli.positive_int, default=ROUNDS, help="interleaved rounds (at least 5)")
    args = ap.parse_args(argv)
    require_gpu("Timing the lab 13 GEMV")
    cli.check_output_dir(args.out, PROG, instead="a new or empty folder")
    bench.set_notebook("lab13_weight_only_gemv")
    ratios = record(measure(gemv_w4, rounds=max(5, args.rounds)))
    with cli.output_dir(args.out, PROG, instead="a new or empty folder") as out:
        bench.save_records(bench.session_records(), out / "results.json")
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}×")
    print(f"wrote {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
