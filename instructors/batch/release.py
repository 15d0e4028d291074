"""What students receive, and the course package a graded kernel sees: the labs, the chapters, the
course package ``helpers`` (which holds no answer key: those are ``instructors/keys``), the stored reference
data. Nothing is stripped: the release copies only what students get, then checks the copy and refuses it
when it holds an answer key or the instructors' package.

    python -m instructors.batch release --out artifacts/release     a folder and a .tar.gz beside it

--out must be new, empty or an earlier release; the .tar.gz beside it must be new or an earlier release's.

Serves: instructors (the student release; the grader's answer-key-free copy for kernels).
"""

from __future__ import annotations

import ast
import shutil
import tempfile
from pathlib import Path

from helpers import cli
from helpers.errors import InputError

PROG = "python -m instructors.batch release"
INSTEAD = "a new or empty folder, e.g. --out artifacts/release"  # what a refusal tells the user to pass
ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ITEMS = ("helpers", "reference", "requirements.txt", "pyproject.toml")
RELEASE_ITEMS = PACKAGE_ITEMS + ("labs", "notebooks", "jupyter", "requirements-gpu.txt", "environment.yml",
                                 "README.md")
GRADER = "helpers/grading/batch"  # where the grader lived before the instructors' package: never in a copy
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


def _registers_a_key(path: Path) -> bool:
    """True for a module that builds an Exercise with a spec or hidden cases (what only an answer key holds)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if "Exercise(" not in text:
        return False
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "Exercise"
               and any(k.arg in ("spec", "hidden") for k in n.keywords) for n in ast.walk(tree))


def problems(tree: Path) -> list[str]:
    """What a students' copy must not hold, as 'what path': the instructors' package or the grader, an answer key
    (a lab's ``key.py``, or any module that registers an exercise with a spec or hidden cases)."""
    tree = Path(tree)
    found = [f"instructors' package {p.relative_to(tree)}" for p in sorted(tree.rglob("instructors")) if p.is_dir()]
    found += [f"grader {GRADER}" for p in [tree / GRADER] if p.exists()]
    found += [f"answer key {p.relative_to(tree)}" for p in sorted(tree.rglob("*.py"))
              if (p.name == "key.py" and "labs" in p.parts) or _registers_a_key(p)]
    return found


def _copy(items: tuple[str, ...], dest: Path, root: Path) -> Path:
    """Copy the named files and folders of `root` to `dest`; raise when the copy holds what students must not get."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in items:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_SKIP, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, dest / name)
    found = problems(dest)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise InputError(f"refused to copy the course for students: the copy would hold the {found[0]}{more}. "
                         f"Answer keys belong in instructors/keys/ and the grader in instructors/batch/, which never ship.")
    return dest


def student_package(dest: Path, root: Path = ROOT) -> Path:
    """The course package as a graded kernel sees it (no answer keys, no solutions, no grader): dest/helpers, ..."""
    return _copy(PACKAGE_ITEMS, dest, root)


def build(out: Path, root: Path = ROOT) -> tuple[Path, Path]:
    """Write the student release to out/ and out.tar.gz; return both paths.

    `out` must be new, empty, or an earlier release holding only what it wrote (then that is replaced);
    anything else is refused before anything is copied (helpers.cli's output contract). The release is copied
    and checked beside `out` first: a copy that holds an answer key or the grader is refused, and `out` and the
    .tar.gz are left as they were.
    """
    out = Path(out)
    archive = out.parent / f"{out.name}.tar.gz"
    claim = {"beside": [archive], "inputs": [root / name for name in RELEASE_ITEMS], "instead": INSTEAD}
    cli.check_output_dir(out, PROG, **claim)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}-", dir=out.parent) as tmp:
        staged = _copy(RELEASE_ITEMS, Path(tmp), root)
        with cli.output_dir(out, PROG, **claim):
            for item in sorted(staged.iterdir()):
                item.rename(out / item.name)
            cli.tar_beside(out, PROG)
    return out, archive
