"""One batch spread over machines: two shards (--shard 0/2 and 1/2, run at the same time as separate processes,
as Slurm array tasks or Kubernetes indexed jobs would run them) merged by one command give the same gradebook,
summary and feedback as the same batch graded locally; a merge of shards that are missing, repeated or not
complete is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.grading import ADD, LAB, MUL, student_nb, write_exercises, write_nb, write_solution

from helpers.errors import InputError
from instructors.batch import shards
from instructors.batch.grade import grade, main, merge

ROOT = Path(__file__).resolve().parents[3]
CASES = {"perfect": (ADD, MUL), "wrong": ("def add(a, b):\n    return a - b", MUL), "renamed": (ADD,),
         "syntax": ("def add(a, b)\n    return a + b", MUL), "hardcoded": ("def add(a, b):\n    return 3", MUL),
         "raises": ("def add(a, b):\n    raise ValueError('no')", MUL)}


def _outputs(out: Path) -> dict[str, str]:
    """Every file the grader writes for people: gradebook, summary and feedback."""
    files = {"gradebook.csv": (out / "gradebook.csv").read_text(encoding="utf-8"),
             "summary.csv": (out / "summary.csv").read_text(encoding="utf-8")}
    files.update({f"feedback/{p.name}": p.read_text(encoding="utf-8") for p in sorted((out / "feedback").glob("*.md"))})
    return files


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The batch graded locally, and as two shards run at the same time then merged."""
    root = tmp_path_factory.mktemp("shards")
    sols = write_solution(root / "solutions").parent
    keys = write_exercises(root / "keys")
    for name, cells in CASES.items():
        write_nb(root / "subs" / f"{LAB}__{name}.ipynb", student_nb(*cells))
    common = ["--solutions", str(sols), "--exercises", str(keys), "--cell-timeout", "30", "--time-factor", "2"]
    grade([root / "subs"], root / "local", solutions_dir=sols, exercises=keys, cell_timeout=30, time_factor=2,
          quiet=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "instructors.batch", "grade", str(root / "subs"), "--shard",
                               f"{i}/2", "--out", str(root / f"shard-{i}"), *common], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read() if p.stderr else ""
    assert main(["--merge", str(root / "shard-0"), str(root / "shard-1"), "--out", str(root / "merged")]) == 0
    return {"root": root}


@pytest.mark.slow
def test_sharded_verdicts_identical_to_local(runs: dict) -> None:
    root = runs["root"]
    local, merged = _outputs(root / "local"), _outputs(root / "merged")
    assert len(local) == 2 + len(CASES) and merged == local
    shard_rows = [len(json.loads((root / f"shard-{i}" / ".grading" / "results.json").read_text())) for i in range(2)]
    assert shard_rows == [3, 3]  # each shard graded its half


@pytest.mark.slow
def test_merge_refuses_missing_repeated_and_incomplete_shards(runs: dict, tmp_path: Path) -> None:
    root = runs["root"]
    with pytest.raises(InputError, match="shard 1/2 is missing"):
        merge([root / "shard-0"], tmp_path / "a")
    with pytest.raises(InputError, match="both shard 0/2"):
        merge([root / "shard-0", root / "shard-0"], tmp_path / "b")
    broken = tmp_path / "shard-1"
    shutil.copytree(root / "shard-1", broken)
    state = broken / ".grading" / "results.json"
    state.write_text(json.dumps(json.loads(state.read_text())[1:]))
    with pytest.raises(InputError, match="not complete"):
        merge([root / "shard-0", broken], tmp_path / "c")
    with pytest.raises(InputError, match="not the output of a grade run"):
        merge([root / "solutions"], tmp_path / "d")


def test_shard_arguments_and_selection() -> None:
    assert shards.parse("0/4") == (0, 4) and shards.parse("3/4") == (3, 4)
    for bad in ("4/4", "1/0", "-1/2", "a/b", "1"):
        with pytest.raises(InputError, match="--shard"):
            shards.parse(bad)
    items = list(range(7))
    parts = [shards.select(items, (i, 3)) for i in range(3)]  # type: ignore[arg-type]
    assert sorted(k for _, places in parts for k in places) == items


def test_throughput_records_hold_the_median_and_every_round(tmp_path: Path) -> None:
    from helpers import bench
    from instructors.batch import throughput

    out = tmp_path / "tp.json"
    throughput.save({"local_jobs1": [60.0, 40.0, 50.0, 45.0, 55.0], "local_jobs2": [30.0] * 5, "shards2": [36.0] * 5},
                    4, ["lab00"], 3.0, 4.0, out)
    one, two, sh = bench.load_records(out)
    assert (one.name, one.value, one.unit) == ("grading.throughput.local_jobs1_per_hour", 288.0, "submissions/h")
    assert one.extra["spread"] == [240.0, 360.0] and len(one.extra["rounds"]) == 5 and sh.extra["calibrations"] == 2
    assert two.value == 480.0 and one.extra["load_avg_1min_before"] == "3.0"
