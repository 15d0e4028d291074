"""Keep notebooks canonical: no outputs, no execution counts, stable keys and cell ids, one kernel.

    python -m helpers.tools.notebooks fmt   [PATHS...]   rewrite notebooks in canonical form
    python -m helpers.tools.notebooks check [PATHS...]   exit 1 and list notebooks that are not

The notebook metadata is what JupyterLab writes into a notebook when it opens it (the course kernel's spec and
ipykernel's ``language_info``), so that a notebook does not open marked modified. ``language_info`` holds the
kernel's Python version: a notebook keeps the version it has, and one without gets this interpreter's
(the course kernel's); a student whose Python differs sees the notebook marked modified once it starts.

Every file is read and checked before any is rewritten: a corrupt notebook stops the command with one
line naming it, and no file is changed. A path that holds no notebook is an error, not "all canonical".

Serves: tooling — `make fmt` and the canonical-notebook test.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Iterable
from pathlib import Path

from helpers import cli
from helpers.errors import InputError

FOLDERS = ("notebooks", "labs", "solutions")
KERNELSPEC = {"display_name": "GPU INT8 course", "language": "python", "name": "gpu-int8-course"}
KEEP_CELL_METADATA = ("nbgrader", "tags")
# ipykernel's language_info, less the Python version (language_info() adds it)
LANGUAGE_INFO = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                 "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                 "pygments_lexer": "ipython3"}


def language_info(nb: dict) -> dict:
    """The language_info the course kernel reports, with the notebook's Python version (this one's if none)."""
    old = nb.get("metadata", {}).get("language_info", {})
    version = old.get("version") if isinstance(old, dict) else None
    return {**LANGUAGE_INFO, "version": version if isinstance(version, str) and version else platform.python_version()}


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
            "language_info": language_info(nb),
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def dumps(nb: dict) -> str:
    """Serialize a notebook the one canonical way (sorted keys, one-space indent)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def read(path: Path) -> tuple[str, str]:
    """(text on disk, canonical text) of a notebook file; InputError naming the file if it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not a text file, so not a notebook. "
                         f"Restore it (git checkout -- {path}).") from None
    try:
        nb = json.loads(text)
        if not isinstance(nb, dict) or not isinstance(nb.get("cells", []), list):
            raise TypeError("not a notebook object")
        return text, dumps(canonical(nb))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InputError(f"{path} is not a readable notebook ({type(exc).__name__}: {exc}); no file was "
                         f"changed. Restore it (git checkout -- {path}) or repair its JSON.") from None


def is_canonical(path: Path) -> bool:
    """True when the file on disk equals its canonical form."""
    text, new = read(path)
    return text == new


def notebook_paths(paths: Iterable[str | Path] = ()) -> list[Path]:
    """The notebooks under the given paths (default: the course folders), checkpoints excluded.

    A path that does not exist, is not a notebook, or is a folder without notebooks is an InputError.
    """
    roots = [Path(p) for p in paths] or [Path(f) for f in FOLDERS]
    found: list[Path] = []
    for root in roots:
        if root.suffix == ".ipynb" and root.is_file():
            found.append(root)
        elif root.is_dir():
            inside = [p for p in sorted(root.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts]
            if not inside:
                raise InputError(f"{root} holds no .ipynb notebook. Pass a notebook or a folder of notebooks.")
            found += inside
        elif not root.exists():
            raise InputError(f"{root} does not exist. Pass a notebook or a folder of notebooks.")
        else:
            raise InputError(f"{root} is not a notebook (.ipynb) or a folder. Pass a notebook or a folder.")
    return found


def fmt(paths: Iterable[str | Path] = ()) -> list[Path]:
    """Rewrite notebooks in canonical form; return those that changed (all are read before any is written)."""
    pending = []
    for p in notebook_paths(paths):
        text, new = read(p)
        if new != text:
            pending.append((p, new))
    for p, new in pending:
        p.write_text(new, encoding="utf-8")
    return [p for p, _ in pending]


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


def _command(argv: list[str]) -> int:
    """fmt or check."""
    ap = cli.Parser(prog="python -m helpers.tools.notebooks", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", choices=("fmt", "check"))
    ap.add_argument("paths", nargs="*", help="notebooks or folders (default: notebooks, labs, solutions)")
    a = ap.parse_args(argv)
    if a.verb == "fmt":
        for p in fmt(a.paths):
            print(f"formatted {p}")
        return 0
    bad = [p for p in notebook_paths(a.paths) if not is_canonical(p)]
    for p in bad:
        print(f"not canonical (outputs, counts or key order): {p}. Fix: python -m helpers.tools.notebooks fmt {p}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    """Command line: fmt or check; bad input is one line on stderr and exit status 2."""
    return cli.run(_command, argv)


if __name__ == "__main__":
    sys.exit(main())
