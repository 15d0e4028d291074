"""Record how long the README's test command took: python -m helpers.tools.suite_time START_EPOCH OUT.json

OUT.json must be new or an earlier output of this command (helpers.cli's output contract).

Serves: tooling — `make test` (records suite.cpu_test_minutes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from helpers import bench, cli
from helpers.errors import InputError
from helpers.reference import TARGETS_BY_NAME

PROG = "python -m helpers.tools.suite_time"
INSTEAD = "another JSON file, e.g. artifacts/suite_time.json"  # what a refusal tells the user to pass


STAMP = Path(__file__).resolve().parents[2] / ".venv" / ".setup-done"  # the Makefile's sign that set-up finished


def setup_seconds(start_epoch: float, stamp: Path = STAMP) -> float:
    """Seconds the run spent in `make setup`: up to the stamp's time if set-up finished during it, else 0."""
    done = stamp.stat().st_mtime if stamp.exists() else 0.0
    return max(0.0, done - start_epoch)


def record_suite_time(start_epoch: float, out: Path) -> float:
    """Save suite.cpu_test_minutes measured from `start_epoch` (seconds since 1970) to now; return it."""
    minutes = (time.time() - start_epoch) / 60
    if not 0 <= minutes < 24 * 60:
        raise InputError(f"START_EPOCH {start_epoch:.0f} is not the start of this run ({minutes:.0f} minutes "
                         "ago). Pass $(date +%s) taken just before the suite, as `make test` does.")
    if out.is_dir():
        raise InputError(f"{out} is a folder. Pass the JSON file to write, e.g. artifacts/suite_time.json.")
    bench.set_notebook("make test")
    setup_s = round(setup_seconds(start_epoch), 1)
    with cli.replacing(out, PROG, force_flag=None, instead=INSTEAD) as tmp:
        bench.save_records([bench.record("suite.cpu_test_minutes", minutes, "min", setup_s=setup_s,
                                         setup="ran in this command" if setup_s else "already done")], tmp)
    return minutes


def _command(argv: list[str]) -> int:
    """START_EPOCH OUT.json."""
    ap = cli.Parser(prog=PROG, description=__doc__)
    ap.add_argument("start_epoch", type=float, help="seconds since 1970 when the suite started: $(date +%%s)")
    ap.add_argument("out", type=Path, help="JSON file to write")
    a = ap.parse_args(argv)
    minutes = record_suite_time(a.start_epoch, a.out)
    target = TARGETS_BY_NAME["suite.cpu_test_minutes"].text
    print(f"suite.cpu_test_minutes = {minutes:.1f} (target {target}), written to {a.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line; bad input is one line on stderr and exit status 2."""
    return cli.run(_command, argv)


if __name__ == "__main__":
    sys.exit(main())
