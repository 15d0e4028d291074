"""A measurement is an Experiment in the chapter package: a migrated notebook's cells never record a number
themselves (no ``bench.record``/``records.record``) and hold no measurement block under ``if GPU:`` (a block
that only prints a device message is allowed). Every chapter notebook is migrated, and a new one is checked too."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MIGRATED = tuple(p.stem for p in sorted((ROOT / "notebooks").glob("*.ipynb")))  # every chapter, all migrated
RECORDERS = {"record", "record_relative"}  # helpers.records / helpers.bench names that write a record


def _mentions_gpu(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "GPU" for n in ast.walk(test))


def _only_prints(body: list[ast.stmt]) -> bool:
    return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)
               and s.value.func.id == "print" for s in body)


def problems(source: str, where: str) -> list[str]:
    """What in one code cell breaks the rule, as 'where: why'."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: the notebook tests check those cells run
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _mentions_gpu(node.test) and not (
                _only_prints(node.body) and _only_prints(node.orelse)):
            out.append(f"{where}:{node.lineno}: a measurement under `if GPU:`; make it an Experiment and call "
                       "its .run() (it measures on a GPU and shows the stored run elsewhere)")
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in RECORDERS:
                out.append(f"{where}:{node.lineno}: the cell records a number ({name}); declare a Table or a "
                           "headline of the chapter's Experiment instead")
        if isinstance(node, ast.ImportFrom) and node.module in ("helpers.bench", "helpers.records") and any(
                a.name in RECORDERS for a in node.names):
            out.append(f"{where}:{node.lineno}: imports {node.module}.record into a notebook")
    return out


def _cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("name", MIGRATED)
def test_a_migrated_notebook_measures_only_through_experiments(name):
    path = ROOT / "notebooks" / f"{name}.ipynb"
    found = [p for i, src in enumerate(_cells(path)) for p in problems(src, f"{path.name} cell {i + 1}")]
    assert found == []


@pytest.mark.parametrize("src, why", [
    ("if GPU:\n    rows = measure()\nelse:\n    print('no GPU')\n", "under `if GPU:`"),
    ("if not GPU:\n    rows = stored()\n", "under `if GPU:`"),
    ("bench.record('a.b', 1.0, 'ratio')\n", "records a number (record)"),
    ("from helpers.bench import record\n", "imports helpers.bench.record"),
])
def test_the_rule_fails_on_a_planted_cell(src, why):
    found = problems(src, "planted")
    assert found and why in found[0], found


def test_a_device_message_and_an_experiment_cell_pass():
    assert problems("if not GPU:\n    print('No GPU here: the stored run is shown.')\n", "ok") == []
    assert problems("r = experiments.GEMV.run()\nr.show('gemv', caption='GEMV')\n", "ok") == []
