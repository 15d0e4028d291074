"""Batch grading survives what submissions do (loops, exits, syntax errors, renames) and what hostile
ones try (patching numpy, the check API or builtins, input transformers, reading the answer key,
killing the worker, writing the output folder, forging results, leaving processes behind,
overwriting another submission): each scores what its honest content earns, and no other row changes."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest
from tests.support.grading import ADD, LAB, MUL, SENTINEL, solution_nb, student_nb, write_exercises, write_nb, write_solution

from instructors.batch import sandbox
from instructors.batch.grade import grade
from instructors.batch.labgen import lab_from_solution
from instructors.batch.submissions import file_hash

pytestmark = pytest.mark.skipif(not sandbox.bwrap_works(), reason="needs bubblewrap (apt-get install bubblewrap): "
                                "the hostile submissions here would reach the test runner without namespaces")

WRONG_ADD = "def add(a, b):\n    return 0"
LOOP = "while True:\n    pass"
STUCK = "while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass"
MARK = "grading-linger-marker"
SNOOP = """\
import glob, importlib.util, os, pathlib, helpers
needle = 'HIDDEN-' + 'SENTINEL'
names = os.listdir('.')
found = []
for pattern in ['*.ipynb', '**/*.ipynb', '../*.ipynb', '../*/*.ipynb', '../solutions/*.ipynb', '/work/**/*.ipynb',
                '/tmp/**/lab98.py', '/tmp/**/*.ipynb', '/root/**/lab98.py']:
    found += glob.glob(pattern, recursive=True)
keys = list(pathlib.Path(helpers.__file__).parent.glob('labs/*/key.py'))
keys += list(pathlib.Path(helpers.__file__).parents[1].glob('instructors')) + [importlib.util.find_spec('instructors')]
keys = [k for k in keys if k]
leaks = [f for f in found if needle in open(f, errors='replace').read()]
if names or leaks or keys or 'GRADING_EXERCISES' in os.environ:
    raise RuntimeError(f'cwd holds {names}; hidden tests readable in {leaks}; answer keys there: {keys}')
"""
PATCH_NUMPY = ("import numpy\nnumpy.isclose = lambda *a, **k: numpy.ones(1, bool)\nnumpy.allclose = lambda *a, **k: True\n"
               "numpy.array_equal = lambda *a, **k: True")
PATCH_CHECK = ("import helpers.grading.check as c, helpers.grading.compare as k, helpers.grading.exercise as e\n"
               "k.compare_arrays = lambda *a, **kw: None\nk.compare = lambda *a, **kw: None\n"
               "e.Exercise.judge = lambda self, got, exp: None\n"
               "c.verdict = lambda ex, fn, cases=None: c.Verdict(ex.id, True, 'ok')")
PATCH_BUILTINS = ("import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\n"
                  "builtins.round = lambda *a, **k: 0")
TRANSFORM = ("ip = get_ipython()\nip.input_transformers_post.append(lambda lines: ['add = lambda a, b: 0\\n'] + lines)\n"
             "ip.ast_transformers.append(__import__('ast').NodeTransformer())")
FORGE_RESULT = ("import os, json\nfor fd in ('/proc/%d/fd/1' % os.getppid(), '/dev/stdout'):\n    try:\n"
                "        open(fd, 'w').write('@result x ' + json.dumps({'outcomes': []}) + '\\n')\n"
                "    except OSError:\n        pass\n"
                "from IPython.display import display\n"
                "display({'application/vnd.gpu-int8-course.answer+json': '{\"token\": \"guess\", \"status\": \"answer\", "
                "\"answer\": 0}'}, raw=True)")
KILL_PARENT = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"
KILL_ALL = ("import os, signal\nfor p in os.listdir('/proc'):\n    if p.isdigit() and int(p) != os.getpid():\n"
            "        try:\n            os.kill(int(p), signal.SIGKILL)\n        except OSError:\n            pass")
LINGER = (f"import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 60 # {MARK}'], start_new_session=True)\n"
          f"subprocess.Popen(['sh', '-c', 'sleep 61 # {MARK}'])")

# student -> (code cells, expected points for add and mul). Attacks whose effects are independent share a
# submission (each leaves its own trace in the feedback), so the batch starts as few kernels as it can.
CASES = {
    "perfect": ((ADD, "TEST_ADD", MUL, "TEST_MUL"), (2, 3)),
    "loop": ((ADD, LOOP, MUL), (2, 3)),  # stopped by an interrupt
    "aaa_stuck": ((ADD, STUCK, MUL), (2, 3)),  # survives the interrupt; named to start first (it mostly waits)
    "missing": ((ADD, "TEST_ADD", "def mul(a, b)\n    return a * b", "def multiply(a, b):\n    return a * b",
                 "TEST_MUL"), (2, 0)),  # a syntax error, a renamed function, the test cells left in
    "duplicated": ((ADD, ADD, "TEST_ADD", "TEST_ADD", MUL, MUL, "TEST_MUL"), (2, 3)),
    "exits": ((ADD, "import sys\nsys.exit(1)", "import os\nos._exit(1)", "exit()", MUL), (2, 3)),
    "huge": ((ADD, "for i in range(500):\n    print('x' * 20_000)", "print('y' * 5_000_000)", MUL), (2, 3)),
    "cheats": ((WRONG_ADD, "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n"
                "def check(*args, **kwargs):\n    return None", MUL, PATCH_NUMPY, PATCH_CHECK, PATCH_BUILTINS,
                FORGE_RESULT), (0, 3)),
    "hardcoded": (("def add(a, b):\n    return 3", MUL), (0, 3)),  # passes only the visible case
    "killer": ((ADD, KILL_PARENT, KILL_ALL, MUL), (2, 3)),
}


def _lingering() -> list[int]:
    """Processes whose command line carries the linger marker."""
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and MARK in (p / "cmdline").read_bytes().decode(errors="replace"):
                out.append(int(p.name))
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade every fixture submission once, in one batch (cwd = a folder that also holds solutions/)."""
    root = tmp_path_factory.mktemp("grading")
    write_solution(root / "solutions")
    keys = write_exercises(root / "answer_key")
    subs = root / "subs"
    out = root / "artifacts" / "grades"
    victim = subs / f"{LAB}__perfect.ipynb"
    forge = (f"import pathlib\nfor p in [pathlib.Path({str(out)!r}), pathlib.Path('artifacts/grades')]:\n"
             f"    try:\n        p.mkdir(parents=True, exist_ok=True)\n"
             f"        (p / 'gradebook.csv').write_text('student,points\\nmallory,1000\\n')\n"
             f"    except OSError:\n        pass")
    overwrite = (f"try:\n    open({str(victim)!r}, 'w').write('{{}}')\nexcept OSError:\n    pass")
    paths = {s: write_nb(subs / f"{LAB}__{s}.ipynb", student_nb(*cells)) for s, (cells, _) in CASES.items()}
    # runs first in name order: reads the answer key, forges and overwrites files, leaves processes, transforms
    paths["aaa_hostile"] = write_nb(subs / f"{LAB}__aaa_hostile.ipynb",
                                    student_nb(SNOOP, overwrite, forge, ADD, MUL, LINGER, TRANSFORM))
    paths["stub"] = write_nb(subs / f"{LAB}__stub.ipynb", lab_from_solution(solution_nb()))
    paths["bob"] = write_nb(subs / "section1" / "bob" / f"{LAB} (1).ipynb", student_nb(ADD, MUL))
    paths["notjson"] = subs / f"{LAB}__notjson.ipynb"
    paths["notjson"].write_text("{ this is not a notebook", encoding="utf-8")
    hashes = {s: file_hash(p) for s, p in paths.items()}
    start = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        # three at a time on two cores: the submissions that wait out time limits leave the CPU to the others
        result = grade([subs], out, solutions_dir=root / "solutions", cell_timeout=3, total_timeout=60,
                       jobs=3, quiet=True, exercises=keys, time_factor=2)
    seconds = time.monotonic() - start
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}
    feedback = {p.name.split("__")[0]: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.md")}
    return {"rows": rows, "feedback": feedback, "paths": paths, "hashes": hashes, "out": out, "seconds": seconds,
            "graded": {g.submission.student: g for g in result}, "root": root, "lingering": _lingering()}


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(CASES) + ["aaa_hostile", "section1/bob"])
def test_each_submission_scores_what_it_deserves(graded: dict, student: str) -> None:
    expected = CASES.get(student, (None, (2, 3)))[1]
    row = graded["rows"][student]
    fb = graded["feedback"][student.replace("/", "_")]
    assert row["status"] == "graded", fb
    assert (float(row["lab98-add"]), float(row["lab98-mul"])) == expected, fb
    assert float(row["points"]) == sum(expected) and float(row["max_points"]) == 6  # 2 + 3, and 1 read by the instructor


@pytest.mark.slow
def test_stub_is_not_done_yet(graded: dict) -> None:
    row, fb = graded["rows"]["stub"], graded["feedback"]["stub"]
    assert float(row["points"]) == 0 and "not done yet" in fb


@pytest.mark.slow
def test_failures_explain_themselves(graded: dict) -> None:
    fb = graded["feedback"]
    assert "name 'mul' is not defined" in fb["missing"] and "rename or delete" in fb["missing"]
    assert "SyntaxError" in fb["missing"]
    assert "CellTimeout" in fb["loop"] and "code cell 3 hung the kernel" in fb["aaa_stuck"]
    assert "killed" not in fb["aaa_stuck"]
    assert "SystemExit" in fb["exits"] and "code cell 4 stopped the kernel (the kernel died" in fb["exits"]
    assert "code cell 5 stopped the kernel (the cell asked the kernel to exit" in fb["exits"]
    assert "not a readable notebook" in fb["notjson"] and float(graded["rows"]["notjson"]["points"]) == 0
    assert f"{SENTINEL}-add" in fb["hardcoded"]  # the hidden case caught it


@pytest.mark.slow
def test_huge_output_is_truncated(graded: dict) -> None:
    assert "printed 10,000,500 characters" in graded["feedback"]["huge"]
    assert "printed 5,000,001 characters" in graded["feedback"]["huge"]
    assert len(graded["feedback"]["huge"]) < 5000


@pytest.mark.slow
def test_answer_key_unreachable_and_outputs_not_forged(graded: dict) -> None:
    assert "Errors in your cells" not in graded["feedback"]["aaa_hostile"], graded["feedback"]["aaa_hostile"]
    text = (graded["out"] / "gradebook.csv").read_text()
    assert "mallory" not in text and "mallory" not in graded["rows"] and text.startswith("student,lab,")


@pytest.mark.slow
def test_no_process_outlives_its_submission(graded: dict) -> None:
    assert graded["lingering"] == []


@pytest.mark.slow
def test_submissions_never_modified(graded: dict) -> None:
    for student, path in graded["paths"].items():
        assert file_hash(path) == graded["hashes"][student], student


@pytest.mark.slow
def test_summary_totals_per_student(graded: dict) -> None:
    rows = {r["student"]: r for r in csv.DictReader((graded["out"] / "summary.csv").open(encoding="utf-8"))}
    assert rows["perfect"][LAB] == "5" and rows["perfect"]["max_total"] == "6"
    assert rows["section1/bob"]["total"] == "5"


@pytest.mark.slow
def test_the_question_read_by_the_instructor_is_in_manual_csv_with_each_answer(graded: dict) -> None:
    asked = {r["student"]: r for r in csv.DictReader((graded["out"] / "manual.csv").open(encoding="utf-8"))}
    assert {r["question"] for r in asked.values()} == {"lab98-why"} and asked["stub"]["max_points"] == "1"
    assert asked["stub"]["answer"].endswith("YOUR ANSWER HERE") and asked["stub"]["points"] == ""
    assert asked["perfect"]["answer"] == "(no answer cell with this id)"  # its notebook has code cells only
    row = graded["rows"]["perfect"]
    assert row["lab98-why"] == "" and "not yet read by you: lab98-why" in row["notes"]


@pytest.mark.slow
def test_a_rerun_resumes_and_regrades_only_a_changed_file(graded: dict) -> None:
    out, root = graded["out"], graded["root"]
    before = (out / "gradebook.csv").read_text()
    kwargs = dict(solutions_dir=root / "solutions", cell_timeout=3, total_timeout=60, jobs=2, quiet=True,
                  exercises=root / "answer_key", time_factor=2)
    start = time.monotonic()
    assert len(grade([root / "subs"], out, **kwargs)) == len(graded["rows"])
    assert time.monotonic() - start < graded["seconds"] / 3  # nothing was graded again
    assert (out / "gradebook.csv").read_text() == before
    write_nb(graded["paths"]["hardcoded"], student_nb(ADD, MUL))  # the student fixed it: graded again
    grade([root / "subs"], out, **kwargs)
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}
    assert rows["hardcoded"]["points"] == "5" and rows["perfect"]["points"] == "5"
    asked = list(csv.DictReader((out / "manual.csv").open(encoding="utf-8")))
    for r in asked:
        r["points"] = "1" if r["student"] == "perfect" else r["points"]  # the instructor read it
    with (out / "manual.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(asked[0]))
        w.writeheader()
        w.writerows(asked)
    grade([root / "subs"], out, **kwargs)  # nothing to grade: the point is counted
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}
    assert (rows["perfect"]["lab98-why"], rows["perfect"]["points"], rows["perfect"]["max_points"]) == ("1", "6", "6")
    summary = {r["student"]: r for r in csv.DictReader((out / "summary.csv").open(encoding="utf-8"))}
    assert summary["perfect"]["total"] == "6"
