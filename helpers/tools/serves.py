"""Each core module's ``Serves:`` line, derived from the import graph: which chapters and labs reach it, through
their own packages (``helpers.chapters.chNN_*``, ``helpers.labs.labNN_*``), the labs' answer keys
(``instructors/keys/labNN_*.py``, beside helpers) and their notebooks' imports.

    python -m helpers.tools.serves            list every core ``Serves:`` line the import graph contradicts
    python -m helpers.tools.serves --write    rewrite them from the graph

A core module (the foundation modules and the core packages) carries ``Serves: core — used by …`` naming exactly
the chapters and labs that import it, directly or through other modules; one that no chapter or lab reaches is
``Serves: tooling — …`` (what uses it, in words). ``tests/tools/test_layout.py`` fails on a line that drifted.

Serves: tooling — `make test` (tests/tools/test_layout.py).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from helpers.tools import layout

CORE_LAYERS = range(0, 5)  # foundation, kernels/quant, models/perf, model_quant, deploy (and plugins)
SERVES = re.compile(r"^Serves:.*$", re.M)
NOTEBOOK = re.compile(r"^(?:(\d\d)[a-z]?_|lab(\d\d)_)")
ANSWER_KEY = re.compile(r"^instructors\.keys\.lab(\d\d)_")  # a lab's answer key, in the instructors' package


def _notebook_imports(path: Path, mods: dict[str, Path]) -> set[str]:
    """The helpers modules a notebook's code cells import (magics and shell lines left out)."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    found: set[str] = set()
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = "".join(cell.get("source", ""))
        code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("helpers"):
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    found.add(full if full in mods else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "helpers"}
    return {m for m in found if m in mods}


def _closure(start: set[str], graph: dict[str, set[str]]) -> set[str]:
    """Every module reachable from `start` through imports (a package's __init__ included)."""
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(2, len(parts))]  # importing a.b.c runs a.b's __init__
        todo += graph.get(m, ())
    return seen


def users(root: Path = layout.ROOT) -> dict[str, tuple[set[int], set[int]]]:
    """{module: (chapters that reach it, labs that reach it)}, from packages, answer keys and notebooks."""
    mods = layout.modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for imp in layout.imports(root):
        graph[imp.module].add(imp.target)
    starts: dict[tuple[str, int], set[str]] = {}
    for name in mods:
        ch, lab = layout.chapter(name), layout.lab(name)
        if ch is not None:
            starts.setdefault(("chapter", int(ch)), set()).add(name)
        if lab is not None:
            starts.setdefault(("lab", int(lab)), set()).add(name)
    course = root.parent
    for imp in layout.imports(course / layout.INSTRUCTORS.name, root.name):
        if m := ANSWER_KEY.match(imp.module):
            starts.setdefault(("lab", int(m.group(1))), set()).add(imp.target)
    for folder in ("notebooks", "labs", "solutions"):
        for nb in sorted((course / folder).glob("*.ipynb")):
            m = NOTEBOOK.match(nb.name)
            if m:
                key = ("chapter", int(m.group(1))) if m.group(1) else ("lab", int(m.group(2)))
                starts.setdefault(key, set()).update(_notebook_imports(nb, mods))
    out: dict[str, tuple[set[int], set[int]]] = {m: (set(), set()) for m in mods}
    for (kind, n), start in starts.items():
        for m in _closure(start, graph):
            if m in out:
                out[m][0 if kind == "chapter" else 1].add(n)
    return out


def _ranges(numbers: set[int], width: int) -> str:
    """'3–5, 9' for {3, 4, 5, 9}; runs of three or more as a range."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    fmt = lambda n: f"{n:0{width}d}"  # noqa: E731
    parts = [f"{fmt(r[0])}–{fmt(r[-1])}" if len(r) > 2 else ", ".join(map(fmt, r)) for r in runs]
    return ", ".join(parts)


def serves_line(chapters: set[int], labs: set[int], all_chapters: set[int], all_labs: set[int]) -> str | None:
    """The derived ``Serves:`` line of a core module, or None when no chapter or lab reaches it."""
    if not chapters and not labs:
        return None
    if chapters == all_chapters and labs == all_labs:
        return "Serves: core — used by every chapter and every lab."
    words = []
    if chapters:
        words.append(("chapter " if len(chapters) == 1 else "chapters ") + _ranges(chapters, 1))
    if labs:
        words.append(("lab " if len(labs) == 1 else "labs ") + _ranges(labs, 2))
    return "Serves: core — used by " + " and ".join(words) + "."


def expected_lines(root: Path = layout.ROOT) -> dict[str, tuple[Path, str | None]]:
    """{core module: (path, its derived Serves line or None for tooling)}."""
    use = users(root)
    all_chapters = set().union(*(chapters for chapters, _ in use.values()))
    all_labs = set().union(*(labs for _, labs in use.values()))
    mods = layout.modules(root)
    return {m: (mods[m], serves_line(*use[m], all_chapters, all_labs)) for m in mods
            if layout.layer(m) in CORE_LAYERS and not layout.entry_point(m)}


def _current(path: Path) -> str | None:
    """A module's present Serves line, or None."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return next((ln for ln in doc.splitlines() if ln.startswith("Serves:")), None)


def stale(root: Path = layout.ROOT) -> list[str]:
    """Core modules whose Serves line is not the one the import graph gives, as 'path: has … ; graph says …'."""
    out = []
    for _, (path, want) in sorted(expected_lines(root).items()):
        have = _current(path)
        if want is None:
            if have is not None and not have.startswith("Serves: tooling"):
                out.append(f"{path.relative_to(root.parent)}: no chapter or lab imports it, so its line must be "
                           f"'Serves: tooling — <what uses it>' (has: {have!r})")
        elif have != want:
            out.append(f"{path.relative_to(root.parent)}: has {have!r}; the import graph says {want!r}")
    return out


def write(root: Path = layout.ROOT) -> list[Path]:
    """Rewrite every stale core Serves line from the graph; return the files changed."""
    changed = []
    for _, (path, want) in sorted(expected_lines(root).items()):
        have = _current(path)
        text = path.read_text(encoding="utf-8")
        if want is None:
            if have is None or have.startswith("Serves: tooling"):
                continue
            want = "Serves: tooling — no chapter or lab imports it; see the module's docstring for its users."
        if have == want or have is None:
            continue
        path.write_text(text.replace(have, want, 1), encoding="utf-8")
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    """Print every stale core Serves line (exit 1), or with --write rewrite them from the graph."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        for path in write():
            print(f"rewrote the Serves line of {path}")
        return 0
    if args:
        print("usage: python -m helpers.tools.serves [--write]", file=sys.stderr)
        return 2
    problems = stale()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
