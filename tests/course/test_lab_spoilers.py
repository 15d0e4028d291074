"""No lab gives an answer away before the student's code runs.

Every lab in labs/ is executed as a student first meets it (unfinished, "Run All") and its outputs are searched
for the official solution's numbers: the values of the lab's stored records (reference/*/results.json, formatted
the ways the course prints them) and the numbers the official solution prints in the cells that depend on its
answers (cells where the unfinished lab says "not done yet" or prints nothing). A number the lab's own text
already states is not a spoiler. The solution is executed only for a lab that prints a number its text does
not state, since only such a number can be one. The outputs must also fit the page: no output line wider than PAGE characters.
The labs run two at a time, each in its own kernel.

The same run shows that the unfinished lab is ready for students and for the grader (test_all_labs.py grades only the
solutions): Run All never stops (no cell raises: demo cells that need a student's function ask
helpers.grading.ready() first), every graded test of the solution is in the lab and says "not done yet" (the grader's
probe decides that with the same is_stub as check(), so the grader scores the lab zero with that message), and no cell
prints more than the grader keeps of a cell (a longer one would put a note in the lab's grading).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from instructors.batch.runner import Limits
from instructors.batch.worker import is_test_cell

ROOT = Path(__file__).resolve().parents[2]
LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))
PAGE = 160  # characters: wider output lines wrap in JupyterLab's output area at the course's page width
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
NOT_DONE = "not done yet"


def execute(path: Path) -> nbformat.NotebookNode:
    """The notebook after Run All in its own folder, errors kept in the outputs (Run All never stops in a lab)."""
    import nbclient

    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def output_text(cell: nbformat.NotebookNode) -> str:
    """What a code cell shows, as text (streams, plain-text reprs, errors)."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") == "error":
            parts.append(f"{o.get('ename')}: {o.get('evalue')}")
        else:
            parts.append(str((o.get("data") or {}).get("text/plain", "")))
    return "".join(parts)


def telling(token: str) -> bool:
    """True for a number specific enough to give something away: two significant digits after a point, or an
    integer of three digits or more (not 0, 1, 2, 32 or a cell count)."""
    digits = token.lstrip("-").replace(".", "").lstrip("0")
    return len(digits) >= 2 if "." in token else len(digits) >= 3


def numbers(text: str) -> set[str]:
    """The telling numbers written in `text`."""
    return {t for t in NUMBER.findall(text) if telling(t)}


def record_values(lab: str, root: Path = ROOT) -> dict[str, str]:
    """{printed form: record name} for every stored record of this lab, in the forms the course prints."""
    out = {}
    for path in sorted((root / "reference").glob("*/results.json")):
        for rec in json.loads(path.read_text()):
            name, value = rec.get("name", ""), rec.get("value")
            if name.startswith(f"{lab}.") and isinstance(value, (int, float)):
                for form in (f"{value:.2f}", f"{value:.1f}", f"{value:.3g}", f"{value:.4g}", f"{value:g}"):
                    if telling(form):
                        out.setdefault(form, name)
    return out


def solution_values(solution: nbformat.NotebookNode, lab: nbformat.NotebookNode) -> set[str]:
    """Numbers the executed solution prints only in cells that depend on its answers (the unfinished lab's cell
    says "not done yet" or shows nothing there), less those it also prints in cells that do not."""
    dependent, independent = set(), set()
    for sol_cell, lab_cell in zip(solution.cells, lab.cells):
        if sol_cell.cell_type != "code":
            continue
        mine, theirs = output_text(lab_cell), output_text(sol_cell)
        (dependent if NOT_DONE in mine or (theirs.strip() and not mine.strip()) else independent).update(
            numbers(theirs))
    return dependent - independent


def spoilers(lab: nbformat.NotebookNode, lab_name: str, solution: nbformat.NotebookNode | None = None,
             root: Path = ROOT) -> list[str]:
    """Every place where the unfinished lab's outputs show a stored or solution value, as readable lines."""
    stated = numbers("\n".join(c.source for c in lab.cells))
    stored = record_values(lab_name, root)
    from_solution = solution_values(solution, lab) if solution is not None else set()
    found = []
    for i, cell in enumerate(lab.cells):
        if cell.cell_type != "code":
            continue
        for token in sorted(numbers(output_text(cell)) - stated):
            if token in stored:
                found.append(f"cell {i} shows {token}, the stored {stored[token]}")
            elif token in from_solution:
                found.append(f"cell {i} shows {token}, which the official solution prints from its answers")
    return found


def errors(nb: nbformat.NotebookNode) -> list[tuple[int, str, str]]:
    """(cell, error name, message) of every cell that raised."""
    return [(i, o.get("ename", ""), o.get("evalue", "")) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


def not_done_yet(lab: nbformat.NotebookNode, solution: dict) -> list[str]:
    """Every graded test of the solution whose cell in the run lab is missing or does not say NOT_DONE."""
    said = {c.metadata["nbgrader"]["grade_id"]: output_text(c) for c in lab.cells
            if c.cell_type == "code" and is_test_cell(c)}
    graded = [c["metadata"]["nbgrader"]["grade_id"] for c in solution["cells"]
              if c.get("cell_type") == "code" and is_test_cell(c)]
    return [f"{gid}: {said[gid]!r}" if gid in said else f"{gid}: no such test cell in the lab" for gid in graded
            if NOT_DONE not in said.get(gid, "")]


def too_long(nb: nbformat.NotebookNode, limit: int = Limits().max_output_chars) -> list[str]:
    """Cells that print more than `limit` characters, as 'cell N: C characters'."""
    return [f"cell {i}: {len(output_text(c))} characters" for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and len(output_text(c)) > limit]


def too_wide(nb: nbformat.NotebookNode) -> list[str]:
    """Rows of displayed tables wider than the page, as 'cell N: W characters' (printed text wraps; a table's
    rows do not; its caption, the first line, wraps too)."""
    return [f"cell {i}: {len(line)} characters" for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")
            for line in str((o.get("data") or {}).get("text/plain", "")).splitlines()[1:] if len(line) > PAGE]


def _notebook(*cells: tuple[str, str]) -> nbformat.NotebookNode:
    """A tiny notebook of (source, printed output) code cells."""
    nb = nbformat.v4.new_notebook()
    for source, text in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)] if text else []
        nb.cells.append(cell)
    return nb


def test_a_planted_stored_value_and_a_solution_value_are_found(tmp_path: Path) -> None:
    (tmp_path / "reference" / "h200").mkdir(parents=True)
    (tmp_path / "reference" / "h200" / "results.json").write_text(json.dumps(
        [{"name": "lab99.yours_over_fp16", "value": 0.2917, "unit": "ratio"}]))
    lab = _notebook(("GPU = start()  # 4096 rows", "no GPU here, 4096 rows"),
                    ("check('lab99.gemv', gemv)", "lab99.gemv: not done yet"),
                    ("show()", "yours: runs at 0.29× the speed of FP16"),
                    ("table()", "loads per weight byte 2.25"))
    solution = _notebook(("GPU = start()  # 4096 rows", "no GPU here, 4096 rows"),
                         ("check('lab99.gemv', gemv)", "✓ lab99.gemv: loads per weight byte 2.25"),
                         ("show()", "yours: runs at 0.29× the speed of FP16"),
                         ("table()", "reads each byte once"))
    found = spoilers(lab, "lab99", solution, root=tmp_path)
    assert found == ["cell 2 shows 0.29, the stored lab99.yours_over_fp16",
                     "cell 3 shows 2.25, which the official solution prints from its answers"], found
    clean = _notebook(("GPU = start()  # 4096 rows", "no GPU here, 4096 rows"),
                      ("check('lab99.gemv', gemv)", "lab99.gemv: not done yet"))
    assert spoilers(clean, "lab99", solution, root=tmp_path) == []
    wide = _notebook(("t()", ""))
    wide.cells[0].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "caption\n" + "x" * (PAGE + 1)})]
    assert too_wide(wide) == [f"cell 0: {PAGE + 1} characters"] and not too_wide(clean)
    assert too_long(wide, limit=PAGE) == [f"cell 0: {PAGE + 9} characters"] and not too_long(clean)


def test_a_raising_cell_and_a_test_that_is_not_just_not_done_are_found() -> None:
    def graded(nb: nbformat.NotebookNode, i: int, gid: str) -> None:
        nb.cells[i].metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": gid, "points": 1}

    lab = _notebook(("demo(gemv)", ""), ("check('lab99.gemv', gemv)", "lab99.gemv: not done yet"),
                    ("check('lab99.gemm', gemm)", "lab99.gemm: your function raised TypeError"))
    lab.cells[0].outputs = [nbformat.v4.new_output("error", ename="NotImplementedError", evalue="", traceback=[])]
    graded(lab, 1, "lab99-gemv")
    graded(lab, 2, "lab99-gemm")
    solution = nbformat.from_dict(json.loads(nbformat.writes(lab)))
    graded(solution, 0, "lab99-gone")
    assert errors(lab) == [(0, "NotImplementedError", "")]
    assert not_done_yet(lab, solution) == ["lab99-gone: no such test cell in the lab",
                                           "lab99-gemm: 'lab99.gemm: your function raised TypeError'"]


def run_lab(lab: Path) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode | None]:
    """The lab after Run All, and its solution after Run All where the lab prints a telling number its text does not
    state (no such number, no spoiler possible: most labs print none, and a solution's run is the slow part)."""
    done = execute(lab)
    shown = set().union(*(numbers(output_text(c)) for c in done.cells if c.cell_type == "code"))
    stated = numbers("\n".join(c.source for c in done.cells))
    return done, execute(ROOT / "solutions" / lab.name) if shown - stated else None


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Future]]:
    """Every lab's run_lab, two kernels at a time (a kernel computes on one core, mostly); each test waits for its own."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {lab.stem: pool.submit(run_lab, lab) for lab in LABS}
        yield futures
        for f in futures.values():
            f.cancel()


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_the_unfinished_lab_runs_all_shows_no_answer_and_fits_the_page(lab: Path, runs: dict) -> None:
    done, solution = runs[lab.stem].result()
    assert not errors(done), (f"Run All stops in the unfinished {lab.name}: (cell, error, message) {errors(done)}. "
                              "Wrap each demo that calls a student's function in `if ready(fn, ...):`")
    official = json.loads((ROOT / "solutions" / lab.name).read_text(encoding="utf-8"))
    assert not not_done_yet(done, official), (f"{lab.name}, run unfinished: these graded tests do not say "
                                              f"'{NOT_DONE}': {not_done_yet(done, official)}")
    assert not too_long(done), f"{lab.name}: cells print more than the grader keeps: {too_long(done)}"
    found = spoilers(done, lab.stem.split("_")[0], solution)
    assert not found, (f"{lab.name}, run unfinished, shows the official solution's numbers before the student's "
                       f"code ran: {found}. Fix: show them only after ready(...) in the solution and its kit, "
                       "then python -m instructors.batch generate")
    assert not too_wide(done), f"{lab.name}: output wider than the page: {too_wide(done)}"
