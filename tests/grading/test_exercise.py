"""Where a lab's exercises come from: its answer key in the instructors' package (looked up by name, only where
that package lies beside helpers), else an extra folder, else the visible cases; a broken key is an error."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.grading import exercise


KEY0 = "instructors.keys.lab00_warmup_quantize"


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """An empty exercise registry for one test, lab 0's key not yet imported (both restored afterwards: a key
    module imported here, into the empty registry, must not stay imported, or later tests never see its exercises)."""
    fresh: dict = {}
    monkeypatch.setattr(exercise, "_REGISTRY", fresh)
    before = sys.modules.pop(KEY0, None)
    monkeypatch.delenv(exercise.EXTRA_VAR, raising=False)
    yield fresh
    sys.modules.pop(KEY0, None)
    if before is not None:
        sys.modules[KEY0] = before


def test_an_answer_key_is_named_after_its_lab_package() -> None:
    assert exercise.answer_key_module("lab05") == "instructors.keys.lab05_entropy_calibration"
    assert exercise.answer_key_module("lab99") is None
    assert exercise.is_answer_key("instructors.keys.lab05_entropy_calibration") and exercise.is_answer_key("instructors")
    assert exercise.is_answer_key("instructors.batch.grade")
    assert not exercise.is_answer_key("instructorsx.y") and not exercise.is_answer_key("helpers.labs.lab07_qat.kit")


def test_here_the_answer_key_gives_specs_and_hidden_cases(registry: dict) -> None:
    assert exercise.answer_keys_present()
    exercise.load_lab("lab00")
    ex = registry["lab00.quantize"]
    assert ex.spec is not None and ex.hidden is not None


def test_an_instructors_package_that_is_not_beside_this_helpers_is_not_used(registry: dict, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exercise, "COURSE", tmp_path)  # as a students' copy with the grader's install on the path
    assert not exercise.answer_keys_present()
    exercise.load_lab("lab00")
    assert registry["lab00.quantize"].spec is None  # the visible cases, as shipped


@pytest.mark.parametrize("package", ["no_such_instructors.keys", "instructors"], ids=["parent-missing", "key-missing"])
def test_a_missing_key_or_package_falls_back_to_the_visible_cases(registry: dict, monkeypatch: pytest.MonkeyPatch,
                                                                   package: str) -> None:
    monkeypatch.setattr(exercise, "KEYS_PACKAGE", package)
    exercise.load_lab("lab00")
    assert registry["lab00.quantize"].spec is None and registry["lab00.quantize"].visible()


def test_a_key_that_needs_a_missing_module_is_an_error(registry: dict, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    keys = tmp_path / "broken_instructors" / "keys"
    keys.mkdir(parents=True)
    (keys.parent / "__init__.py").write_text("")
    (keys / "__init__.py").write_text("")
    (keys / "lab00_warmup_quantize.py").write_text(textwrap.dedent("""\
        import no_such_module_anywhere  # a key whose own import is broken
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(exercise, "KEYS_PACKAGE", "broken_instructors.keys")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_anywhere"):
        exercise.load_lab("lab00")


def test_resolve_refuses_anything_outside_helpers() -> None:
    from helpers.errors import InputError

    for ref in ("instructors.keys.lab00_warmup_quantize:spec_scale", "os:getcwd"):
        with pytest.raises(InputError, match="not a course function"):
            exercise.resolve(ref)
