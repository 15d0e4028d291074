"""A kernel defined in a notebook cell keeps its source after linecache is cleared: on the H200 (Python 3.12) the
grader's kernel lost every cell's lines before the kernel was described, and lab 12's official solution was
"not graded" ("the source of hist_global cannot be read")."""

from __future__ import annotations

import linecache

import pytest

from helpers.grading import kernel_source
from helpers.grading.compare import BadAnswer


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    InteractiveShell.clear_instance()


def test_source_of_a_cell_function_survives_a_cleared_linecache(shell) -> None:
    shell.run_cell("def add_one(x):\n    return x + 1\n", store_history=True)
    fn = shell.user_ns["add_one"]
    linecache.clearcache()
    assert kernel_source._source(fn) == "def add_one(x):\n    return x + 1\n"


def test_without_the_cell_it_still_says_why(shell) -> None:
    """The planted failure: no IPython record of the cell, so the one-line reason, never a traceback."""
    shell.run_cell("def lost(x):\n    return x\n", store_history=True)
    fn = shell.user_ns["lost"]
    linecache.clearcache()
    shell.compile._filename_map.clear()
    with pytest.raises(BadAnswer, match="the source of lost cannot be read"):
        kernel_source._source(fn)
