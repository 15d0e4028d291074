"""Generate labs/ from solutions/: solution code becomes a stub, hidden tests disappear.

Markers (nbgrader's):  ### BEGIN SOLUTION / ### END SOLUTION  and
### BEGIN HIDDEN TESTS / ### END HIDDEN TESTS. A comment line '# HINT: ...' placed before
a solution block becomes the message of the stub's NotImplementedError.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers.tools.notebooks import canonical, dumps

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
HINT = re.compile(r"^\s*# HINT:\s*(.*)$")
MARKDOWN_STUB = "YOUR ANSWER HERE"


def _stub(indent: str, hint: str) -> list[str]:
    """The lines that replace a code solution block."""
    message = f"Not implemented yet. Hint: {hint}" if hint else "Not implemented yet."
    return [f"{indent}# YOUR CODE HERE\n", f"{indent}raise NotImplementedError({message!r})\n"]


def strip_source(source: str, markdown: bool = False) -> str:
    """Replace solution blocks with stubs and delete hidden-test blocks in one cell's source."""
    out: list[str] = []
    hint, skipping = "", None
    for line in source.splitlines(keepends=True):
        stripped = line.strip()
        if skipping:
            if stripped == skipping:
                skipping = None
            continue
        m = HINT.match(line)
        if m:
            hint = m.group(1).strip()
        if stripped == BEGIN_SOLUTION:
            indent = line[: len(line) - len(line.lstrip())]
            out += [MARKDOWN_STUB + "\n"] if markdown else _stub(indent, hint)
            skipping, hint = END_SOLUTION, ""
        elif stripped == BEGIN_HIDDEN:
            skipping = END_HIDDEN
        else:
            out.append(line)
    if skipping:
        raise ValueError(f"a '{skipping.replace('END', 'BEGIN')}' block is never closed by '{skipping}'.")
    return "".join(out).rstrip("\n")


def lab_from_solution(solution: dict) -> dict:
    """The student version of a solution notebook dict."""
    nb = canonical(solution)
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        new = strip_source(text, markdown=cell["cell_type"] == "markdown")
        cell["source"] = new.splitlines(keepends=True)
    return nb


def lab_path(solution_path: Path, labs_dir: Path) -> Path:
    """Where the lab generated from a solution notebook goes (same file name)."""
    return labs_dir / solution_path.name


def generate(solutions_dir: Path = Path("solutions"), labs_dir: Path = Path("labs")) -> list[Path]:
    """Write labs_dir/<name>.ipynb for every solutions_dir/<name>.ipynb; return the written paths."""
    written = []
    for sol in sorted(solutions_dir.glob("*.ipynb")):
        lab = lab_from_solution(json.loads(sol.read_text(encoding="utf-8")))
        path = lab_path(sol, labs_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps(lab), encoding="utf-8")
        written.append(path)
    return written


def stale(solutions_dir: Path = Path("solutions"), labs_dir: Path = Path("labs")) -> list[Path]:
    """Labs whose committed file differs from what generate() would write (or that are missing)."""
    out = []
    for sol in sorted(solutions_dir.glob("*.ipynb")):
        path = lab_path(sol, labs_dir)
        want = dumps(lab_from_solution(json.loads(sol.read_text(encoding="utf-8"))))
        if not path.exists() or path.read_text(encoding="utf-8") != want:
            out.append(path)
    return out
