"""The folder tree is the map: the import rules between the packages of ``helpers`` (and the instructors'
package beside it), read from the source.

    python -m helpers.tools.layout      print where each chapter's code lives, and any rule broken

Layers: a module imports only from its own layer or earlier ones. A module's layer is its folder's: LAYERS
names folders only (``declared_folders`` checks it), never a single module.

    0  foundation   top-level modules: errors, validation, device, backends (the table of deploy backends),
                    environment (versions, the report's row type), records, bench, spread, metrics, experiment,
                    plots, tables, reference, findings, claims, figure_check, course, cli, data, session
    0.5 plugins     every third-party library's quirks and the probes of the environment report
                    (plugins.stacks): they import foundation modules and third-party packages only, and no
                    foundation module imports them
    1  kernels, quant      tensor-level
    2  models, perf
    3  model_quant        model-level quantization
    4  deploy
    5  chapters           chapter NN may build on chapter MM <= NN, never on a later one
    6  grading            the check engine every lab runs (check, exercise, traced runs, speed checks)
    7  labs               one package per lab (helpers/labs/labNN_<topic>/); a lab never imports another lab
    8  tools
       instructors        the instructors' package beside helpers (answer keys, batch grading, lab generation,
                          the students' release): above every helpers layer. It may import any of them; no helpers
                          module imports it (only ``helpers.grading.exercise`` looks it up by name, at run time)

An entry point (a ``__main__`` module) may import anything below it and is imported by nothing.

Also checked, in helpers and in the instructors' package: no import cycle between modules, no module over
``MAX_LINES`` lines, and a ``Serves:`` line in every module docstring (a chapter module's names its own chapter).

Serves: tooling — `make test` (tests/tools/test_layout.py).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTRUCTORS = ROOT.parent / "instructors"  # the layer above every helpers layer, never imported by helpers
LAYERS = {"plugins": 0.5,
          "kernels": 1, "quant": 1, "models": 2, "perf": 2, "model_quant": 3, "deploy": 4, "chapters": 5,
          "grading": 6, "labs": 7, "tools": 8}
LAYER_NAMES = {0: "foundation", 0.5: "plugins", 1: "tensor-level", 2: "models/perf", 3: "model_quant", 4: "deploy",
               5: "chapters", 6: "check engine", 7: "labs", 8: "tools"}
MAX_LINES = 400
CHAPTER = re.compile(r"ch(\d\d)")
LAB = re.compile(r"lab(\d\d)")


@dataclass(frozen=True)
class Import:
    """One ``import`` of a helpers module: who, where, what."""

    module: str
    path: Path
    line: int
    target: str


def module_name(path: Path, root: Path) -> str:
    """'helpers.perf.gemm' for root/perf/gemm.py (root is the helpers folder)."""
    parts = (root.name, *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package under `root`, by dotted name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imports(root: Path = ROOT, top: str | None = None) -> list[Import]:
    """Every import, by a module of the package, of a module of package `top` (default: the package itself), at
    module level or inside functions."""
    mods = modules(root)
    top = top or root.name
    known = mods if top == root.name else modules(root.parent / top)  # `top` is a sibling folder of `root`
    found = []
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == top or node.module.startswith(top + "."):
                    for a in node.names:
                        full = f"{node.module}.{a.name}"
                        targets.append(full if full in known else node.module)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name == top or a.name.startswith(top + ".")]
            found += [Import(name, path, node.lineno, t) for t in targets if t != name]
    return found


def reaches_instructors(root: Path = ROOT, instructors: str = INSTRUCTORS.name) -> list[str]:
    """Every import statement of a helpers module that names the instructors' package, as 'path:line: why'."""
    return [f"{imp.path.relative_to(root.parent)}:{imp.line}: {imp.module} imports {imp.target}: helpers never "
            f"imports the instructors' package (the students' copy has none; helpers.grading.exercise looks an "
            f"answer key up by name instead)" for imp in imports(root, instructors)]


def layer(module: str) -> float:
    """The layer of a dotted module name (see the module docstring)."""
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def declared_folders(root: Path = ROOT, layers: dict[str, float] | None = None) -> list[str]:
    """Every LAYERS entry that is not a folder of the package (a single module must not get its own layer)."""
    return [f"LAYERS[{name!r}] = {n}: not a folder of {root.name}/ (a module's layer is its folder's)"
            for name, n in (LAYERS if layers is None else layers).items()
            if not (root / name.replace(".", "/")).is_dir()]


def lab(module: str) -> str | None:
    """'11' for helpers.labs.lab11_gemm_kernels.*, else None."""
    parts = module.split(".")
    m = LAB.match(parts[2]) if len(parts) > 2 and parts[1] == "labs" else None
    return m.group(1) if m else None


def entry_point(module: str) -> bool:
    """True for a ``__main__`` module: a command, imported by nothing, so above every layer."""
    return module.endswith(".__main__")


def chapter(module: str) -> str | None:
    """'03' for helpers.chapters.ch03_memory_hierarchy.*, else None."""
    parts = module.split(".")
    m = CHAPTER.match(parts[2]) if len(parts) > 2 and parts[1] == "chapters" else None
    return m.group(1) if m else None


def violations(root: Path = ROOT) -> list[str]:
    """Every import that goes up a layer, from a chapter to a later chapter or from a lab to another lab,
    as 'path:line: why'."""
    out = []
    for imp in imports(root):
        here, there = layer(imp.module), layer(imp.target)
        where = f"{imp.path.relative_to(root.parent)}:{imp.line}"
        if entry_point(imp.module):
            continue
        if lab(imp.module) and lab(imp.target) and lab(imp.module) != lab(imp.target):
            out.append(f"{where}: {imp.module} imports {imp.target}: a lab must not import another lab "
                       f"(move what both need down to a core package or the check engine)")
        elif there > here:
            out.append(f"{where}: {imp.module} ({LAYER_NAMES[here]}) imports {imp.target} "
                       f"({LAYER_NAMES[there]}): a lower layer must not import a higher one")
        elif here == there == 5 and (chapter(imp.target) or "") > (chapter(imp.module) or "99"):
            out.append(f"{where}: {imp.module} imports {imp.target}: a chapter must not import a later chapter")
    return out


def cycles(root: Path = ROOT) -> list[list[str]]:
    """Groups of modules that import each other in a circle (strongly connected components > 1)."""
    graph: dict[str, set[str]] = {m: set() for m in modules(root)}
    for imp in imports(root):
        # a package's __init__ that re-exports its own submodules is not a cycle
        if not imp.target.startswith(imp.module + "."):
            graph[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def oversized(root: Path = ROOT, max_lines: int = MAX_LINES) -> list[str]:
    """Modules longer than `max_lines` lines, as 'path (N lines)'."""
    out = []
    for name, path in modules(root).items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > max_lines:
            out.append(f"{path.relative_to(root.parent)} ({n} lines)")
    return out


def undocumented(root: Path = ROOT) -> list[str]:
    """Modules whose docstring lacks a 'Serves:' line, or whose Serves line misses their own chapter."""
    out = []
    for name, path in modules(root).items():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        serves = next((ln for ln in doc.splitlines() if ln.startswith("Serves:")), None)
        ch = chapter(name)
        if serves is None:
            out.append(f"{path.relative_to(root.parent)}: no 'Serves:' line in the module docstring")
        elif ch is not None and f"chapter {int(ch)}" not in serves:
            out.append(f"{path.relative_to(root.parent)}: its 'Serves:' line does not name chapter {int(ch)}")
    return out


def chapter_map(root: Path = ROOT) -> dict[str, list[str]]:
    """{chapter package: its modules}, read from the tree."""
    out: dict[str, list[str]] = {}
    for name in modules(root):
        parts = name.split(".")
        if len(parts) > 2 and parts[1] == "chapters":
            out.setdefault(parts[2], [])
            if len(parts) > 3:
                out[parts[2]].append(parts[3])
    return out


def main() -> int:
    """Print the chapter map and every broken rule; exit 1 when one is broken."""
    for pkg, mods in chapter_map().items():
        print(f"{pkg:34s} {', '.join(mods) or '(uses core packages only: see its docstring)'}")
    problems = violations() + reaches_instructors() + declared_folders()
    for root in (ROOT, INSTRUCTORS):
        problems += [" <-> ".join(c) + ": import cycle" for c in cycles(root)] + oversized(root) + undocumented(root)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
