"""Keep notebooks canonical: no outputs, no execution counts, stable keys and cell ids, one kernel.

    python -m helpers.tools.notebooks fmt   [PATHS...]   rewrite notebooks in canonical form
    python -m helpers.tools.notebooks check [PATHS...]   exit 1 and list notebooks that are not

Serves: tooling — `make fmt` and the canonical-notebook test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

FOLDERS = ("notebooks", "labs", "solutions")
KERNELSPEC = {"display_name": "GPU INT8 course", "language": "python", "name": "gpu-int8-course"}
KEEP_CELL_METADATA = ("nbgrader", "tags")


def canonical(nb: dict) -> dict:
    """The canonical form of a notebook dict (outputs and counts removed, ids numbered)."""
    cells = []
    for i, cell in enumerate(nb.get("cells", [])):
        src = cell.get("source", "")
        text = "".join(src) if isinstance(src, list) else src
        meta = {k: v for k, v in cell.get("metadata", {}).items() if k in KEEP_CELL_METADATA}
        out = {"cell_type": cell["cell_type"], "id": f"c{i:03d}", "metadata": meta,
               "source": text.splitlines(keepends=True)}
        if cell["cell_type"] == "code":
            out["execution_count"] = None
            out["outputs"] = []
        cells.append(out)
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": KERNELSPEC,
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def dumps(nb: dict) -> str:
    """Serialize a notebook the one canonical way (sorted keys, one-space indent)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def is_canonical(path: Path) -> bool:
    """True when the file on disk equals its canonical form."""
    text = path.read_text(encoding="utf-8")
    return text == dumps(canonical(json.loads(text)))


def notebook_paths(paths: Iterable[str | Path] = ()) -> list[Path]:
    """The notebooks under the given paths (default: the course folders), checkpoints excluded."""
    roots = [Path(p) for p in paths] or [Path(f) for f in FOLDERS]
    found: list[Path] = []
    for root in roots:
        found += [root] if root.suffix == ".ipynb" else sorted(root.rglob("*.ipynb"))
    return [p for p in found if ".ipynb_checkpoints" not in p.parts]


def fmt(paths: Iterable[str | Path] = ()) -> list[Path]:
    """Rewrite notebooks in canonical form; return those that changed."""
    changed = []
    for p in notebook_paths(paths):
        text = p.read_text(encoding="utf-8")
        new = dumps(canonical(json.loads(text)))
        if new != text:
            p.write_text(new, encoding="utf-8")
            changed.append(p)
    return changed


def build(path: str | Path, cells: Iterable[tuple[str, str]]) -> Path:
    """Write a canonical notebook from (kind, source) pairs, kind 'md' or 'code' (an authoring aid)."""
    nb_cells = []
    for kind, source in cells:
        cell: dict = {"cell_type": "markdown" if kind == "md" else "code", "metadata": {},
                      "source": source.strip("\n")}
        nb_cells.append(cell)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(canonical({"cells": nb_cells})), encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    """Command line: fmt or check."""
    if not argv or argv[0] not in ("fmt", "check"):
        print(__doc__)
        return 2
    paths = argv[1:]
    if argv[0] == "fmt":
        for p in fmt(paths):
            print(f"formatted {p}")
        return 0
    bad = [p for p in notebook_paths(paths) if not is_canonical(p)]
    for p in bad:
        print(f"not canonical (outputs, counts or key order): {p}. Fix: python -m helpers.tools.notebooks fmt {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
