"""One grading worker: a process of its own per submission, started by the batch (instructors.batch.grade).

It reads its job as JSON on stdin (never on its command line), adopts every process the submission
starts, grades, prints ``@result <json>`` and kills whatever the submission left running. In
"calibrate" mode it grades the official solution, computes every expected answer with the answer
key (in this process) and measures how long each cell and test took on this machine. A kernel lab's kernel is
launched here from its description, and only when its functions are defined in the submitted notebook
(instructors.batch.sent_kernels).

    python -m instructors.batch.worker < job.json

Serves: instructors (batch grading).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

RESULT, PROGRESS = "@result ", "@progress "


def is_test_cell(cell: dict) -> bool:
    """True for an auto-graded test cell (nbgrader grade=true, not an answer cell)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def check_call(source: str) -> tuple[str, str] | None:
    """(exercise id, function name) of the first check("labNN.x", fn) call in a test cell's source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "check"
                and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and isinstance(node.args[1], ast.Name)):
            return node.args[0].value, node.args[1].id
    return None


def solution_tests(solution: dict) -> list[Any]:
    """The auto-graded tests of a solution notebook, in notebook order, with their cases (visible, then hidden)."""
    from helpers.errors import InputError
    from instructors.batch.runner import TestCase, TestCell
    from helpers.grading.exercise import get

    tests, seen = [], set()
    for i, cell in enumerate(solution.get("cells", [])):
        if cell.get("cell_type") != "code" or not is_test_cell(cell):
            continue
        meta = cell["metadata"]["nbgrader"]
        gid, points = meta.get("grade_id"), meta.get("points", 0)
        if not gid or gid in seen:
            raise InputError(f"test cell {i} of the solution has a missing or repeated grade_id {gid!r}; "
                             f"give each graded cell a unique one.")
        if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
            raise InputError(f"test cell {gid!r} has points={points!r}; use a number of 0 or more.")
        seen.add(gid)
        src = "".join(cell.get("source", ""))
        call = check_call(src)
        if call is None:
            raise InputError(f"test cell {gid!r} must call check(\"labNN.name\", your_function); "
                             f"see docs/instructors.md, 'Writing a lab'.")
        ex = get(call[0])
        cases = ex.visible() + list(ex.hidden() if ex.hidden else [])
        from instructors.batch.sent_kernels import describes_kernel
        from instructors.batch.visible import ref

        tests.append(TestCell(gid, float(points), ex.id, call[1], ref(ex.run),
                              [TestCase(c.label, tuple(c.args), dict(c.kwargs), None) for c in cases],
                              kernel=describes_kernel(ex.run)))
    return tests


def _judge(exercise: str, got: Any, expected: Any) -> None:
    """Compare in this process with the exercise's own rule."""
    from helpers.grading.exercise import get

    get(exercise).judge(got, expected)


def _expected(tests: list[Any]) -> dict[str, list[Any]]:
    """Every case's expected answer, computed with the answer key here."""
    from helpers.grading import wire
    from helpers.grading.exercise import Case, get

    out = {}
    for t in tests:
        ex = get(t.exercise)
        out[t.grade_id] = [wire.roundtrip(ex.expected(Case(c.label, c.args, c.kwargs))) for c in t.cases]
    return out


def grade_job(job: dict, emit: Any = print) -> dict:
    """Grade one job; return the result as a plain dict."""
    import nbformat

    from helpers.grading import feedback, wire
    from instructors.batch import limits, overwrite, sent_kernels
    from instructors.batch.runner import Limits, run_submission
    from instructors.batch.sandbox import Sandbox

    feedback.PICTURES = False
    os.environ["MPLBACKEND"] = "Agg"
    if job.get("exercises"):
        os.environ["GRADING_EXERCISES"] = job["exercises"]
    scratch = Path(job["scratch"])
    solution = json.loads(Path(job["solution"]).read_text(encoding="utf-8"))
    tests = solution_tests(solution)
    if any(t.kernel for t in tests):
        if not sent_kernels.can_vet():
            return {"outcomes": [], "notes": [], "not_graded": sent_kernels.CANNOT_VET}
        sent_kernels.require_vetting()
    expected_file = Path(job["expected"])
    if job["mode"] == "calibrate":
        expected = _expected(tests)
        expected_file.write_text(wire.dumps(expected), encoding="utf-8")
    else:
        expected = wire.loads(expected_file.read_text(encoding="utf-8"))
    limits_by_test = job.get("test_limits", {})
    for t in tests:
        for c, e in zip(t.cases, expected[t.grade_id]):
            c.expected = e
            c.timeout = float(limits_by_test.get(t.grade_id, job["limits"]["cell_timeout"]))
    try:
        nb = nbformat.read(job["notebook"], as_version=4)
    except Exception as exc:  # noqa: BLE001 - any unreadable file scores zero, with the reason
        why = f"the file is not a readable notebook ({type(exc).__name__}: {exc})"[:400]
        return {"outcomes": [{"grade_id": t.grade_id, "points": 0.0, "max_points": t.points, "passed": False,
                              "message": why, "seconds": 0.0} for t in tests], "notes": [why]}
    restored: list[str] = []
    if job["mode"] == "grade":  # cells a student may not edit come from the lab's current version
        nb, restored = overwrite.restore_node(nb, solution)
    cells = ["".join(c.source) if isinstance(c.source, list) else c.source
             for c in nb.cells if c.cell_type == "code" and not is_test_cell(c)]
    cells = [c for c in cells if c.strip()]
    counter = [0]

    res = limits.with_cpu(limits.Resources(**job.get("resources", {})), float(job["limits"]["total_timeout"]))

    def make_sandbox() -> Sandbox:
        counter[0] += 1
        work, conn = scratch / f"work{counter[0]}", scratch / f"conn{counter[0]}"
        work.mkdir(parents=True)
        conn.mkdir(parents=True)
        groups = limits.Groups(job.get("cgroups", []), f"{os.getpid()}-{counter[0]}", res)
        return Sandbox(job["sandbox"], Path(job["course"]), work, conn, res, groups)

    notebook = sent_kernels.Notebook(cells) if any(t.kernel for t in tests) else None
    result = run_submission(cells, tests, make_sandbox, Limits(**job["limits"]), _judge,
                            progress=lambda s: emit(PROGRESS + s, flush=True), skip=set(job.get("skip", [])),
                            bad_tests=dict(job.get("bad_tests", {})), notebook=notebook)
    result.notes = restored + result.notes
    return dataclasses.asdict(result)


def failure(exc: BaseException) -> str:
    """The "not graded" line for the grader's own failure: the error and the course line it came from."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/helpers/" in f.filename or "/instructors/" in f.filename]
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"the grader failed: {type(exc).__name__}: {exc}{where}"[:600]


def skip_unused_imports() -> None:
    """Skip an optional module nbformat pulls in (through jsonschema) that grading never uses.

    jsonschema builds an RFC 3987 grammar when it finds ``rfc3987_syntax`` (about 1.5 s, paid by every
    worker); it checks only "iri" string formats, which no notebook schema uses.
    """
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: "import" fails, and is skipped


def main() -> int:
    """Read the job from stdin, grade, print the result line."""
    from instructors.batch import procs

    skip_unused_imports()
    procs.become_subreaper()
    job = json.loads(sys.stdin.read())
    t0 = time.monotonic()
    try:
        out = grade_job(job)
    except Exception as exc:  # noqa: BLE001 - the grader's own failure: reported as "not graded"
        out = {"outcomes": [], "notes": [], "not_graded": failure(exc)}
    finally:
        procs.kill_descendants()
    out["seconds"] = time.monotonic() - t0
    print(f"{RESULT}{job.get('nonce', '')} {json.dumps(out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
