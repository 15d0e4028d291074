"""The grader's input, without kernels: rosters (separators, encodings, header, one student per name, unterminated
quotes), every file of a submissions folder listed, overrides merged into the gradebook and the summary, hand
edits refused, bad option values and unknown options one line on stderr with exit status 2."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import pytest
from tests.support.grading import LAB, student_nb, write_nb, write_solution

from helpers.errors import InputError
from instructors.batch import overrides
from instructors.batch.grade import main
from instructors.batch.gradebook import Graded, write_gradebook, write_summary
from instructors.batch.roster import read_roster
from instructors.batch.runner import RunResult, TestOutcome
from instructors.batch.submissions import Submission, discover, skipped_files


def _roster(tmp_path: Path, data: bytes) -> dict[str, str]:
    path = tmp_path / "roster.csv"
    path.write_bytes(data)
    return read_roster(path)


@pytest.mark.parametrize("sep", [",", ";", "\t"], ids=["comma", "semicolon", "tab"])
def test_separators_are_sniffed(tmp_path: Path, sep: str) -> None:
    text = sep.join(["name", "lms_id", "student"]) + "\n" + sep.join(["Alice Smith", "1234", "s001"]) + "\n" \
        + sep.join(["Bob", "999", "s002"]) + "\n"
    assert _roster(tmp_path, text.encode()) == {"alice smith": "s001", "1234": "s001", "bob": "s002", "999": "s002"}


def test_encodings_are_told_apart(tmp_path: Path) -> None:
    text = "alias,student\nJosé Núñez,s001\n"
    for data in (text.encode("utf-8"), b"\xef\xbb\xbf" + text.encode("utf-8"), text.encode("latin-1")):
        assert _roster(tmp_path, data) == {"josé núñez": "s001"}, data
    with pytest.raises(InputError, match="UTF-16"):
        _roster(tmp_path, text.encode("utf-16"))


def test_a_windows_1252_roster_keeps_its_curly_apostrophe(tmp_path: Path) -> None:
    text = "alias,student\nSeán O’Brien,s007\n"
    assert _roster(tmp_path, text.encode("cp1252")) == {"seán o’brien": "s007"}  # Latin-1 read U+0092 there


@pytest.mark.parametrize("text,problem", [
    ("smithalice,s001\nbob,s002\n", "header"),
    ("alias,student\nalice,s001\n\"bob,s002\ncarol,s003\n", "unterminated quote|line break"),
    ("alias,student\nalice,s001\nAlice,s002\n", "given to two students"),
    ("alias,student\nalice,s001\ns001,s002\n", "given to two students|id of student"),
    ("alias,student\nalice,\n", "no student id"),
    ("", "empty"),
], ids=["no-header", "unterminated-quote", "one-name-two-students", "id-is-another-name", "empty-id", "empty"])
def test_malformed_rosters_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem):
        _roster(tmp_path, text.encode())


def test_two_people_mapped_to_one_student_are_refused(tmp_path: Path) -> None:
    sols = write_solution(tmp_path / "solutions").parent
    write_nb(tmp_path / "subs" / f"{LAB}__alice.ipynb", student_nb())
    write_nb(tmp_path / "subs" / f"{LAB}__bob.ipynb", student_nb())
    roster = {"alice": "s001", "bob": "s001"}
    with pytest.raises(InputError, match="maps both 'alice'.*and 'bob'"):
        discover([tmp_path / "subs"], sols, roster)
    assert len(discover([tmp_path / "subs"], sols, {"alice": "s001"})) == 2


def test_every_file_gets_a_row_or_a_reason(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    write_nb(subs / f"{LAB}__alice.ipynb", student_nb())
    (subs / "notes.txt").write_text("hello")
    (subs / ".DS_Store").write_bytes(b"\0")
    with zipfile.ZipFile(subs / "carol.zip", "w") as z:
        z.writestr(f"{LAB}__carol.ipynb", "{}")
    (subs / ".ipynb_checkpoints").mkdir()
    (subs / ".ipynb_checkpoints" / f"{LAB}__alice-checkpoint.ipynb").write_text("{}")
    reasons = {p.name: why for p, why in skipped_files([subs])}
    assert set(reasons) == {"notes.txt", ".DS_Store", "carol.zip", f"{LAB}__alice-checkpoint.ipynb"}
    assert "unpack" in reasons["carol.zip"] and "python -m zipfile -e" in reasons["carol.zip"]
    assert "not a notebook" in reasons["notes.txt"] and "checkpoint" in reasons[f"{LAB}__alice-checkpoint.ipynb"]


def _graded(tmp_path: Path) -> list[Graded]:
    def sub(student: str) -> Submission:
        return Submission(tmp_path / f"{LAB}__{student}.ipynb", student, LAB, None)
    return [Graded(sub("ann"), RunResult([TestOutcome("lab98-add", 0, 2, False, "wrong"),
                                          TestOutcome("lab98-mul", 3, 3, True, "passed")])),
            Graded(sub("bo"), RunResult([TestOutcome("lab98-add", 2, 2, True, "passed"),
                                         TestOutcome("lab98-mul", 3, 3, True, "passed")]))]


def test_overrides_merge_into_gradebook_and_summary(tmp_path: Path) -> None:
    (tmp_path / "fix.csv").write_text("student;lab;lab98-add;comment\nann;lab98_fixture;1.5;regrade after appeal\n",
                                      encoding="utf-8")
    fixes = overrides.read(tmp_path / "fix.csv")
    graded = _graded(tmp_path)
    write_gradebook(graded, tmp_path / "gradebook.csv", fixes)
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "gradebook.csv").open(encoding="utf-8"))}
    assert (rows["ann"]["lab98-add"], rows["ann"]["points"], rows["ann"]["comment"]) == ("1.5", "4.5", "regrade after appeal")
    assert rows["ann"]["overridden"] == "lab98-add" and rows["bo"]["overridden"] == "" and rows["bo"]["points"] == "5"
    write_summary(graded, tmp_path / "summary.csv", {str(graded[0].submission.path): 4.5})
    summary = {r["student"]: r for r in csv.DictReader((tmp_path / "summary.csv").open(encoding="utf-8"))}
    assert summary["ann"]["total"] == "4.5"
    (tmp_path / "bad.csv").write_text("student,lab,lab98-add\nann,lab98_fixture,nan\n", encoding="utf-8")
    with pytest.raises(InputError, match="not a finite number"):
        write_gradebook(graded, tmp_path / "g2.csv", overrides.read(tmp_path / "bad.csv"))
    (tmp_path / "nokey.csv").write_text("who,points\nann,3\n", encoding="utf-8")
    with pytest.raises(InputError, match="student and lab"):
        overrides.read(tmp_path / "nokey.csv")


def test_a_hand_edited_gradebook_is_refused_not_overwritten(tmp_path: Path) -> None:
    write_gradebook(_graded(tmp_path), tmp_path / "gradebook.csv")
    overrides.remember(tmp_path, tmp_path / ".grading", ("gradebook.csv",))
    overrides.refuse_hand_edits(tmp_path, tmp_path / ".grading", ("gradebook.csv",))  # unchanged: fine
    with (tmp_path / "gradebook.csv").open("a", encoding="utf-8") as f:
        f.write("mallory,lab98_fixture,x,,,5,5,graded,0\n")
    with pytest.raises(InputError, match="--overrides"):
        overrides.refuse_hand_edits(tmp_path, tmp_path / ".grading", ("gradebook.csv",))


@pytest.mark.parametrize("args", [["--time-factor", "nan"], ["--cell-timeout", "nan"], ["--total-timeout", "inf"],
                                  ["--max-output", "-1"], ["--jobs", "0"], ["--time-factor", "0.5"],
                                  ["--memory", "nan"], ["--max-processes", "-3"], ["--shard", "2/2"],
                                  ["--bogus"], ["--cell-timeout", "-5"], ["--max-file-size", "-1"],
                                  ["--tmp-size", "lots"], ["--cpu-time", "1.5"]])
def test_bad_option_values_are_one_line_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str]) -> None:
    sols = write_solution(tmp_path / "solutions").parent
    nb = write_nb(tmp_path / "subs" / f"{LAB}__a.ipynb", student_nb())
    assert main([str(nb), "--solutions", str(sols), "--out", str(tmp_path / "out"), *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and captured.err.startswith("error: ")
    assert not (tmp_path / "out").exists()
