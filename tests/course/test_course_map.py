"""The course map (helpers/course.py) against the files: every chapter ends with a "Next" cell linking its
labs and the next chapter, every link resolves, and the README's chapter table agrees with the map."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import course
from helpers.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CHAPTER_FILES = sorted((ROOT / "notebooks").glob("[0-9][0-9]*.ipynb"))
LINK = re.compile(r"\]\(([^)#\s]+\.ipynb)\)")


def _next_cell(path: Path) -> str | None:
    """The markdown of the notebook's closing "Next" section (its last markdown cell with a '## Next' heading)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    md = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    if not md or not re.search(r"^## Next\b", md[-1], re.M):
        return None
    return md[-1][re.search(r"^## Next\b", md[-1], re.M).start():]  # type: ignore[union-attr]


def next_cell_problems(path: Path) -> list[str]:
    """What is missing from a chapter's "Next" cell: the cell, a lab link, the next chapter, a broken link."""
    if path.stem not in course.BY_NOTEBOOK:
        return [f"{path.name} is not in helpers/course.py CHAPTERS"]
    cell = _next_cell(path)
    if cell is None:
        return [f"{path.name} does not end with a '## Next' markdown cell"]
    links = LINK.findall(cell)
    problems = [f"{path.name}: link {ln} does not resolve" for ln in links if not (path.parent / ln).exists()]
    wanted = [course.lab_link(lab) for lab in course.chapter(path.stem).labs]
    nxt = course.next_chapter(path.stem)
    wanted += [f"{nxt.notebook}.ipynb"] if nxt else []
    problems += [f"{path.name}: the Next cell does not link {w}" for w in wanted if w not in links]
    return problems


@pytest.mark.parametrize("path", CHAPTER_FILES, ids=lambda p: p.name)
def test_every_chapter_ends_with_next(path: Path) -> None:
    problems = next_cell_problems(path)
    assert not problems, "\n".join(problems)


def test_the_map_names_existing_files() -> None:
    for c in course.CHAPTERS:
        assert (ROOT / "notebooks" / f"{c.notebook}.ipynb").exists(), c.notebook
        for lab in c.labs:
            assert (ROOT / "labs" / f"{lab}.ipynb").exists() and (ROOT / "solutions" / f"{lab}.ipynb").exists(), lab


def test_every_lab_belongs_to_a_chapter() -> None:
    mapped = {lab for c in course.CHAPTERS for lab in c.labs}
    orphans = [p.stem for p in (ROOT / "labs").glob("*.ipynb") if p.stem not in mapped]
    assert not orphans, f"labs that no chapter of helpers/course.py links: {orphans}"


def test_readme_chapter_table_agrees_with_the_map() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## The chapters"):].split("\n\n")[1]
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        notebooks = re.findall(r"`(\d\d[a-z]?_\w+)`", cells[0])
        labs = re.findall(r"`(lab\d\d\w*)`", cells[1])
        for nb in notebooks:
            assert set(labs) == set(course.chapter(nb).labs), f"README row {nb}: {labs} vs helpers/course.py"


def test_next_markdown_links_lab_and_next_chapter() -> None:
    text = course.next_markdown("03_memory_hierarchy")
    assert "(../labs/lab02_coalescing_and_transpose.ipynb)" in text and "(04_warp_execution.ipynb)" in text
    assert "00_start_here.ipynb" in course.next_markdown(course.CHAPTERS[-1].notebook)
    with pytest.raises(InputError, match="course map"):
        course.chapter("99_nope")


def test_a_planted_chapter_without_next_fails(tmp_path: Path) -> None:
    from helpers.tools.notebooks import build

    nb = build(tmp_path / "03_memory_hierarchy.ipynb", [("md", "# 3"), ("md", "## Questions\n1. Why?")])
    assert "does not end with a '## Next'" in next_cell_problems(nb)[0]
    nb = build(tmp_path / "03_memory_hierarchy.ipynb",
               [("md", "# 3"), ("md", "## Next\n[on](04_warp_execution.ipynb)")])
    assert any("does not link ../labs/lab02" in p for p in next_cell_problems(nb))
