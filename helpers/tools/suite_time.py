"""Record how long the README's test command took: python -m helpers.tools.suite_time START_EPOCH OUT.json

Serves: tooling — `make test` (records suite.cpu_test_minutes).
"""

from __future__ import annotations

import sys
import time

from helpers import bench


def main(start_epoch: str, out: str) -> None:
    """Print and save suite.cpu_test_minutes measured from `start_epoch` to now."""
    minutes = (time.time() - float(start_epoch)) / 60
    bench.set_notebook("make test")
    rec = bench.record("suite.cpu_test_minutes", minutes, "min")
    bench.save_records([rec], out)
    print(f"suite.cpu_test_minutes = {minutes:.1f} (target <= 15), written to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
