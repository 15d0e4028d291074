"""The course as a student meets it: JupyterLab in headless Chromium, driven by Playwright.

The server is started as `make lab` starts it (jupyter/lab.sh, plus --no-browser, a port and a
token), over a copy of the course tree, and the browser first opens the page `make lab` opens.

1. The start notebook opens on the course kernel with no dialog and no news pop-up; from the file
   browser's root every chapter and every lab is listed; lab 0 opens from the file browser.
   Run All on the unfinished lab runs every check cell, and each says "not done yet" without a
   traceback; a wrong answer then shows ✗ with its message (no course traceback), a right one ✓.
2. The quantization explorer (notebook 05b) runs, renders its sliders; moving the bits slider
   changes the readout and the figure.

Screenshots go to artifacts/browser/. Skip these with `make test BROWSER=0` (no Chromium),
or `pytest -m "not browser"`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.support.browser import (
    REPO,
    START,
    cell,
    cell_output,
    cell_ran,
    chromium_page,
    chromium_path,
    course_server,
    explain_failures,
    file_browser_open,
    kernel_dialog_visible,
    kernel_name,
    news_toasts,
    open_notebook,
    run_all_cells,
    run_cells_from,
    screenshot,
    set_cell_source,
    wait_done,
    wait_kernel_idle,
)

from instructors.batch.labgen import BEGIN_SOLUTION, END_SOLUTION

pytestmark = pytest.mark.browser

EXPLORER = "notebooks/05b_quantization_explorer.ipynb"
LAB = "labs/lab00_warmup_quantize.ipynb"
KERNEL_DISPLAY = "GPU INT8 course"
# The classic mistake, by the function the exercise asks for; any other function gets `return 0`.
WRONG_ANSWERS = {"symmetric_scale": "float(x.max()) / 127  # forgets the negative side"}
NOT_DONE = re.compile(r"not done yet", re.I)
# What a traceback through the course's own code looks like in an output.
COURSE_TRACEBACK = re.compile(r"Traceback|helpers/grading|check\.py|exercise\.py")


@pytest.fixture(scope="module", autouse=True)
def _needs_chromium_and_playwright() -> None:
    """Fail with the fix when the browser or its driver is missing (these tests were asked for)."""
    if chromium_path() is None:
        pytest.fail("chromium is not installed. Install it (apt-get install -y chromium, or "
                    "make browser-deps), or skip the browser tests: make test BROWSER=0")
    pytest.importorskip("playwright", reason="Playwright for Python is missing: make setup")


@pytest.fixture(scope="module")
def server():
    """One server for the module, started as `make lab` starts it."""
    with course_server("course") as srv:
        yield srv


def _assert_course_kernel(page) -> None:
    """The notebook opened on the course kernel, with no kernel-selection dialog."""
    assert not kernel_dialog_visible(page), "a dialog (kernel selection?) opened with the notebook"
    name = kernel_name(page)
    assert name == KERNEL_DISPLAY, f"kernel is {name!r}, not {KERNEL_DISPLAY!r}"


def _grade_id(c: dict) -> str:
    return c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def check_cells(notebook: dict) -> list[int]:
    """Indices of the graded cells (the ones that call check())."""
    return [i for i, c in enumerate(notebook["cells"])
            if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def first_exercise(lab: dict, solution: dict) -> tuple[int, str, str]:
    """(cell index, wrong source, right source) for the lab's first code solution cell.

    The right source is the instructor's solution (markers dropped); the wrong one replaces the
    solution block with `return <a classic mistake>`.
    """
    answers = {_grade_id(c): "".join(c["source"]) for c in solution["cells"]}
    for i, c in enumerate(lab["cells"]):
        meta = c.get("metadata", {}).get("nbgrader", {})
        if c["cell_type"] != "code" or not meta.get("solution"):
            continue
        source = answers[meta["grade_id"]]
        name = re.search(r"^def (\w+)", source, re.M)
        mistake = WRONG_ANSWERS.get(name.group(1) if name else "", "0")
        right, wrong, skipping = [], [], False
        for line in source.splitlines():
            if line.strip() == BEGIN_SOLUTION:
                indent = line[: len(line) - len(line.lstrip())]
                wrong.append(f"{indent}return {mistake}")
                skipping = True
            elif line.strip() == END_SOLUTION:
                skipping = False
            else:
                right.append(line)
                if not skipping:
                    wrong.append(line)
        return i, "\n".join(wrong), "\n".join(right)
    raise AssertionError("the lab has no code cell with nbgrader solution metadata")


def test_first_exercise_answers_come_from_the_solution():
    lab = json.loads((REPO / LAB).read_text(encoding="utf-8"))
    sol = json.loads((REPO / "solutions" / Path(LAB).name).read_text(encoding="utf-8"))
    index, wrong, right = first_exercise(lab, sol)
    assert check_cells(lab) and check_cells(lab)[0] > index
    assert BEGIN_SOLUTION not in right and wrong != right
    assert WRONG_ANSWERS["symmetric_scale"] in wrong, "lab 0's first exercise is no longer the scale"
    assert right.splitlines()[0] == "".join(lab["cells"][index]["source"]).splitlines()[0]


def test_make_lab_start_page_then_lab0_from_the_file_browser(server):
    lab = json.loads((REPO / LAB).read_text(encoding="utf-8"))
    sol = json.loads((REPO / "solutions" / Path(LAB).name).read_text(encoding="utf-8"))
    index, wrong, right = first_exercise(lab, sol)
    checks = check_cells(lab)
    check_of_first = min(i for i in checks if i > index)
    with chromium_page() as page, explain_failures(page, server, "lab0"):
        page.goto(server.start_url())  # what `make lab` opens in the student's browser
        page.wait_for_url(re.compile(re.escape(f"/lab/tree/{START}")))
        wait_kernel_idle(page)
        _assert_course_kernel(page)
        assert not news_toasts(page), f"a news/update toast is showing: {news_toasts(page)}"
        screenshot(page, "lab0-1-start-page")

        root, labs = file_browser_open(page, LAB)
        assert {"notebooks", "labs"} <= set(root), f"the file browser's root lists only {root}"
        want = sorted(p.name for p in (REPO / "labs").glob("*.ipynb"))
        assert sorted(n for n in labs if n.endswith(".ipynb")) == want, labs
        _assert_course_kernel(page)

        run_all_cells(page)
        wait_done(page)
        for i in checks:
            cell(page, i).scroll_into_view_if_needed()
            out = cell_output(page, i)
            assert cell_ran(page, i), f"Run All never reached check cell {i}: an earlier cell stopped it"
            assert NOT_DONE.search(out), f"check cell {i} of the unfinished lab says:\n{out}"
            assert not COURSE_TRACEBACK.search(out), f"check cell {i} shows a traceback:\n{out}"
        cell(page, checks[0]).scroll_into_view_if_needed()
        screenshot(page, "lab0-2-unfinished")

        set_cell_source(page, index, wrong)
        run_cells_from(page, index, check_of_first - index + 1)
        out = cell_output(page, check_of_first)
        assert "✗" in out and len(out.strip().splitlines()) >= 2, f"a wrong answer shows:\n{out}"
        assert not COURSE_TRACEBACK.search(out), f"a wrong answer shows a traceback:\n{out}"
        screenshot(page, "lab0-3-wrong-answer")

        set_cell_source(page, index, right)
        run_cells_from(page, index, check_of_first - index + 1)
        out = cell_output(page, check_of_first)
        assert "✓" in out and "✗" not in out, f"the instructor's answer shows:\n{out}"
        screenshot(page, "lab0-4-right-answer")


def _wait_new_image(page, old_src: str | None) -> None:
    """Wait until the explorer's figure has a new source and has finished loading."""
    page.wait_for_function(
        "(src) => { const i = document.querySelector('.widget-image');"
        " return i && i.getAttribute('src') !== src && i.complete && i.naturalWidth > 0; }",
        arg=old_src, timeout=60_000)


def test_explorer_renders_and_reacts_to_the_slider(server):
    with chromium_page() as page, explain_failures(page, server, "explorer"):
        open_notebook(page, server, EXPLORER, workspace="explorer")
        _assert_course_kernel(page)
        run_all_cells(page)
        wait_done(page)
        progress = page.locator(".widget-hprogress")  # the tqdm.auto bar of the bit sweep
        assert progress.count() >= 1, "no tqdm.auto progress bar rendered (ipywidgets missing?)"
        bits = page.locator(".widget-slider", has_text="bits").first
        bits.wait_for(state="visible", timeout=60_000)
        readout = page.locator(".workbook-explorer-readout").first
        image = page.locator(".widget-image").first
        bits.scroll_into_view_if_needed()
        before_text, before_img = readout.inner_text(), image.get_attribute("src")
        assert before_text.startswith("8-bit symmetric per-tensor"), before_text

        handle = bits.locator(".noUi-handle").first
        handle.focus()
        for _ in range(4):  # 8 bits -> 4 bits, one keyboard step at a time
            handle.press("ArrowLeft")
        page.wait_for_function(
            "() => (document.querySelector('.workbook-explorer-readout') || {}).textContent"
            "?.startsWith('4-bit')", timeout=60_000)
        _wait_new_image(page, before_img)
        after_text = readout.inner_text()
        sqnr = [float(re.search(r"SQNR (-?[\d.]+) dB", t).group(1))
                for t in (before_text, after_text)]
        assert sqnr[1] < sqnr[0] - 6, f"SQNR should drop by well over 6 dB from 8 to 4 bits: {sqnr}"

        four_bit_img = image.get_attribute("src")
        page.locator(".widget-toggle-button", has_text="per-channel").first.click()
        page.wait_for_function(
            "() => (document.querySelector('.workbook-explorer-readout') || {}).textContent"
            "?.includes('per-channel')", timeout=60_000)
        _wait_new_image(page, four_bit_img)
        wait_done(page)
        assert not news_toasts(page), f"a news/update toast is showing: {news_toasts(page)}"
        page.locator(".jp-OutputArea-output", has=bits).first.scroll_into_view_if_needed()
        screenshot(page, "explorer")
