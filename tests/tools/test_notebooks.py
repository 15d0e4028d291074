"""Notebooks are committed without outputs, in canonical JSON, with the course kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.tools import notebooks

ROOT = Path(__file__).resolve().parents[2]
ALL = notebooks.notebook_paths([ROOT / f for f in notebooks.FOLDERS])


@pytest.mark.parametrize("path", ALL, ids=[str(p.relative_to(ROOT)) for p in ALL])
def test_notebook_is_canonical(path: Path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        assert not cell.get("outputs"), f"{path.name}: a cell has outputs"
        assert cell.get("execution_count") is None, f"{path.name}: a cell has an execution count"
    assert nb["metadata"]["kernelspec"]["name"] == notebooks.KERNELSPEC["name"]
    assert notebooks.is_canonical(path), f"run: python -m helpers.tools.notebooks fmt {path}"


def test_canonical_form_strips_outputs_and_is_stable(tmp_path: Path):
    dirty = {
        "cells": [{"cell_type": "code", "source": "1+1", "execution_count": 7, "id": "zz",
                   "metadata": {"collapsed": True, "nbgrader": {"grade": True}},
                   "outputs": [{"output_type": "execute_result", "data": {"text/plain": "2"}}]}],
        "metadata": {"kernelspec": {"name": "python3"}, "widgets": {}}, "nbformat": 4, "nbformat_minor": 4,
    }
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps(dirty))
    assert not notebooks.is_canonical(p)
    assert notebooks.fmt([p]) == [p]
    clean = json.loads(p.read_text())
    cell = clean["cells"][0]
    assert cell["outputs"] == [] and cell["execution_count"] is None
    assert cell["metadata"] == {"nbgrader": {"grade": True}}
    assert notebooks.is_canonical(p) and notebooks.fmt([p]) == []


def test_language_info_is_what_jupyterlab_writes_and_keeps_the_version():
    """JupyterLab replaces a notebook's language_info with the kernel's on opening (then the notebook is marked
    modified): the canonical form stores the kernel's, keeping a notebook's Python version."""
    import platform

    bare = {"cells": [], "metadata": {"language_info": {"name": "python"}}}
    info = notebooks.canonical(bare)["metadata"]["language_info"]
    assert info == {**notebooks.LANGUAGE_INFO, "version": platform.python_version()}
    assert info["pygments_lexer"] == "ipython3" and info["codemirror_mode"] == {"name": "ipython", "version": 3}
    kept = {"cells": [], "metadata": {"language_info": {"name": "python", "version": "3.11.2"}}}
    assert notebooks.canonical(kept)["metadata"]["language_info"]["version"] == "3.11.2"


def test_start_notebook_exists():
    assert (ROOT / "notebooks" / "00_start_here.ipynb").exists()


def test_build_writes_a_canonical_notebook(tmp_path: Path):
    p = notebooks.build(tmp_path / "n.ipynb", [("md", "# Title\n"), ("code", "\nx = 1\n")])
    nb = json.loads(p.read_text())
    assert [c["cell_type"] for c in nb["cells"]] == ["markdown", "code"]
    assert "".join(nb["cells"][1]["source"]) == "x = 1"
    assert notebooks.is_canonical(p)
