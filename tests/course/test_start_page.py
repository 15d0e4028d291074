"""The start page (notebooks/00_start_here.ipynb) is the student's map: it links every chapter and lab of the
course map (helpers/course.py) with a goal and a time estimate, every link resolves, it says how to hand in a
lab, it never sends a student to solutions/, and its results table shows the lessons' headlines marked met /
not met with the course's upkeep rows apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import course, reference
from helpers.bench import Record
from helpers.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
START = ROOT / "notebooks" / "00_start_here.ipynb"
LINK = re.compile(r"\]\(([^)#\s]+)\)")


def _markdown(path: Path = START) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def link_problems(path: Path = START) -> list[str]:
    """Links of the page that do not resolve, and chapters or labs of the course map it does not link."""
    text = "\n".join(_markdown(path))
    links = LINK.findall(text)
    problems = [f"{ln} does not resolve" for ln in links if not (path.parent / ln).exists()]
    wanted = [f"{c.notebook}.ipynb" for c in course.CHAPTERS if c.notebook != path.stem]
    wanted += [course.lab_link(lab.name) for lab in course.LABS]
    return problems + [f"no link to {w}" for w in wanted if w not in links]


def test_the_start_page_links_every_chapter_and_lab_and_every_link_resolves() -> None:
    assert not link_problems(), link_problems()
    assert any(course.path_markdown() in md for md in _markdown()), (
        "the start page's path is not helpers.course.path_markdown(): paste it into its '## 7 · The path' cell")


def test_a_planted_broken_or_missing_link_is_found(tmp_path: Path) -> None:
    nb = json.loads(START.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"]).replace("(12_language_models.ipynb)", "(12_language_model.ipynb)")
    planted = tmp_path / "notebooks" / START.name
    planted.parent.mkdir()
    planted.write_text(json.dumps(nb), encoding="utf-8")
    problems = link_problems(planted)
    assert "12_language_model.ipynb does not resolve" in problems and "no link to 12_language_models.ipynb" in problems


def test_every_lab_has_a_goal_and_a_time_and_the_path_names_each() -> None:
    mapped = {name for c in course.CHAPTERS for name in c.labs}
    assert mapped == {lab.name for lab in course.LABS}, "helpers/course.py: LABS and the chapters' labs differ"
    text = course.path_markdown()
    for lab in course.LABS:
        assert f"[{lab.name}]({course.lab_link(lab.name)}): {lab.goal} (about {course.duration(lab.minutes)})" in text
    for c in course.CHAPTERS:
        assert f"{c.title} (about {course.duration(c.minutes)})" in text
    assert course.duration(90) == "an hour and a half" and course.duration(15) == "a quarter of an hour"
    for bad in (20, 0, 135):
        with pytest.raises(InputError, match="quarter hours"):
            course.duration(bad)
    with pytest.raises(InputError, match="course map"):
        course.lab("lab99_nope")


def test_the_start_page_says_how_to_hand_in_and_never_points_at_solutions() -> None:
    text = "\n".join(_markdown())
    assert re.search(r"^## \d+ · How to hand in a lab", text, re.M)
    assert "labs/labNN_<topic>.ipynb" in text
    assert "solutions" not in text.lower()


def test_the_results_table_marks_met_and_keeps_upkeep_apart(monkeypatch) -> None:
    stored = {"gemm.int8_over_bf16": 1.3, "qat.delta_pts": 0.9, "suite.cpu_test_minutes": 12.0}

    def lookup(name: str, source: str = "h200") -> Record | None:
        value = stored.get(name) if source == "h200" else None
        return None if value is None else Record(name=name, value=value, unit="ratio", device="NVIDIA H200", date="2026-12-01")

    monkeypatch.setattr(reference, "lookup", lookup)
    lessons = {r["what"]: r for r in course.headline_rows()}
    upkeep = {r["what"]: r for r in course.headline_rows(maintenance=True)}
    h200 = reference.SOURCE_NAMES["h200"]
    meaning = {t.name: t.meaning for t in reference.TARGETS}
    assert lessons[meaning["gemm.int8_over_bf16"]][h200] == "1.3 (met)"
    assert lessons[meaning["qat.delta_pts"]][h200] == "0.9 (not met)"
    assert meaning["suite.cpu_test_minutes"] not in lessons
    assert upkeep[meaning["suite.cpu_test_minutes"]][h200] == "12 (met)"
    assert all(t.meaning in upkeep for t in reference.TARGETS if t.name.startswith(course.MAINTENANCE))
