"""A class on the course's JupyterHub, end to end, in a real browser on the loopback.

Two students and an instructor (throw-away system users) log in on `hub serve`. The instructor releases
lab 0; one student opens it in their JupyterLab, types the official answers into the answer cells and
saves; the other does nothing. The instructor collects, grades with the course grader and returns the
feedback; each student sees their own feedback only, and the instructor reads the gradebook in their
JupyterLab. A student's kernel imports the release copy of the course package (no answer keys), sees the
model cache, and cannot read the other student's files, the answer keys or the solutions.
Needs root (system users); skipped with the reason otherwise.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.support import hub as hubtest
from tests.support.browser import ARTIFACTS, REPO, chromium_path

pytestmark = pytest.mark.browser

LAB = "lab00_warmup_quantize"
MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def answers() -> dict[int, str]:
    """The official answer of each code answer cell of the lab (cell index -> source, markers removed)."""
    cells = json.loads((REPO / "solutions" / f"{LAB}.ipynb").read_text())["cells"]
    return {i: "\n".join(line for line in "".join(c["source"]).splitlines() if not MARKERS.match(line))
            for i, c in enumerate(cells)
            if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")}


PROBE = """
import json, os, glob, importlib.util
def readable(p):
    try:
        open(p, 'rb').read(1); return True
    except OSError:
        return False
package = importlib.util.find_spec('helpers').origin
cache = os.environ['WORKBOOK_CACHE']
print('PROBE' + json.dumps(dict(
    package=package, cache=cache, cache_file=readable(os.path.join(cache, 'probe.txt')),
    keys_in_release=glob.glob(os.path.join(os.path.dirname(package), 'labs', '*', 'key.py'))
    + glob.glob(os.path.join(os.path.dirname(os.path.dirname(package)), 'instructors')),
    other_home=readable({other!r}), key=readable({key!r}), solution=readable({solution!r}),
    state=readable({state!r}))))
"""


def write_probe(hub, home: Path, owner: str, other_lab: Path) -> str:
    """Put a notebook running PROBE into the student's home (theirs, private); return its name."""
    source = PROBE.format(other=str(other_lab), state=str(hub.folder / "state" / "jupyterhub.sqlite"),
                          key=str(REPO / "instructors" / "keys" / f"{LAB}.py"),
                          solution=str(REPO / "solutions" / f"{LAB}.ipynb"))
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}],
          "metadata": {"kernelspec": {"name": "gpu-int8-course", "display_name": "GPU INT8 course",
                                      "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    path = home / "probe.ipynb"
    path.write_text(json.dumps(nb))
    shutil.chown(path, owner)
    path.chmod(0o600)
    return path.name


def read_probe(page) -> dict:
    """Run the probe notebook open in the page; return what it found."""
    from tests.support import browser

    browser.wait_kernel_idle(page)
    browser.run_cells_from(page, 0, 1)
    out = browser.cell_output(page, 0)
    assert "PROBE" in out, out
    return json.loads(out.split("PROBE", 1)[1].strip().splitlines()[0])


def _open(page, path: str) -> None:
    """Open a file from the file browser of the user's JupyterLab, as they would: go to the home folder and refresh
    until the first name shows (a click on the home crumb or a refresh can come before the browser is ready for it:
    each is repeated, up to a minute), then double-click down the path."""
    names = path.split("/")

    def item(name: str):
        return page.locator(".jp-DirListing-item", has=page.locator(
            ".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$")))

    for _ in range(60):
        page.locator(".jp-BreadCrumbs-home").first.click()
        page.locator(".jp-FileBrowser [data-command='filebrowser:refresh']").first.click()
        if item(names[0]).first.is_visible():
            break
        page.wait_for_timeout(1000)
    for name in names:
        item(name).dblclick()


def _open_text(page, path: str) -> str:
    """Open a text file from the file browser; return the text its editor shows."""
    _open(page, path)
    editor = page.locator(".jp-FileEditor:visible .cm-content").first
    editor.wait_for()
    page.wait_for_function("() => [...document.querySelectorAll('.jp-FileEditor .cm-content')]"
                           ".some(e => e.innerText.length > 20)")
    return editor.inner_text()


def test_class_on_the_hub() -> None:
    """Release → one student solves and saves, one does not → collect → grade → return; isolation holds."""
    why = hubtest.missing_tools() or (None if chromium_path() else "chromium is missing (make browser-deps)")
    if why:
        pytest.skip(f"JupyterHub class test: {why}")
    from playwright.sync_api import sync_playwright

    from tests.support import browser

    started = time.monotonic()

    def mark(stage: str) -> None:
        print(f"{time.monotonic() - started:5.1f} s  {stage}", flush=True)

    work = Path(tempfile.mkdtemp(prefix="hub-test-"))
    cache = work / "cache"
    cache.mkdir()
    (cache / "probe.txt").write_text("the model cache")
    try:
        with hubtest.checkout_modes(), hubtest.class_users(["ann", "ben", "teacher"]) as users:
            ann, ben, teacher = users.passwords
            homes = {n: Path("~" + n).expanduser() for n in users.passwords}
            with hubtest.running_hub([ann, ben], [teacher], cache, ARTIFACTS / "hub-server.log") as hub, \
                    sync_playwright() as pw:
                chromium = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                              args=list(browser.CHROMIUM_FLAGS))
                mark("hub up")
                pages: dict = {}
                with hubtest.explained(hub, pages):
                    hubtest.instructor("hub", "release", LAB, "--students", f"{ann},{ben}", "--hub", hub.folder)
                    lab_file = f"labs/{LAB}.ipynb"
                    assert (homes[ben] / lab_file).is_file()

                    # All three log in; the hub starts their servers while Ann works.
                    probe = write_probe(hub, homes[ann], ann, homes[ben] / lab_file)
                    for name in (ann, ben, teacher):
                        pages[name] = chromium.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                        pages[name].set_default_timeout(60_000)
                        hubtest.log_in(pages[name], hub.url, name, users.passwords[name], wait=False,
                                       then=f"lab/tree/{probe}" if name == ann else "")
                    page, ben_page, t_page = pages[ann], pages[ben], pages[teacher]
                    mark("logged in")

                    # Ann: her kernel sees the release and the cache, nothing of Ben's or the keys; she solves lab 0.
                    hubtest.wait_lab(page, ann)
                    mark("Ann's lab")
                    found = read_probe(page)
                    mark("probe ran")
                    assert found["package"].startswith(str(hub.folder / "course")), found
                    assert found["cache"] == str(hub.folder / "cache") and found["cache_file"], found
                    assert not (found["keys_in_release"] or found["other_home"] or found["key"]
                                or found["solution"] or found["state"]), found
                    browser.file_browser_open(page, lab_file)  # in her JupyterLab, as she would
                    for index, source in answers().items():
                        browser.set_cell_source(page, index, source)
                    page.keyboard.press("Control+s")
                    deadline = time.monotonic() + 30
                    while "np.rint" not in (homes[ann] / lab_file).read_text() and time.monotonic() < deadline:
                        time.sleep(0.3)
                    assert "np.rint" in (homes[ann] / lab_file).read_text(), "Ann's save never reached her home"
                    mark("Ann solved and saved")

                    # The instructor collects, grades with the course grader, returns the feedback.
                    subs, grades = work / "submissions", homes[teacher] / "grades"
                    hubtest.instructor("hub", "collect", LAB, "--students", f"{ann},{ben}", "--out", subs)
                    hubtest.instructor("grade", subs, "--out", grades, "--jobs", "2")
                    mark("collected and graded")
                    shutil.chown(grades, teacher)
                    for p in grades.rglob("*"):
                        shutil.chown(p, teacher)
                    back = hubtest.instructor("hub", "return", LAB, "--students", f"{ann},{ben}", "--grades", grades,
                                              "--hub", hub.folder)
                    assert back.count("wrote") == 2, back
                    rows = {r["student"]: r for r in csv.DictReader((grades / "gradebook.csv").open())}
                    assert rows[ann]["status"] == rows[ben]["status"] == "graded", rows
                    assert float(rows[ann]["points"]) > float(rows[ben]["points"]) == 0, rows

                    # Each student reads their own feedback in JupyterLab; Ben cannot reach Ann's server.
                    text = _open_text(page, f"feedback/{LAB}.md")
                    assert f"— {ann}" in text and "Score: **4" in text and ben not in text, text
                    hubtest.wait_lab(ben_page, ben)
                    text = _open_text(ben_page, f"feedback/{LAB}.md")
                    assert f"— {ben}" in text and "Score: **0" in text and ann not in text, text
                    stolen = ben_page.request.get(f"{hub.url}/user/{ann}/api/contents/{lab_file}", max_redirects=0)
                    assert stolen.status in (302, 403, 404), stolen.status

                    # The instructor opens the gradebook in their JupyterLab.
                    mark("feedback seen")
                    hubtest.wait_lab(t_page, teacher)
                    _open(t_page, "grades/gradebook.csv")
                    t_page.locator(".jp-CSVViewer .lm-DataGrid").first.wait_for()
                    t_page.wait_for_function("() => !document.querySelector('.jp-MainAreaWidget .jp-Spinner')")
                    browser.screenshot(t_page, "hub-gradebook")
                    served = t_page.request.get(f"{hub.url}/user/{teacher}/files/grades/gradebook.csv").text()
                    assert list(csv.DictReader(served.splitlines())) == list(rows.values()), served
                    mark("gradebook seen")
                chromium.close()
            # Ctrl-C stopped the hub cleanly: its proxy and every user's server are gone, its TMPDIR is empty.
            assert hub.exit_code == 0, hub.tail()
            assert not hubtest.alive(hub.proxy_pid), f"the proxy (pid {hub.proxy_pid}) outlived the hub"
            for name in users.passwords:
                left = hubtest.processes_of(name, wait=5.0)
                assert left == [], f"{name} still runs {left}"
            assert hub.left_in_tmp == [], f"left in the hub's TMPDIR: {hub.left_in_tmp}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mark("hub stopped, users removed")
