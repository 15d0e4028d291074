"""`make release`: what students receive holds the labs, the chapters and the course package, and no
answer key, solution notebook or hidden case; no solution line is in the labs, the chapters or the
grading package. (The course library itself implements reference kernels and quantizers that the
chapters demonstrate: those modules are course content, so they are not searched for solution lines.)"""

from __future__ import annotations

import tarfile
from pathlib import Path

from tests.support.grading import leaks

from helpers.grading.batch import release, visible


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
    """What must not be in a students' release: answer keys, the instructors' grader, solutions, hidden cases,
    solution lines."""
    problems = [f"answer key {p.relative_to(root)}" for p in root.rglob("key.py") if "labs" in p.parts]
    problems += [f"instructors' package {p.relative_to(root)}" for p in root.glob("helpers/grading/batch")]
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
    key = Path(release.ROOT) / "helpers" / "labs" / "lab00_warmup_quantize" / "key.py"
    (root / "helpers" / "labs" / "lab00_warmup_quantize" / "key.py").write_text(key.read_text(encoding="utf-8"))
    (root / "helpers" / "grading" / "batch").mkdir()
    problems = release_problems(root)
    assert any(p.startswith("answer key") for p in problems), problems
    assert any(p.startswith("instructors' package") for p in problems), problems
    assert any(p.startswith("hidden case") for p in problems), problems
