"""Restore the cells a student is not meant to edit from the lab's current version, before grading.

A submission started on an older release still has that release's setup cells (``from helpers import
ptq`` after the module moved). As nbgrader's ``OverwriteCells`` preprocessor does, every read-only
cell (nbgrader ``locked``) takes the source of the current cell with the same grade_id; test cells
need not (the grader never runs them), and answer cells (nbgrader ``solution``) keep the student's
code. The lab's other code cells (setup, imports, demos) carry no grade_id: each is matched, within
its section (the cells after one graded cell, up to the next), to the submission's most similar code
cell without a grade_id (the same cell id, or at least half the same text), which takes the current
source. A current cell with no match is put back at its place; cells the student added keep theirs.

Serves: instructors (batch grading; submissions of every lab).
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

SIMILAR = 0.5  # difflib ratio at which an unmarked cell is taken for the lab's cell it resembles


def _meta(cell: dict) -> dict:
    """The nbgrader metadata of a cell ({} when it has none)."""
    return cell.get("metadata", {}).get("nbgrader") or {}


def _src(cell: dict) -> str:
    """A cell's source as one string."""
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else str(s)


def _given(cell: dict) -> bool:
    """A code cell of the lab with no grade_id: setup, imports, demos."""
    return cell.get("cell_type") == "code" and not _meta(cell).get("grade_id")


def _locked(cell: dict) -> bool:
    """A read-only cell nbgrader would overwrite (locked, not an answer). Test cells are left alone: the
    grader never runs them, and their current source holds the hidden tests."""
    m = _meta(cell)
    return bool(m.get("grade_id")) and not m.get("solution") and bool(m.get("locked")) and not m.get("grade")


def _sections(cells: list[dict]) -> dict[str, list[int]]:
    """section name (the grade_id of the graded cell before it, '' at the top) -> indexes of its given cells."""
    out: dict[str, list[int]] = {"": []}
    key = ""
    for i, c in enumerate(cells):
        gid = _meta(c).get("grade_id")
        if gid:
            key = gid
            out.setdefault(key, [])
        elif _given(c):
            out.setdefault(key, []).append(i)
    return out


def _score(mine: dict, theirs: dict) -> float:
    """How alike a submission's cell and a lab cell are (the same cell id counts as half a match)."""
    same_id = 0.5 if mine.get("id") and mine.get("id") == theirs.get("id") else 0.0
    return difflib.SequenceMatcher(None, _src(mine), _src(theirs), autojunk=False).ratio() + same_id


def restore(submission: dict, current: dict) -> tuple[dict, list[str]]:
    """The submission with its locked and given cells taken from `current`; and a note per restored cell."""
    nb = copy.deepcopy(submission)
    cells: list[dict] = nb.get("cells", [])
    now: list[dict] = current.get("cells", [])
    by_gid = {_meta(c)["grade_id"]: c for c in now if _locked(c)}
    notes: list[str] = []
    for c in cells:
        gid = _meta(c).get("grade_id")
        if gid in by_gid and _src(c) != _src(by_gid[gid]):
            c["source"] = _src(by_gid[gid])
    mine, theirs = _sections(cells), _sections(now)
    inserts: list[tuple[int, dict]] = []
    for key, lab_cells in theirs.items():
        free = list(mine.get(key, []))
        after = _anchor(cells, key)
        for j in lab_cells:
            lab = now[j]
            best = max(free, key=lambda i: _score(cells[i], lab), default=None)
            if best is not None and _score(cells[best], lab) >= SIMILAR:
                free.remove(best)
                after = best
                if _src(cells[best]) != _src(lab):
                    cells[best]["source"] = _src(lab)
                    notes.append(f"a setup cell was restored from the current lab: {_first(lab)!r}")
            else:
                inserts.append((after, copy.deepcopy(lab)))
                notes.append(f"a setup cell missing from the submission was put back: {_first(lab)!r}")
    for _, after, cell in sorted(((k, a, c) for k, (a, c) in enumerate(inserts)), key=lambda t: (t[1], t[0]),
                                 reverse=True):  # the last first, so each lands at its own place
        cell.pop("id", None)
        cells.insert(after + 1, cell)
    return nb, notes


def _anchor(cells: list[dict], key: str) -> int:
    """The index after which a section's missing cells go (its graded cell, or -1 for the top)."""
    for i, c in enumerate(cells):
        if key and _meta(c).get("grade_id") == key:
            return i
    return -1


def _first(cell: dict) -> str:
    """The first line of a cell, for a note."""
    lines = _src(cell).strip().splitlines()
    return (lines[0] if lines else "")[:80]


def restore_node(nb: Any, current: dict) -> tuple[Any, list[str]]:
    """`restore` for an nbformat NotebookNode (as the worker reads submissions)."""
    import nbformat

    fixed, notes = restore(dict(nb), current)
    return nbformat.from_dict(fixed), notes
