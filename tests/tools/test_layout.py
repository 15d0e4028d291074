"""The folder tree is the map: import direction, no cycles, small modules, a 'Serves:' line everywhere (helpers
and the instructors' package), and no helpers module importing the instructors' package."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helpers.tools import layout


def test_no_import_goes_up_a_layer_or_to_a_later_chapter() -> None:
    assert layout.violations() == []


PACKAGES = pytest.mark.parametrize("root", [layout.ROOT, layout.INSTRUCTORS], ids=["helpers", "instructors"])


@PACKAGES
def test_no_import_cycle(root: Path) -> None:
    assert layout.cycles(root) == []


def test_every_declared_layer_is_a_folder() -> None:
    assert layout.declared_folders() == []


def test_a_layer_declared_for_a_single_module_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**PLANT, "deploy/__init__.py": '"""Serves: core."""\n',
                            "deploy/registry.py": '"""Serves: core."""\n'})
    found = layout.declared_folders(root, {"perf": 2, "deploy.registry": 0})
    assert len(found) == 1 and "'deploy.registry'" in found[0] and "not a folder" in found[0]


@PACKAGES
def test_no_module_is_over_the_size_limit(root: Path) -> None:
    assert layout.oversized(root) == []


@PACKAGES
def test_every_module_says_which_chapter_it_serves(root: Path) -> None:
    assert layout.undocumented(root) == []


def test_every_chapter_notebook_has_its_chapter_package() -> None:
    notebooks = {p.stem for p in (layout.ROOT.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")} - {"00_start_here"}
    assert {f"ch{n}" for n in notebooks} <= set(layout.chapter_map())


def _tree(tmp_path: Path, files: dict[str, str], package: str = "helpers") -> Path:
    """A fake helpers (or instructors) package with the given files (path -> source)."""
    root = tmp_path / package
    for rel, src in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(src))
    return root


PLANT = {
    "__init__.py": '"""Serves: core."""\n',
    "perf/__init__.py": '"""Serves: core."""\n',
    "chapters/__init__.py": '"""Serves: the map."""\n',
    "chapters/ch03_memory/__init__.py": '"""Serves: chapter 3."""\n',
    "chapters/ch03_memory/bench.py": '"""Serves: chapter 3."""\n',
    "chapters/ch09_deploy/__init__.py": '"""Serves: chapter 9."""\n',
    "chapters/ch09_deploy/work.py": '"""Serves: chapter 9."""\nfrom helpers.chapters.ch03_memory import bench\n',
}


def test_a_core_module_importing_a_chapter_is_reported_with_the_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**PLANT, "perf/gemm.py": '"""Serves: core."""\n\n'
                            "def f():\n    from helpers.chapters.ch03_memory.bench import x\n"})
    found = layout.violations(root)
    assert len(found) == 1
    assert "helpers/perf/gemm.py:4" in found[0] and "helpers.chapters.ch03_memory.bench" in found[0]


def test_a_chapter_importing_a_later_chapter_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**PLANT, "chapters/ch03_memory/bench.py":
                            '"""Serves: chapter 3."""\nfrom helpers.chapters.ch09_deploy import work\n'})
    found = layout.violations(root)
    assert len(found) == 1 and "later chapter" in found[0]
    assert layout.cycles(root) == [["helpers.chapters.ch03_memory.bench", "helpers.chapters.ch09_deploy.work"]]


@pytest.mark.parametrize("bad, why", [
    ({"perf/big.py": '"""Serves: core."""\n' + "x = 1\n" * 500}, "(501 lines)"),
    ({"perf/nodoc.py": "x = 1\n"}, "no 'Serves:'"),
    ({"chapters/ch03_memory/bench.py": '"""Serves: chapter 4."""\n'}, "chapter 3"),
])
def test_size_and_docstring_rules_fail_on_a_plant(tmp_path: Path, bad: dict[str, str], why: str) -> None:
    root = _tree(tmp_path, {**PLANT, **bad})
    assert any(why in p for p in layout.oversized(root) + layout.undocumented(root))


LAB_PLANT = {
    **PLANT,
    "grading/__init__.py": '"""Serves: the labs."""\n',
    "labs/__init__.py": '"""Serves: the labs."""\n',
    "labs/lab02_copy/__init__.py": '"""Serves: lab 02."""\n',
    "labs/lab02_copy/kit.py": '"""Serves: lab 02."""\nfrom helpers.chapters.ch03_memory import bench\n',
    "labs/lab05_calib/__init__.py": '"""Serves: lab 05."""\n',
    "labs/lab05_calib/kit.py": '"""Serves: lab 05."""\nfrom helpers.grading import check\n',
}


def test_a_clean_lab_tree_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, LAB_PLANT)
    assert layout.violations(root) == []


@pytest.mark.parametrize("rel, src, why", [
    ("labs/lab05_calib/runner.py", "from helpers.labs.lab02_copy import kit\n", "a lab must not import another lab"),
    ("chapters/ch03_memory/lab_demo.py", "from helpers.labs.lab02_copy import kit\n", "lower layer"),
    ("perf/roof.py", "def f():\n    from helpers.labs.lab02_copy.kit import x\n", "lower layer"),
])
def test_lab_rules_fail_on_a_plant(tmp_path: Path, rel: str, src: str, why: str) -> None:
    root = _tree(tmp_path, {**LAB_PLANT, rel: '"""Serves: core."""\n' + src})
    found = [p for p in layout.violations(root) if rel.replace(".py", "").replace("/", ".") in p]
    assert found and why in found[0], found


def test_no_helpers_module_imports_the_instructors_package() -> None:
    assert layout.reaches_instructors() == []


@pytest.mark.parametrize("rel, src, line", [
    ("grading/exercise.py", "from instructors.keys import lab05_calib\n", 2),
    ("tools/report.py", "def f():\n    import instructors.batch.grade\n", 3),
    ("labs/lab05_calib/kit.py", "import instructors\n", 2),
])
def test_a_helpers_module_importing_the_instructors_package_is_reported(tmp_path: Path, rel: str, src: str,
                                                                        line: int) -> None:
    root = _tree(tmp_path, {**LAB_PLANT, rel: '"""Serves: core."""\n' + src})
    found = layout.reaches_instructors(root)
    assert len(found) == 1 and found[0].startswith(f"helpers/{rel}:{line}:"), found
    assert "never imports the instructors' package" in found[0]


def test_looking_an_answer_key_up_by_name_is_not_an_import(tmp_path: Path) -> None:
    src = '"""Serves: core."""\nimport importlib\n\nkey = importlib.import_module("instructors.keys.lab05_calib")\n'
    root = _tree(tmp_path, {**LAB_PLANT, "grading/exercise.py": src})
    assert layout.reaches_instructors(root) == []


def test_an_import_cycle_in_the_instructors_package_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"__init__.py": '"""Serves: instructors."""\n',
                            "batch/__init__.py": '"""Serves: instructors."""\n',
                            "batch/grade.py": '"""Serves: instructors."""\nfrom instructors.batch import worker\n',
                            "batch/worker.py": '"""Serves: instructors."""\nfrom instructors.batch import grade\n'},
                 package="instructors")
    assert layout.cycles(root) == [["instructors.batch.grade", "instructors.batch.worker"]]


def test_serves_lines_agree_with_the_import_graph() -> None:
    from helpers.tools import serves

    assert serves.stale() == []


def test_a_drifted_serves_line_is_reported(tmp_path: Path) -> None:
    from helpers.tools import serves

    root = _tree(tmp_path, {**PLANT, "perf/gemm.py": '"""Serves: core — used by chapter 3."""\n'})
    # nothing imports perf.gemm in the plant: its line must say tooling, and the check says so
    assert any("perf/gemm.py" in p and "tooling" in p for p in serves.stale(root))
    root = _tree(tmp_path / "b", {**PLANT, "perf/gemm.py": '"""Serves: core — used by chapter 4."""\n',
                                  "chapters/ch05_other/__init__.py": '"""Serves: chapter 5."""\n',
                                  "chapters/ch03_memory/bench.py": '"""Serves: chapter 3."""\nfrom helpers.perf import gemm\n'})
    assert any("used by chapters 3, 9." in p for p in serves.stale(root))  # chapter 9 reaches it through 3


def test_an_answer_key_counts_for_its_lab_in_the_serves_lines(tmp_path: Path) -> None:
    from helpers.tools import serves

    root = _tree(tmp_path, {**PLANT, "perf/gemm.py": '"""Serves: core — used by lab 05."""\n'})
    assert any("perf/gemm.py" in p for p in serves.stale(root))  # nothing imports it yet
    _tree(tmp_path, {"__init__.py": '"""Serves: instructors."""\n', "keys/__init__.py": '"""Serves: instructors."""\n',
                     "keys/lab05_calib.py": '"""Serves: lab 05."""\nfrom helpers.perf import gemm\n'},
          package="instructors")
    assert not [p for p in serves.stale(root) if "perf/gemm.py" in p]  # lab 05's answer key imports it
