"""helpers.tools.report_failure: what a failed notebook's row keeps (cell, line, exception, frames, course first)."""

from __future__ import annotations

import nbformat

from helpers.tools import report_failure

TRACEBACK = [  # an IPython traceback, colours left out: notebook cell -> helpers -> torch -> torch
    "-" * 20, "AssertionError    Traceback (most recent call last)",
    "Cell In[7], line 3\n      2 x = 1\n----> 3 helpers.deploy.run(x)\n",
    "File ~/course/helpers/deploy/run.py:41, in run(x)\n     40 y = x\n---> 41 return torch.compile(y)\n",
    "File ~/.venv/lib/python3.12/site-packages/torch/a.py:10, in compile(m)\n---> 10 return b(m)\n",
    "File ~/.venv/lib/python3.12/site-packages/torch/b.py:20, in b(m)\n---> 20 assert m\n",
    "File ~/.venv/lib/python3.12/site-packages/torch/c.py:30, in c(m)\n---> 30 assert m\n",
    "AssertionError: ",
]


def test_course_frames_come_first_then_the_last_library_frames():
    frames = report_failure.last_frames(TRACEBACK)
    assert [f.splitlines()[0].split(",")[0] for f in frames] == [
        "Cell In[7]", "File ~/course/helpers/deploy/run.py:41", "File ~/.venv/lib/python3.12/site-packages/torch/b.py:20",
        "File ~/.venv/lib/python3.12/site-packages/torch/c.py:30"]
    assert frames[1].splitlines()[1] == "  ---> 41 return torch.compile(y)"


def test_a_cell_that_ran_past_its_timeout_is_named_without_an_error_output():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("\nwhile True: pass")])
    nb.cells[0].metadata["execution"] = {"iopub.execute_input": "t", "shell.execute_reply": "t"}
    nb.cells[1].metadata["execution"] = {"iopub.execute_input": "t"}
    failure = report_failure.describe(nb, TimeoutError("A cell timed out while it was being executed, after 5 seconds."))
    assert (failure["cell"], failure["line"], failure["type"]) == (1, "while True: pass", "TimeoutError")
    assert report_failure.one_line(failure) == "cell 1 `while True: pass`: TimeoutError: A cell timed out while it " \
                                               "was being executed, after 5 seconds."
    assert report_failure.one_line(None, "old row\nValueError: boom") == "ValueError: boom"  # a runs.json of before
