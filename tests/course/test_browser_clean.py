"""Every notebook opens unmodified in JupyterLab: opening a chapter, lab or solution and letting its kernel start
must not mark it dirty (closing it would then ask to save a file nobody changed). JupyterLab writes the kernel's
spec and language_info into an opened notebook; helpers.tools.notebooks fmt stores the same, and this test, with
one server and one page for all notebooks, opens each by JupyterLab's own command and reads its modified flag. A planted notebook with the old
metadata (language_info holding only the name) shows the check failing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.browser import KERNEL, REPO, chromium_page, chromium_path, course_server, failure

pytestmark = pytest.mark.browser

NOTEBOOKS = [p.relative_to(REPO).as_posix() for folder in ("notebooks", "labs", "solutions")
             for p in sorted((REPO / folder).glob("*.ipynb"))]
PLANTED = "planted_old_metadata.ipynb"
DIRTY_TAB = ".lm-TabBar-tab.jp-mod-current.jp-mod-dirty"


# Open a notebook through JupyterLab's own command (no page load), wait until its kernel has answered (that
# reply is what rewrites language_info), read the model's dirty flag, then shut the kernel down and close the tab.
OPEN_JS = """async ([paths, parallel]) => {
  const app = window.jupyterapp;
  const one = async (path) => {
  const widget = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  await widget.context.ready;
  await widget.sessionContext.ready;
  const kernel = widget.sessionContext.session && widget.sessionContext.session.kernel;
  if (!kernel) return {path, error: 'no kernel started'};
  await kernel.info;
  await new Promise(r => setTimeout(r, 300));
  const dirty = widget.context.model.dirty;
  await widget.sessionContext.shutdown();
  widget.context.model.dirty = false;
  widget.close();
  return {path, dirty, kernel: kernel.name};
  };
  const queue = [...paths], out = [];
  const worker = async () => { while (queue.length) out.push(await one(queue.shift())); };
  await Promise.all(Array.from({length: parallel}, worker));
  return out;
}"""
PARALLEL = 3  # notebooks opening at once: kernel start-up dominates, and overlaps


def opened_modified(page, relpaths: list[str]) -> list[str]:
    """Open each notebook in the running JupyterLab; those marked modified once their kernel answered."""
    got = page.evaluate(OPEN_JS, [relpaths, PARALLEL])
    problems = [f"{g['path']}: {g['error']}" for g in got if "error" in g]
    problems += [f"{g['path']} opened on kernel {g['kernel']!r}, not {KERNEL!r}" for g in got
                 if "error" not in g and g["kernel"] != KERNEL]
    assert not problems and len(got) == len(relpaths), problems
    return sorted(g["path"] for g in got if g["dirty"])


@pytest.fixture()
def app_in_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start the server with JupyterLab's app exposed to the page (window.jupyterapp), so that the test opens
    notebooks by command instead of loading the page again for each."""
    import tests.support.browser as browser

    plain = browser.lab_command
    monkeypatch.setattr(browser, "lab_command", lambda *a: [*plain(*a), "--LabApp.expose_app_in_browser=True"])


def test_every_notebook_opens_unmodified(app_in_browser: None) -> None:
    if chromium_path() is None:
        pytest.fail("chromium is not installed. Install it (make browser-deps), or skip: make test BROWSER=0")
    pytest.importorskip("playwright", reason="Playwright for Python is missing: make setup")
    with course_server("clean") as server, chromium_page() as page:
        nb = json.loads((server.root / NOTEBOOKS[0]).read_text(encoding="utf-8"))
        nb["metadata"]["language_info"] = {"name": "python"}
        Path(server.root / PLANTED).write_text(json.dumps(nb), encoding="utf-8")
        page.goto(server.url("/lab"), wait_until="domcontentloaded")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined")
        page.evaluate("() => window.jupyterapp.restored")
        assert opened_modified(page, [PLANTED]) == [PLANTED], failure(
            page, server, "clean-planted", "a notebook with the old metadata opened unmodified: the check is blind")
        dirty = opened_modified(page, NOTEBOOKS)
        assert not dirty, failure(page, server, "clean", (
            f"these notebooks open marked modified in JupyterLab: {dirty}. "
            "Fix: python -m helpers.tools.notebooks fmt (it stores what JupyterLab writes on opening)"))
