"""instructors.batch.loadtest: its records, what docs/instructors.md says of the stored ones, and its bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import bench
from instructors.batch import loadtest

ROOT = Path(__file__).resolve().parents[3]


def test_records_hold_the_median_submission_and_every_lab(tmp_path):
    out = tmp_path / "lt.json"
    loadtest.save({"lab00": 4.0, "lab01": 6.0, "lab02": 20.0}, 300.0, busy=2, jobs=1, lost=0, load=3.1, out=out)
    per, wall = bench.load_records(out)
    assert (per.name, per.value, wall.name, wall.value) == ("grading.loadtest.seconds_per_submission", 6.0,
                                                            "grading.loadtest.wall_seconds", 300.0)
    assert per.extra["per_lab"] == {"lab00": 4.0, "lab01": 6.0, "lab02": 20.0} and per.extra["lost_points"] == 0


@pytest.mark.parametrize("argv, says", [(["--busy", "-1"], "argument --busy: must be at least 0"),
                                         (["--labs", "lab99"], "no such lab"),
                                         (["--jobs", "0"], "must be at least 1")])
def test_bad_arguments_are_one_line(argv, says, capsys):
    assert loadtest.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err



def _stored(name: str) -> bench.Record:
    """The stored CPU record `name`."""
    return next(r for r in bench.load_records(ROOT / "reference" / "cpu" / "results.json") if r.name == name)


def test_the_instructors_guide_states_the_stored_runs():
    text = " ".join((ROOT / "docs" / "instructors.md").read_text(encoding="utf-8").split())
    per, wall = _stored("grading.loadtest.seconds_per_submission"), _stored("grading.loadtest.wall_seconds")
    times = {int(k[3:5]): v for k, v in per.extra["per_lab"].items()}

    def span(labs: tuple[int, ...], fmt: str) -> str:
        return f"{min(times[i] for i in labs):{fmt}}–{max(times[i] for i in labs):{fmt}} s"

    said = [f"{per.date}, load average {per.extra['load_avg_1min_during']} during the run",
            f"labs 0–{max(times)}", span((0, 1, 4, 5, 8, 10), ".1f"), span((6, 7, 9), ".0f"), span((2, 3, 11, 12), ".0f"),
            f"{per.value:.1f} s is the median", f"took {wall.value:.0f} s for {per.extra['submissions']} submissions",
            f"Those {len(times)} per-lab times add up to {sum(times.values()):.0f} s",
            f"200 × {sum(times.values()):.0f} s ≈ {200 * sum(times.values()) / 3600:.1f} hours"]
    ways = [("local_jobs1", "submissions per hour with `--jobs 1` (rounds "), ("local_jobs2", "with `--jobs 2` ("),
            ("shards2", "as two shards on the same machine (")]
    for key, words in ways:
        rec = _stored(f"grading.throughput.{key}_per_hour")
        lo, hi = rec.extra["spread"]
        said.append(f"{rec.value:.0f} {words}{lo:.0f}–{hi:.0f}")
    said.append(f"1-minute load average {rec.extra['load_avg_1min_before']} before and {rec.extra['load_avg_1min_after']} after")
    missing = [s for s in said if s not in text]
    assert not missing, f"docs/instructors.md does not say what reference/cpu/results.json holds: {missing}"


def test_out_follows_the_output_contract_before_any_grading(tmp_path, monkeypatch, capsys):
    ran = []

    def fake_run(busy, jobs, labs, out, mode):
        ran.append(out)
        with loadtest.cli.replacing(out, loadtest.PROG, force_flag=None) as tmp:
            loadtest.save({"lab00": 4.0}, 10.0, busy, jobs, 0, 1.0, tmp)
        return 0

    monkeypatch.setattr(loadtest, "run", fake_run)
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "data"}', encoding="utf-8")
    target = tmp_path / "target.txt"
    target.write_text("keep me", encoding="utf-8")
    (tmp_path / "link.json").symlink_to(target)
    for out in (mine, ROOT / "README.md", tmp_path / "link.json", tmp_path):
        before = out.read_bytes() if out.is_file() else None
        assert loadtest.main(["--busy", "0", "--out", str(out)]) == 2, out
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "nothing was changed" in err and "Traceback" not in err, err
        assert (out.read_bytes() if out.is_file() else None) == before
    assert ran == [] and target.read_text(encoding="utf-8") == "keep me"
    new = tmp_path / "new" / "lt.json"
    assert loadtest.main(["--busy", "0", "--out", str(new)]) == 0 and bench.load_records(new)
    assert loadtest.main(["--busy", "0", "--out", str(new)]) == 0  # its own file, unchanged: replaced
    assert ran == [new, new]
