"""labs/ generated from solutions/ by nbgrader's preprocessors; real nbgrader agrees; no solution line,
hidden case or give-away hint reaches students; points add up to what each lab promises."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from tests.support.grading import SENTINEL, leaks, solution_lines, solution_nb

from helpers.grading import wire
from helpers.tools.notebooks import dumps
from instructors.batch import visible
from instructors.batch.labgen import (BEGIN_HIDDEN, BEGIN_SOLUTION, END_HIDDEN, END_SOLUTION, MARKDOWN_STUB,
                                      generate, lab_from_solution, stale)
from instructors.batch.worker import check_call, is_test_cell

ROOT = Path(__file__).resolve().parents[3]
SOLUTIONS, LABS = ROOT / "solutions", ROOT / "labs"
SOLUTION_FILES = sorted(SOLUTIONS.glob("lab*.ipynb"))
GRADE_ID = re.compile(r"^[A-Za-z0-9_-]+$")
PROMISE = re.compile(r"\((\d+) points?")


def _sources(nb: dict) -> list[str]:
    """Every cell's source text."""
    return ["".join(c["source"]) for c in nb["cells"]]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_fixture_lab_stubs_drops_hidden_and_keeps_metadata() -> None:
    lab = lab_from_solution(solution_nb())
    text = json.dumps(lab)
    assert SENTINEL not in text and "BEGIN HIDDEN" not in text and "return a + b" not in text
    assert "raise NotImplementedError()" in _sources(lab)[2]
    meta = {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"] for c in lab["cells"] if c["metadata"]}
    assert meta["lab98-add"]["locked"] and meta["lab98-add"]["points"] == 2 and "checksum" in meta["lab98-add"]
    assert MARKDOWN_STUB in _sources(lab)[-1]


def test_generate_writes_one_lab_per_solution(tmp_path: Path) -> None:
    sol = tmp_path / "solutions"
    sol.mkdir()
    (sol / "lab98_fixture.ipynb").write_text(dumps(solution_nb()), encoding="utf-8")
    assert [p.name for p in generate(sol, tmp_path / "labs")] == ["lab98_fixture.ipynb"]
    assert stale(sol, tmp_path / "labs") == []


def test_generate_never_replaces_a_lab_that_changed_since_it_wrote_it(tmp_path: Path, capsys) -> None:
    import pytest

    from helpers.errors import InputError

    sol = tmp_path / "solutions"
    sol.mkdir()
    (sol / "lab98_fixture.ipynb").write_text(dumps(solution_nb()), encoding="utf-8")
    lab = generate(sol, tmp_path / "labs")[0]
    nb = _load(lab)
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "My own answer, added by me."})
    lab.write_text(dumps(nb), encoding="utf-8")
    edited = lab.read_bytes()
    with pytest.raises(InputError, match="changed since generate wrote it.*generate --force"):
        generate(sol, tmp_path / "labs")
    assert lab.read_bytes() == edited  # the student's cell is still there
    changed_solution = solution_nb()
    changed_solution["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "A new paragraph."})
    (sol / "lab98_fixture.ipynb").write_text(dumps(changed_solution), encoding="utf-8")
    with pytest.raises(InputError, match="changed since"):
        generate(sol, tmp_path / "labs")
    generate(sol, tmp_path / "labs", force=True)
    assert lab.read_bytes() != edited and stale(sol, tmp_path / "labs") == []
    (sol / "lab98_fixture.ipynb").write_text(dumps(solution_nb()), encoding="utf-8")
    generate(sol, tmp_path / "labs")  # the lab is as generate wrote it: a changed solution replaces it
    assert stale(sol, tmp_path / "labs") == []


def test_committed_labs_and_visible_cases_are_what_generate_writes() -> None:
    out = stale(SOLUTIONS, LABS) + visible.stale()
    assert not out, f"out of date: {out}. Fix: python -m instructors.batch generate"
    record = _load(LABS / ".generated.json")
    unrecorded = [p.name for p in LABS.glob("*.ipynb") if record.get(p.name) != hashlib.sha256(p.read_bytes()).hexdigest()]
    assert not unrecorded, f"labs/.generated.json does not record {unrecorded}. Fix: python -m instructors.batch generate"
    extra = {p.name for p in LABS.glob("*.ipynb")} - {p.name for p in SOLUTIONS.glob("*.ipynb")}
    assert not extra, f"labs without a solution: {sorted(extra)} (labs/ is generated; delete them)"


@pytest.mark.slow
def test_real_nbgrader_generates_the_same_labs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nbgrader 0.9 accepts every solution and produces exactly the committed lab (sources and metadata)."""
    import os
    import sys

    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # alembic
    cfg = Config()
    cfg.CourseDirectory.root = str(tmp_path)
    cfg.CourseDirectory.db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    for sol in SOLUTION_FILES:
        (tmp_path / "source" / sol.stem).mkdir(parents=True)
        (tmp_path / "source" / sol.stem / sol.name).write_text(sol.read_text(encoding="utf-8"), encoding="utf-8")
    api = NbGraderAPI(config=cfg)
    for sol in SOLUTION_FILES:
        api.gradebook.update_or_create_assignment(sol.stem)
        result = api.generate_assignment(sol.stem, force=True, create=True)
        assert result["success"], f"nbgrader refused {sol.name}:\n{result.get('error') or result.get('log')}"
        made = _load(tmp_path / "release" / sol.stem / sol.name)
        ours = _load(LABS / sol.name)
        theirs = [("".join(c["source"]), c["metadata"].get("nbgrader")) for c in made["cells"]]
        assert theirs == [("".join(c["source"]), c["metadata"].get("nbgrader")) for c in ours["cells"]], sol.name


def _lab_and_hint_texts() -> dict[str, str]:
    """Every text a student sees before solving: the labs' cells and every hint of every exercise."""
    texts = {p.name: "\n".join(_sources(_load(p))) for p in LABS.glob("*.ipynb")}
    for p in visible.LABS.glob("lab*_*/visible.json"):
        name = f"{p.parent.name}/visible.json"
        texts[name] = "\n".join(h for r in wire.loads(p.read_text(encoding="utf-8")) for h in r["hints"])
    return texts


def test_no_solution_line_hidden_test_or_give_away_hint_reaches_students() -> None:
    texts = _lab_and_hint_texts()
    assert not any("HIDDEN TESTS" in t for t in texts.values())
    found = leaks(texts)
    assert not found, f"solution or hidden lines visible to students: {found[:5]}"


def test_the_leak_check_catches_a_planted_line() -> None:
    line = next(iter(solution_lines(_load(SOLUTIONS / "lab00_warmup_quantize.ipynb"))))
    assert leaks({"planted.ipynb": f"some markdown\n    {line}\n"}) == [f"planted.ipynb: {line}"]


@pytest.mark.parametrize("solution", SOLUTION_FILES, ids=[p.stem for p in SOLUTION_FILES])
def test_grade_ids_and_points_add_up_to_what_the_lab_promises(solution: Path) -> None:
    nb = _load(solution)
    promised, graded, ids = 0, 0.0, []
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader")
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            promised += sum(int(n) for line in src.splitlines() if line.startswith(("#", "**"))
                            for n in PROMISE.findall(line))
        if not meta:
            continue
        ids.append(meta["grade_id"])
        assert GRADE_ID.match(meta["grade_id"]) and meta.get("schema_version") == 3, meta
        if meta.get("grade"):
            graded += meta.get("points", 0)
        if cell["cell_type"] == "code" and is_test_cell(cell):
            call = check_call(src)
            assert call and meta["grade_id"] == call[0].replace(".", "-"), (meta["grade_id"], call)
            assert f'verify("{call[0]}", {call[1]})' in src, f"{meta['grade_id']}: no verify() in its hidden block"
    assert len(ids) == len(set(ids)), f"repeated grade ids in {solution.name}"
    assert graded == promised, f"{solution.name}: graded cells give {graded} points, the text promises {promised}"
