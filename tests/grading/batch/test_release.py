"""`make release`: what students receive holds the labs, the chapters and the course package, and no
answer key, instructors' package, solution notebook or hidden case; no solution line is in the labs, the chapters
or the grading package; a copy that would hold an answer key or the grader is refused. (The course library itself implements reference kernels and quantizers that the
chapters demonstrate: those modules are course content, so they are not searched for solution lines.)"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest
from tests.support.grading import leaks

from helpers.errors import InputError
from instructors.batch import release, visible

LAB0 = "lab00_warmup_quantize"
KEY0 = (release.ROOT / "instructors" / "keys" / f"{LAB0}.py").read_text(encoding="utf-8")  # lab 0's answer key


def _texts(folder: Path) -> dict[str, str]:
    """Every text file under a folder."""
    out = {}
    for p in folder.rglob("*"):
        if p.is_file() and p.suffix in (".py", ".ipynb", ".json", ".md", ".txt", ".toml", ".yml", ".cu"):
            out[str(p.relative_to(folder))] = p.read_text(encoding="utf-8", errors="replace")
    return out


def _hidden_labels() -> set[str]:
    """The labels of every hidden case of every lab's answer key."""
    labels = set()
    for lab in visible.answer_key_labs():
        for ex in visible.lab_exercises(lab):
            labels |= {c.label for c in (ex.hidden() if ex.hidden else [])}
    return labels


def _unpacked(archive: Path, where: Path) -> Path:
    """The release tarball unpacked into `where` (what a student downloads)."""
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    return where / "release"


def release_problems(root: Path) -> list[str]:
    """What must not be in a students' release: answer keys, the instructors' package and grader (the release's
    own check), solutions, hidden cases, solution lines."""
    problems = release.problems(root)
    problems += [f"solutions folder {p.relative_to(root)}" for p in root.glob("solutions")]
    texts = _texts(root)
    student_facing = {k: v for k, v in texts.items() if k.startswith(("labs/", "notebooks/", "helpers/grading/",
                                                                       "helpers/labs/"))}
    problems += [f"solution or hidden line: {f}" for f in leaks(student_facing)]
    problems += [f"hidden case {label!r} in {name}" for label in _hidden_labels() for name, t in texts.items()
                 if label in t]
    return problems


def test_release_tarball_has_the_labs_and_no_answer_key(tmp_path: Path) -> None:
    folder, archive = release.build(tmp_path / "release")
    root = _unpacked(archive, tmp_path / "unpacked")
    assert (root / "labs" / "lab00_warmup_quantize.ipynb").is_file() and (root / "notebooks").is_dir()
    assert (root / "helpers" / "labs" / "lab00_warmup_quantize" / "visible.json").is_file()
    assert (root / "helpers" / "labs" / "lab11_gemm_kernels" / "kit.py").is_file()
    assert (root / "helpers" / "grading" / "check.py").is_file()
    problems = release_problems(root)
    assert not problems, problems[:5]


def test_release_check_fails_on_a_planted_answer_key_and_grader(tmp_path: Path) -> None:
    folder, archive = release.build(tmp_path / "release")
    root = _unpacked(archive, tmp_path / "unpacked")
    (root / "helpers" / "labs" / LAB0 / "key.py").write_text(KEY0)
    (root / "helpers" / "chapters" / "answers.py").write_text(KEY0)  # an answer key by its content, whatever its name
    (root / "helpers" / "grading" / "batch").mkdir()
    (root / "instructors").mkdir()
    problems = release_problems(root)
    assert f"answer key helpers/labs/{LAB0}/key.py" in problems, problems
    assert "answer key helpers/chapters/answers.py" in problems, problems
    assert "grader helpers/grading/batch" in problems and "instructors' package instructors" in problems, problems
    assert any(p.startswith("hidden case") for p in problems), problems


def _course(tmp_path: Path, plant: dict[str, str] | None = None) -> Path:
    """A small course checkout: lab 0's package, the instructors' answer keys beside it, and `plant` (path: text)."""
    root, skip = tmp_path / "course", shutil.ignore_patterns("__pycache__")
    shutil.copytree(release.ROOT / "helpers" / "labs" / LAB0, root / "helpers" / "labs" / LAB0, ignore=skip)
    shutil.copytree(release.ROOT / "instructors" / "keys", root / "instructors" / "keys", ignore=skip)
    for rel, text in (plant or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_release_copies_the_students_part_and_never_the_instructors_package(tmp_path: Path) -> None:
    out, archive = release.build(tmp_path / "out", root=_course(tmp_path))
    assert (out / "helpers" / "labs" / LAB0 / "visible.json").is_file() and archive.is_file()
    assert not (out / "instructors").exists() and release.problems(out) == []


@pytest.mark.parametrize("plant, named", [
    ({f"helpers/labs/{LAB0}/key.py": KEY0}, f"the answer key helpers/labs/{LAB0}/key.py"),
    ({"helpers/grading/batch/__init__.py": '"""Serves: instructors."""\n'}, "the grader helpers/grading/batch"),
], ids=["answer-key", "grader"])
def test_a_copy_that_would_hold_an_answer_key_or_the_grader_is_refused(tmp_path: Path, plant: dict,
                                                                       named: str) -> None:
    root = _course(tmp_path, plant)
    with pytest.raises(InputError, match="refused to copy the course for students") as err:
        release.build(tmp_path / "out", root=root)
    assert len(str(err.value).splitlines()) == 1 and named in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["course"]  # no release, no .tar.gz, no staging copy left
    with pytest.raises(InputError, match="refused to copy the course for students"):
        release.student_package(tmp_path / "graded", root=root)
