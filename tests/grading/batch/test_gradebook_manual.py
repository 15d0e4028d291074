"""A gradebook that adds up, without kernels: a column per question read by the instructor (points from
manual.csv or --overrides), the lab's full points as max_points, overrides counted in points and the
summary, notes as text, rows sorted by student; overrides checked line by line and kept across resumes;
shards that carry their batch's identity."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers.errors import InputError
from instructors.batch import grade as grade_mod
from instructors.batch import manual, overrides, shards
from instructors.batch.gradebook import Graded
from instructors.batch.runner import RunResult, TestOutcome
from instructors.batch.submissions import Submission

LAB = "lab98_fixture"


def _cell(kind: str, source: str, **meta: object) -> dict:
    return {"cell_type": kind, "metadata": {"nbgrader": {"schema_version": 3, **meta}} if meta else {},
            "source": source, **({"outputs": [], "execution_count": None} if kind == "code" else {})}


def _solution(tmp_path: Path) -> Path:
    nb = {"cells": [_cell("code", "def add(a, b):\n    return a + b", grade=False, solution=True, grade_id="lab98-add-code"),
                    _cell("code", 'check("lab98.add", add)', grade=True, solution=False, grade_id="lab98-add", points=2),
                    _cell("markdown", "Why does it add? (1 point, read by your instructor)"),
                    _cell("markdown", "Because.", grade=True, solution=True, grade_id="lab98-why", points=1)],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "solutions" / f"{LAB}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def _submission(tmp_path: Path, student: str, answer: str) -> Submission:
    sol = _solution(tmp_path)
    nb = json.loads(sol.read_text(encoding="utf-8"))
    nb["cells"][3]["source"] = answer
    path = tmp_path / "subs" / f"{LAB}__{student}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return Submission(path, student, LAB, sol)


def _graded(tmp_path: Path) -> list[Graded]:
    out = []
    for student, got, answer in (("zoe", 2, "It adds because + adds."), ("ann", 0, "No idea.")):
        s = _submission(tmp_path, student, answer)
        r = RunResult([TestOutcome("lab98-add", got, 2, got == 2, "ok")], notes=["a setup cell was restored"],
                      manual=manual.answers(s.path, s.solution))
        out.append(Graded(s, r))
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


def _write(tmp_path: Path, graded: list[Graded], fixes: list | None = None) -> Path:
    out = tmp_path / "out"
    marks = manual.read_marks(out / manual.MANUAL)
    grade_mod._write(out, list(graded), ["k"] * len(graded), set(range(len(graded))), fixes or [], marks)
    return out


def test_a_question_read_by_the_instructor_has_its_column_and_its_answer_in_manual_csv(tmp_path: Path) -> None:
    graded = _graded(tmp_path)
    assert manual.questions(graded[0].submission.solution) == [("lab98-why", 1.0)]
    out = _write(tmp_path, graded)
    rows = _rows(out / "gradebook.csv")
    assert [r["student"] for r in rows] == ["ann", "zoe"]  # sorted by student, not in grading order
    assert list(rows[0])[3:5] == ["lab98-add", "lab98-why"]
    assert [(r["lab98-why"], r["points"], r["max_points"]) for r in rows] == [("", "0", "3"), ("", "2", "3")]
    assert rows[1]["notes"].startswith("a setup cell was restored | not yet read by you: lab98-why")
    asked = _rows(out / "manual.csv")
    assert [(r["student"], r["question"], r["max_points"], r["answer"]) for r in asked] == [
        ("ann", "lab98-why", "1", "No idea."), ("zoe", "lab98-why", "1", "It adds because + adds.")]
    feedback = (out / "feedback" / "zoe__lab98_fixture.md").read_text(encoding="utf-8")
    assert "2 / 2** from the checks, of the lab's 3: your instructor reads lab98-why" in feedback


def test_points_filled_into_manual_csv_are_counted_and_kept_while_the_answer_is_unchanged(tmp_path: Path) -> None:
    graded = _graded(tmp_path)
    out = _write(tmp_path, graded)
    asked = _rows(out / "manual.csv")
    asked[1]["points"] = "1"  # zoe's answer, read and given its point
    with (out / "manual.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, manual.HEADER)
        w.writeheader()
        w.writerows(asked)
    _write(tmp_path, graded)
    zoe = _rows(out / "gradebook.csv")[1]
    assert (zoe["lab98-why"], zoe["points"], zoe["max_points"]) == ("1", "3", "3")
    assert "not yet read" not in zoe["notes"]
    assert {r["student"]: r["total"] for r in _rows(out / "summary.csv")} == {"ann": "0", "zoe": "3"}
    assert _rows(out / "manual.csv")[1]["points"] == "1"  # the rewrite keeps it
    graded[0].result.manual[0]["answer"] = "A new answer, handed in again."  # zoe's
    _write(tmp_path, graded)
    assert _rows(out / "gradebook.csv")[1]["lab98-why"] == ""  # a changed answer is read again
    asked[1]["points"] = "5"
    with (out / "manual.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, manual.HEADER)
        w.writeheader()
        w.writerows(asked)
    with pytest.raises(InputError, match="line 3: points '5' must be a number from 0 to 1"):
        manual.read_marks(out / "manual.csv")


def test_an_override_of_a_question_is_counted_in_points_and_the_summary(tmp_path: Path) -> None:
    graded = _graded(tmp_path)
    (tmp_path / "fix.csv").write_text("student,lab,lab98-why,comment\nann,lab98_fixture,1,good guess\n",
                                      encoding="utf-8")
    fixes = overrides.read(tmp_path / "fix.csv")
    out = _write(tmp_path, graded, fixes)
    ann = _rows(out / "gradebook.csv")[0]
    assert (ann["lab98-why"], ann["points"], ann["max_points"], ann["overridden"]) == ("1", "1", "3", "lab98-why")
    summary = {r["student"]: r for r in _rows(out / "summary.csv")}
    assert (summary["ann"]["total"], summary["ann"]["max_total"]) == ("1", "3")


@pytest.mark.parametrize("line,problem", [
    ("student,lab,lab98-add\nmallory,lab98_fixture,1\n", "line 2: no student 'mallory'"),
    ("student,lab,lab98-add\nann,lab99_other,1\n", "line 2: 'ann' handed in no 'lab99_other'"),
    ("submission,lab98-add\n/nowhere/x.ipynb,1\n", "line 2: no submission '/nowhere/x.ipynb'"),
    ("student,lab,lab98-add\nann,lab98_fixture,1\nann,lab98_fixture,-7\n", "line 3: lab98-add = '-7' is not a number of points from 0 to 2"),
    ("student,lab,lab98-add\nann,lab98_fixture,99\n", "from 0 to 2"),
    ("student,lab,lab98-why\nann,lab98_fixture,2\n", "from 0 to 1"),
    ("student,lab,points\nann,lab98_fixture,4\n", "from 0 to 3"),
    ("student,lab,lab98-mul\nann,lab98_fixture,1\n", "no exercise or question 'lab98-mul'"),
])
def test_override_lines_that_name_nothing_or_give_impossible_points_are_refused(tmp_path: Path, line: str,
                                                                              problem: str) -> None:
    graded = _graded(tmp_path)
    (tmp_path / "fix.csv").write_text(line, encoding="utf-8")
    with pytest.raises(InputError, match=problem.replace("(", r"\(")):
        grade_mod._corrections([g.submission for g in graded], tmp_path / "out", tmp_path / "fix.csv")


def test_overrides_are_kept_for_a_run_without_the_flag(tmp_path: Path) -> None:
    subs = [g.submission for g in _graded(tmp_path)]
    out = tmp_path / "out"
    (tmp_path / "fix.csv").write_text("student,lab,lab98-add\nann,lab98_fixture,1.5\n", encoding="utf-8")
    fixes, _ = grade_mod._corrections(subs, out, tmp_path / "fix.csv")
    overrides.keep(out / grade_mod.STATE, fixes)
    again, _ = grade_mod._corrections(subs, out, None)  # a resume without --overrides
    assert [r["lab98-add"] for r in again] == ["1.5"]
    (tmp_path / "none.csv").write_text("student,lab\n", encoding="utf-8")
    assert grade_mod._corrections(subs, out, tmp_path / "none.csv")[0] == []  # a header only clears them


def _shard(folder: Path, i: int, n: int, every: list[Submission]) -> Path:
    subs, places = shards.select(every, (i, n))
    state = folder / ".grading"
    shards.save(state, (i, n), places, len(every), subs, shards.identity(every))
    rows = [shards.state_row(Graded(s, RunResult([TestOutcome("lab98-add", 2, 2, True, "ok")])), "k") for s in subs]
    (state / "results.json").write_text(json.dumps(rows), encoding="utf-8")
    return folder


def test_shards_of_two_batches_of_the_same_size_are_not_merged(tmp_path: Path) -> None:
    one = [Submission(tmp_path / f"a{k}.ipynb", f"a{k}", LAB, None) for k in range(4)]
    two = [Submission(tmp_path / f"b{k}.ipynb", f"b{k}", LAB, None) for k in range(4)]
    assert len(shards.collect([_shard(tmp_path / "s0", 0, 2, one), _shard(tmp_path / "s1", 1, 2, one)],
                              ".grading")[0]) == 4
    with pytest.raises(InputError, match="two different batches"):
        shards.collect([_shard(tmp_path / "t0", 0, 2, one), _shard(tmp_path / "t1", 1, 2, two)], ".grading")


def test_a_shard_run_into_another_shards_folder_is_refused(tmp_path: Path) -> None:
    every = [Submission(tmp_path / f"a{k}.ipynb", f"a{k}", LAB, None) for k in range(4)]
    folder = _shard(tmp_path / "s0", 0, 2, every)
    shards.refuse_other_part(folder / ".grading", folder, (0, 2))  # its own resume: fine
    with pytest.raises(InputError, match="holds the grades of shard 0/2, and this run is shard 1/2"):
        shards.refuse_other_part(folder / ".grading", folder, (1, 2))
    with pytest.raises(InputError, match="this run is a whole batch"):
        shards.refuse_other_part(folder / ".grading", folder, None)


def test_make_grade_takes_the_output_folder_and_the_overrides() -> None:
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[3]
    said = subprocess.run(["make", "-n", "-C", str(root), "grade", "SUBMISSIONS=subs", "OUT=my-grades",
                           "OVERRIDES=fixes.csv"], capture_output=True, text=True, check=True).stdout
    line = next(x for x in said.splitlines() if "instructors.batch grade" in x)
    assert "--out my-grades" in line and "--overrides fixes.csv" in said


@pytest.mark.slow
def test_a_real_batch_counts_points_given_in_manual_csv_and_overrides_and_keeps_them(tmp_path: Path) -> None:
    from tests.support.grading import ADD, LAB as FIXTURE, MUL, solution_nb, student_nb, write_exercises
    from tests.support.grading import write_nb, write_solution

    from instructors.batch.grade import grade
    from instructors.batch.labgen import lab_from_solution

    sols = write_solution(tmp_path / "solutions").parent
    lab = lab_from_solution(solution_nb())
    lab["cells"][2]["source"], lab["cells"][4]["source"] = ADD, MUL
    lab["cells"][6]["source"] = "Because the rounding errors are small."
    subs, out = tmp_path / "subs", tmp_path / "out"
    write_nb(subs / f"{FIXTURE}__ann.ipynb", lab)
    write_nb(subs / f"{FIXTURE}__zoe.ipynb", student_nb(ADD, MUL))
    kwargs = dict(solutions_dir=sols, exercises=write_exercises(tmp_path / "keys"), quiet=True, cell_timeout=30,
                  total_timeout=120, time_factor=2)
    grade([subs], out, **kwargs)
    rows = {r["student"]: r for r in _rows(out / "gradebook.csv")}
    assert [(r["lab98-why"], r["points"], r["max_points"]) for r in rows.values()] == [("", "5", "6")] * 2
    asked = _rows(out / "manual.csv")
    assert [(r["student"], r["answer"]) for r in asked] == [("ann", "Because the rounding errors are small."),
                                                           ("zoe", "(no answer cell with this id)")]
    asked[0]["points"] = "1"
    with (out / "manual.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, manual.HEADER)
        w.writeheader()
        w.writerows(asked)
    (tmp_path / "fix.csv").write_text(f"student,lab,lab98-why\nzoe,{FIXTURE},0.5\n", encoding="utf-8")
    grade([subs], out, overrides=tmp_path / "fix.csv", **kwargs)
    grade([subs], out, **kwargs)  # a resume without --overrides keeps them
    rows = {r["student"]: r for r in _rows(out / "gradebook.csv")}
    assert (rows["ann"]["points"], rows["zoe"]["points"], rows["zoe"]["overridden"]) == ("6", "5.5", "lab98-why")
    assert {r["student"]: r["total"] for r in _rows(out / "summary.csv")} == {"ann": "6", "zoe": "5.5"}
