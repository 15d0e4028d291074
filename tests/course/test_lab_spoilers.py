"""No lab gives an answer away before the student's code runs.

Every lab in labs/ is executed as a student first meets it (unfinished, "Run All") and its outputs are searched
for the official solution's numbers: the values of the lab's stored records (reference/*/results.json, formatted
the ways the course prints them) and the numbers the official solution prints in the cells that depend on its
answers (cells where the unfinished lab says "not done yet" or prints nothing). A number the lab's own text
already states is not a spoiler. The solution is executed only for a lab that prints a number its text does
not state, since only such a number can be one. The outputs must also fit the page: no output line wider than PAGE characters.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

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


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_the_unfinished_lab_shows_no_answer_and_fits_the_page(lab: Path) -> None:
    done = execute(lab)
    # The solution runs only when the unfinished lab prints a telling number its text does not state: no such
    # number, no spoiler possible (most labs print none, and a solution's run is the slow part).
    shown = set().union(*(numbers(output_text(c)) for c in done.cells if c.cell_type == "code"))
    stated = numbers("\n".join(c.source for c in done.cells))
    solution = execute(ROOT / "solutions" / lab.name) if shown - stated else None
    found = spoilers(done, lab.stem.split("_")[0], solution)
    assert not found, (f"{lab.name}, run unfinished, shows the official solution's numbers before the student's "
                       f"code ran: {found}. Fix: show them only after ready(...) in the solution and its kit, "
                       "then python -m instructors.batch generate")
    assert not too_wide(done), f"{lab.name}: output wider than the page: {too_wide(done)}"
