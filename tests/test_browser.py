"""The course as a student meets it: JupyterLab in headless Chromium, driven by Playwright.

1. The quantization explorer (notebook 05b) opens with the course kernel and no kernel dialog,
   runs, renders its sliders; moving the bits slider changes the readout and the figure.
2. A generated lab with a wrong answer typed into its solution cell shows the ✗ verdict.

Screenshots go to artifacts/browser/. Skip these with `make test BROWSER=0` (no Chromium),
or `pytest -m "not browser"`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser_support import (
    REPO,
    chromium_page,
    chromium_path,
    explain_failures,
    kernel_dialog_visible,
    kernel_name,
    lab_server,
    news_toasts,
    open_notebook,
    run_all_cells,
    screenshot,
    served_path,
    set_cell_source,
    wait_done,
)

pytestmark = pytest.mark.browser

EXPLORER = REPO / "notebooks" / "05b_quantization_explorer.ipynb"
PREFERRED_LAB = REPO / "labs" / "lab00_warmup_quantize.ipynb"
STUB = re.compile(r"^(?P<indent>\s+)raise NotImplementedError\b.*$")
KERNEL_DISPLAY = "GPU INT8 course"
# A classic mistake per lab (the first stub's return value); other labs get `return 0`.
WRONG_ANSWERS = {"lab00_warmup_quantize": "float(x.max()) / 127  # forgets the negative side"}


@pytest.fixture(scope="module", autouse=True)
def _needs_chromium_and_playwright() -> None:
    """Fail with the fix when the browser or its driver is missing (these tests were asked for)."""
    if chromium_path() is None:
        pytest.fail("chromium is not installed. Install it (apt-get install -y chromium, or "
                    "make browser-deps), or skip the browser tests: make test BROWSER=0")
    pytest.importorskip("playwright", reason="Playwright for Python is missing: make setup")


def _assert_course_kernel(page) -> None:
    """The notebook opened on the course kernel, with no kernel-selection dialog."""
    assert not kernel_dialog_visible(page), "a dialog (kernel selection?) opened with the notebook"
    name = kernel_name(page)
    assert name == KERNEL_DISPLAY, f"kernel is {name!r}, not {KERNEL_DISPLAY!r}"


def _wait_new_image(page, old_src: str | None) -> None:
    """Wait until the explorer's figure has a new source and has finished loading."""
    page.wait_for_function(
        "(src) => { const i = document.querySelector('.widget-image');"
        " return i && i.getAttribute('src') !== src && i.complete && i.naturalWidth > 0; }",
        arg=old_src, timeout=60_000)


def test_explorer_renders_and_reacts_to_the_slider():
    relpath = served_path(EXPLORER)
    with lab_server([EXPLORER], "explorer") as server, chromium_page() as page, \
            explain_failures(page, server, "explorer"):
        open_notebook(page, server, relpath)
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


def pick_lab() -> Path | None:
    """The warm-up lab if it exists, else the first generated lab, else None."""
    if PREFERRED_LAB.exists():
        return PREFERRED_LAB
    labs = sorted((REPO / "labs").glob("*.ipynb"))
    return labs[0] if labs else None


def wrong_answer(notebook: dict, answer: str = "0") -> tuple[int, str]:
    """(cell index, new source) for the first stub inside a function, answered `return answer`."""
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).splitlines()
        for j, line in enumerate(lines):
            m = STUB.match(line)
            if m:
                lines[j] = f"{m['indent']}return {answer}"
                return i, "\n".join(ln for ln in lines if ln.strip() != "# YOUR CODE HERE")
    raise AssertionError("no `raise NotImplementedError` stub inside a function in this lab")


def test_wrong_answer_in_a_lab_shows_the_verdict():
    lab = pick_lab()
    if lab is None:
        pytest.skip("no generated lab in labs/: run python -m helpers.grading generate")
    answer = WRONG_ANSWERS.get(lab.stem, "0  # a wrong answer, typed by the browser test")
    index, source = wrong_answer(json.loads(lab.read_text(encoding="utf-8")), answer)
    with lab_server([lab], f"lab-{lab.stem}") as server, chromium_page() as page, \
            explain_failures(page, server, f"lab-{lab.stem}"):
        open_notebook(page, server, served_path(lab))
        _assert_course_kernel(page)
        set_cell_source(page, index, source)
        run_all_cells(page)
        wait_done(page)
        verdict = page.locator(".jp-OutputArea-output", has_text="✗").first
        verdict.wait_for(state="visible", timeout=60_000)
        verdict.scroll_into_view_if_needed()
        text = verdict.inner_text()
        assert "Hint" in text, f"the ✗ verdict carries no hint:\n{text}"
        screenshot(page, f"lab-{lab.stem}-feedback")
