"""helpers.grading.batch.loadtest: its records (what docs/instructors.md cites) and its bad input."""

from __future__ import annotations

import pytest

from helpers import bench
from helpers.grading.batch import loadtest


def test_records_hold_the_median_submission_and_every_lab(tmp_path):
    out = tmp_path / "lt.json"
    loadtest.save({"lab00": 4.0, "lab01": 6.0, "lab02": 20.0}, 300.0, busy=2, jobs=1, lost=0, load=3.1, out=out)
    per, wall = bench.load_records(out)
    assert (per.name, per.value, wall.name, wall.value) == ("grading.loadtest.seconds_per_submission", 6.0,
                                                            "grading.loadtest.wall_seconds", 300.0)
    assert per.extra["per_lab"] == {"lab00": 4.0, "lab01": 6.0, "lab02": 20.0} and per.extra["lost_points"] == 0


@pytest.mark.parametrize("argv, says", [(["--busy", "-1"], "--busy must be 0 or more"),
                                         (["--labs", "lab99"], "no such lab"),
                                         (["--jobs", "0"], "must be at least 1")])
def test_bad_arguments_are_one_line(argv, says, capsys):
    assert loadtest.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err

