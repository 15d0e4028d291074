"""Batch grading survives what submissions do: loops, exits, syntax errors, renames, snooping, forgery."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from grading_support import ADD, LAB, MUL, SENTINEL, solution_nb, student_nb, write_nb, write_solution

from helpers.errors import InputError
from helpers.grading.grade import grade, grade_one, main
from helpers.grading.labgen import lab_from_solution
from helpers.grading.submissions import describe, discover, file_hash, graded_tests, match_solution

LOOP = "while True:\n    pass"
STUCK = "while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass"
SNOOP = """\
import glob, os
names = os.listdir('.')
found = []
for pattern in ['*.ipynb', '**/*.ipynb', '../*.ipynb', '../*/*.ipynb', 'solutions/*.ipynb',
                '../solutions/*.ipynb', '../../solutions/*.ipynb']:
    found += glob.glob(pattern, recursive=True)
needle = 'HIDDEN-' + 'SENTINEL'
leaks = [f for f in found if needle in open(f, errors='replace').read()]
history = ' '.join(In) if 'In' in globals() else ''
if names or leaks or needle in history:
    raise RuntimeError(f'cwd holds {names}; hidden tests readable in {leaks}')
"""

# student -> (code cells, expected points for add and mul)
CASES = {
    "perfect": ((ADD, "TEST_ADD", MUL, "TEST_MUL"), (2, 3)),
    "loop": ((ADD, LOOP, MUL), (2, 3)),
    "stuck": ((ADD, STUCK, MUL), (2, 3)),
    "syntax": ((ADD, "def mul(a, b)\n    return a * b"), (2, 0)),
    "deleted": ((ADD, "TEST_ADD", "TEST_MUL"), (2, 0)),
    "duplicated": ((ADD, ADD, "TEST_ADD", "TEST_ADD", MUL, MUL, "TEST_MUL"), (2, 3)),
    "renamed": ((ADD, "def multiply(a, b):\n    return a * b"), (2, 0)),
    "sysexit": ((ADD, "import sys\nsys.exit(1)", MUL), (2, 3)),
    "osexit": ((ADD, "import os\nos._exit(1)", MUL), (2, 3)),
    "exit": ((ADD, "exit()", MUL), (2, 3)),
    "huge": ((ADD, "for i in range(500):\n    print('x' * 20_000)", "print('y' * 5_000_000)", MUL), (2, 3)),
    "snoop": ((SNOOP, ADD, MUL), (2, 3)),
    "cheat": (("def add(a, b):\n    return 0",
               "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n"
               "def check(*args, **kwargs):\n    return None", MUL), (0, 3)),
    "hardcoded": (("def add(a, b):\n    return 3", MUL), (0, 3)),  # passes only the visible test
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade every fixture submission once (cwd = a folder that also holds solutions/)."""
    root = tmp_path_factory.mktemp("grading")
    write_solution(root / "solutions")
    subs = root / "subs"
    out = root / "artifacts" / "grades"
    forge = (f"import pathlib\nfor p in [pathlib.Path({str(out)!r}), pathlib.Path('artifacts/grades')]:\n"
             f"    p.mkdir(parents=True, exist_ok=True)\n"
             f"    (p / 'gradebook.csv').write_text('student,points\\nmallory,1000\\n')")
    paths = {s: write_nb(subs / f"{LAB}__{s}.ipynb", student_nb(*cells)) for s, (cells, _) in CASES.items()}
    paths["forge"] = write_nb(subs / f"{LAB}__forge.ipynb", student_nb(forge, ADD, MUL))
    paths["stub"] = write_nb(subs / f"{LAB}__stub.ipynb", lab_from_solution(solution_nb()))
    paths["bob"] = write_nb(subs / "bob" / f"{LAB} (1).ipynb", student_nb(ADD, MUL))
    paths["notjson"] = subs / f"{LAB}__notjson.ipynb"
    paths["notjson"].write_text("{ this is not a notebook", encoding="utf-8")
    hashes = {s: file_hash(p) for s, p in paths.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        result = grade([subs], out, solutions_dir=root / "solutions", cell_timeout=3,
                       total_timeout=60, jobs=3, quiet=True)
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}
    feedback = {p.name.split("__")[0]: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.md")}
    return {"rows": rows, "feedback": feedback, "paths": paths, "hashes": hashes,
            "graded": {g.submission.student: g for g in result}, "root": root}


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(CASES) + ["forge", "bob"])
def test_each_submission_scores_what_it_deserves(graded: dict, student: str) -> None:
    expected = CASES.get(student, (None, (2, 3)))[1]
    row = graded["rows"][student]
    assert (float(row["lab98.add"]), float(row["lab98.mul"])) == expected, graded["feedback"][student]
    assert float(row["points"]) == sum(expected) and float(row["max_points"]) == 5


@pytest.mark.slow
def test_stub_scores_zero_with_the_hint(graded: dict) -> None:
    row, fb = graded["rows"]["stub"], graded["feedback"]["stub"]
    assert float(row["points"]) == 0
    assert "NotImplementedError: Not implemented yet. Hint: use the + operator" in fb


@pytest.mark.slow
def test_failures_explain_themselves(graded: dict) -> None:
    fb = graded["feedback"]
    assert "name 'mul' is not defined" in fb["renamed"] and "rename or delete" in fb["renamed"]
    assert "SyntaxError" in fb["syntax"]
    assert "CellTimeout" in fb["loop"]
    assert "hung the kernel" in fb["stuck"] and "killed" not in fb["stuck"]
    assert "stopped the kernel" in fb["osexit"] and "asked the kernel to exit" in fb["exit"]
    assert "SystemExit" in fb["sysexit"]
    assert "not a readable notebook" in fb["notjson"] and float(graded["rows"]["notjson"]["points"]) == 0
    assert f"{SENTINEL}-add" in fb["hardcoded"]  # the hidden test caught it


@pytest.mark.slow
def test_huge_output_is_truncated(graded: dict) -> None:
    assert "printed 10,000,500 characters" in graded["feedback"]["huge"]
    assert "printed 5,000,001 characters" in graded["feedback"]["huge"]
    assert len(graded["feedback"]["huge"]) < 5000


@pytest.mark.slow
def test_hidden_tests_unreachable_and_gradebook_not_forged(graded: dict) -> None:
    assert "Errors in your cells" not in graded["feedback"]["snoop"], graded["feedback"]["snoop"]
    assert "mallory" not in (graded["root"] / "artifacts" / "grades" / "gradebook.csv").read_text()
    assert "mallory" not in graded["rows"]
    assert not (graded["root"] / "artifacts" / "grades" / "gradebook.csv").read_text().startswith("student,points")


@pytest.mark.slow
def test_submissions_never_modified(graded: dict) -> None:
    for student, path in graded["paths"].items():
        assert file_hash(path) == graded["hashes"][student], student


@pytest.mark.slow
def test_total_timeout_stops_a_slow_submission(tmp_path: Path) -> None:
    write_solution(tmp_path / "solutions")
    path = write_nb(tmp_path / f"{LAB}__slow.ipynb", student_nb(ADD, "import time\ntime.sleep(30)", MUL))
    sub = discover([path], tmp_path / "solutions")[0]
    result = grade_one(sub, cell_timeout=20, total_timeout=4)
    assert sum(o.points for o in result.outcomes) == 0
    assert all("time" in o.message for o in result.outcomes)
    assert result.seconds < 20


def test_naming_conventions(tmp_path: Path) -> None:
    sols = [tmp_path / "lab04_per_channel_and_requant.ipynb", tmp_path / "lab05_entropy.ipynb"]
    assert match_solution("lab04_per_channel_and_requant", sols) == sols[0]
    assert match_solution("lab04_per_channel_and_requant (1)", sols) == sols[0]
    assert match_solution("lab05_renamed_by_student", sols) == sols[1]
    assert match_solution("homework", sols) is None
    s = describe(tmp_path / "subs" / "lab05_entropy__alice.ipynb", tmp_path / "subs", sols)
    assert (s.student, s.lab) == ("alice", "lab05_entropy")
    s = describe(tmp_path / "subs" / "bob" / "lab05_entropy.ipynb", tmp_path / "subs", sols)
    assert (s.student, s.lab) == ("bob", "lab05_entropy")


def test_graded_tests_read_points_and_hidden_code() -> None:
    tests = graded_tests(solution_nb())
    assert [(t.grade_id, t.points) for t in tests] == [("lab98.add", 2), ("lab98.mul", 3)]
    assert SENTINEL in tests[0].source
    bad = solution_nb()
    bad["cells"][5]["metadata"]["nbgrader"]["grade_id"] = "lab98.add"
    with pytest.raises(InputError, match="repeated grade_id"):
        graded_tests(bad)
    bad = solution_nb()
    bad["cells"][3]["metadata"]["nbgrader"]["points"] = "two"
    with pytest.raises(InputError, match="points='two'"):
        graded_tests(bad)


def test_bad_arguments_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(InputError, match="no submissions"):
        grade([], tmp_path)
    with pytest.raises(InputError, match="no solution notebooks"):
        grade([tmp_path], tmp_path / "out", solutions_dir=tmp_path / "none")
    write_solution(tmp_path / "solutions")
    with pytest.raises(InputError, match="neither a notebook"):
        grade([tmp_path / "missing.ipynb"], tmp_path / "out", solutions_dir=tmp_path / "solutions")
    assert main([str(tmp_path / "missing.ipynb"), "--solutions", str(tmp_path / "solutions")]) == 2
    assert "neither a notebook" in capsys.readouterr().out
    with pytest.raises(InputError, match="positive"):
        grade([tmp_path], tmp_path / "out", cell_timeout=0)
    with pytest.raises(InputError, match="no Jupyter kernel named"):
        grade([tmp_path], tmp_path / "out", solutions_dir=tmp_path / "solutions", kernel_name="nope")
    with pytest.raises(InputError, match="jobs"):
        grade([tmp_path], tmp_path / "out", solutions_dir=tmp_path / "solutions", jobs=0)


def test_unmatched_submission_gets_a_row_and_a_note(tmp_path: Path) -> None:
    write_solution(tmp_path / "solutions")
    write_nb(tmp_path / "subs" / "homework__zed.ipynb", student_nb(ADD))
    graded = grade([tmp_path / "subs"], tmp_path / "out", solutions_dir=tmp_path / "solutions", quiet=True)
    assert graded[0].result.outcomes == [] and "no solution notebook" in graded[0].result.notes[0]
    rows = list(csv.DictReader((tmp_path / "out" / "gradebook.csv").open()))
    assert rows[0]["student"] == "zed" and rows[0]["points"] == "0"
    assert json.loads(json.dumps(rows))  # plain strings only
    out = tmp_path / "cli"
    assert main([str(tmp_path / "subs"), "--out", str(out), "--solutions", str(tmp_path / "solutions")]) == 0
    assert (out / "gradebook.csv").exists() and (out / "feedback" / "zed__homework.md").exists()


def test_snoop_cell_would_catch_a_careless_grader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_solution(tmp_path / "solutions")  # a grader that ran kernels here would leak the tests
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="hidden tests readable"):
        exec(SNOOP, {})


def test_gradebook_and_feedback_files(tmp_path: Path) -> None:
    from helpers.grading.gradebook import Graded, write_feedback, write_gradebook
    from helpers.grading.runner import RunResult, TestOutcome
    from helpers.grading.submissions import Submission

    def sub(student: str, lab: str) -> Submission:
        return Submission(tmp_path / f"{lab}__{student}.ipynb", student, lab, None)

    wrong = "CheckFailed: 2 of 4 elements differ.\n    at (1,): yours 3 vs expected 2\nHint: use np.rint"
    graded = [
        Graded(sub("ann", "lab01_x"), RunResult([TestOutcome("lab01.a", 2, 2, True, "passed")])),
        Graded(sub("ann", "lab00_y"), RunResult([TestOutcome("lab00.q", 0, 2, False, wrong),
                                                 TestOutcome("lab00.s", 1, 1, True, "passed")],
                                                cell_errors=[(4, "ValueError", "bad")])),
        Graded(sub("ann", "lab00_y"), RunResult([], notes=["duplicate name"])),
    ]
    path = tmp_path / "out" / "gradebook.csv"
    path.parent.mkdir()
    path.write_text("forged\n")
    write_gradebook(graded, path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert list(rows[0]) == ["student", "lab", "submission", "lab00.q", "lab00.s", "lab01.a",
                             "points", "max_points", "notes"]
    assert [(r["lab01.a"], r["lab00.q"], r["points"], r["max_points"], r["notes"]) for r in rows] == [
        ("2", "", "2", "2", "0"), ("", "0", "1", "3", "1"), ("", "", "0", "0", "1")]
    files = write_feedback(graded, tmp_path / "out" / "feedback")
    assert [p.name for p in files] == ["ann__lab01_x.md", "ann__lab00_y.md", "ann__lab00_y_2.md"]
    text = files[1].read_text(encoding="utf-8")
    assert "| `lab00.q` | ✗ fail | 0 / 2 | CheckFailed: 2 of 4 elements differ. (details below) |" in text
    assert "```text\n" + wrong + "\n```" in text and "code cell 4: ValueError: bad" in text
