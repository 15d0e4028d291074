"""Bring a solution notebook written in the earlier lab format up to the current one (mechanical part).

    python -m helpers.grading.migrate solutions/lab10_*.ipynb      rewrites the files, prints what to move

What it does to each cell:
- nbgrader metadata becomes valid for nbgrader 0.9: ``schema_version: 3``, ``locked``, grade ids
  with only letters, digits, ``_`` and ``-`` (``lab10.pack`` becomes ``lab10-pack``);
- a markdown answer (``### BEGIN SOLUTION`` in markdown) becomes a manually graded cell
  (grade and solution true) with its points (1 when none were given);
- a code cell that calls ``check("id", fn)`` but was marked as an answer becomes a test cell, and a
  markdown cell marked as graded without an answer block loses its marks;
- a test cell's hidden block becomes ``verify("id", fn)``; the old block is printed, to be turned into
  ``hidden=`` cases in ``helpers/grading/exercises/labNN.py`` by hand;
- ``# HINT:`` comments before solution blocks are removed and printed (hints live in the exercise).

Serves: instructors (keeping labs in the current format).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from helpers.grading.labgen import BEGIN_HIDDEN, BEGIN_SOLUTION, END_HIDDEN
from helpers.grading.worker import check_call
from helpers.tools.notebooks import canonical, dumps

HINT = re.compile(r"^\s*# HINT:.*\n?", re.MULTILINE)


def grade_id(gid: str) -> str:
    """A grade id nbgrader accepts."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", gid)


def _hidden_block(src: str, exercise: str, fn: str) -> tuple[str, str]:
    """(new source with a verify() hidden block, the old hidden block's text)."""
    old = ""
    if BEGIN_HIDDEN in src:
        before, rest = src.split(BEGIN_HIDDEN, 1)
        old, after = rest.split(END_HIDDEN, 1) if END_HIDDEN in rest else (rest, "")
        src = before.rstrip("\n") + after
    block = f'{BEGIN_HIDDEN}\nfrom helpers.grading import verify\nverify("{exercise}", {fn})\n{END_HIDDEN}'
    return src.rstrip("\n") + "\n" + block, old.strip("\n")


def migrate(nb: dict, report: list[str]) -> dict:
    """The notebook in the current format; what needs a hand is appended to `report`."""
    nb = canonical(nb)
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"])
        meta = cell["metadata"].get("nbgrader")
        call = check_call(src) if cell["cell_type"] == "code" else None
        for h in HINT.findall(src):
            report.append(f"cell {i}: hint to move into the exercise: {h.strip()}")
        src = HINT.sub("", src)
        if meta is None:
            cell["source"] = src.splitlines(keepends=True)
            continue
        answer = BEGIN_SOLUTION in src
        if cell["cell_type"] == "code" and call and not answer:
            meta.update(grade=True, solution=False)
            src, old = _hidden_block(src, *call)
            if old and "verify(" not in old:
                report.append(f"cell {i} ({call[0]}): old hidden tests to turn into hidden= cases:\n{old}")
            meta["grade_id"] = grade_id(call[0])
        elif cell["cell_type"] == "markdown" and not answer:
            cell["metadata"].pop("nbgrader")
            cell["source"] = src.splitlines(keepends=True)
            continue
        elif cell["cell_type"] == "markdown":
            meta.update(grade=True, solution=True)
            meta.setdefault("points", 1)
        else:
            meta.update(grade=False, solution=True)
            meta.pop("points", None)
        meta["grade_id"] = grade_id(str(meta.get("grade_id") or f"cell-{i}"))
        meta.update(schema_version=3, locked=not meta["solution"], task=False)
        if meta["grade"]:
            meta.setdefault("points", 0)
        cell["source"] = src.splitlines(keepends=True)
    return canonical(nb)


def main(paths: list[str]) -> int:
    """Migrate solution notebooks in place; print what needs a hand."""
    for p in map(Path, paths):
        report: list[str] = []
        p.write_text(dumps(migrate(json.loads(p.read_text(encoding="utf-8")), report)), encoding="utf-8")
        print(f"migrated {p}")
        for line in report:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
