"""`make lab` works: JupyterLab, started as `make lab` starts it (jupyter/lab.sh), serves the whole
course tree with the start notebook first, knows the course kernel (and makes it the default), has
the widgets extension, and carries the course's settings overrides (no news toast)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.support.browser import KERNEL, LAUNCHER, REPO, START, course_server, http_get


@pytest.fixture(scope="module")
def server():
    """One server started as `make lab` starts it, over a copy of the course tree."""
    with course_server("smoke") as srv:
        yield srv


def _names(server, folder: str) -> set[str]:
    """The names the server lists in `folder` (relative to its root)."""
    status, body = http_get(server.url(f"/api/contents/{folder}"))
    assert status == 200, f"GET /api/contents/{folder} gave HTTP {status}: {body[:300]}"
    return {item["name"] for item in json.loads(body)["content"]}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_runs_the_shared_launcher():
    out = subprocess.run(["make", "-n", "--no-print-directory", "lab"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    lab_line = [ln for ln in out.splitlines() if LAUNCHER in ln]
    assert lab_line, (f"`make lab` no longer runs {LAUNCHER}, so the browser tests do not start "
                      f"the server the way it does. make -n lab prints:\n{out}")


def test_the_whole_course_is_served(server):
    root = _names(server, "")
    assert {"notebooks", "labs", "README.md"} <= root, (
        f"the server's root is not the repository (it lists {sorted(root)[:6]}...), so labs/ cannot "
        f"be opened. Fix: {LAUNCHER} must pass --ServerApp.root_dir=<the repository>")
    for folder in ("notebooks", "labs"):
        want = {p.name for p in (REPO / folder).glob("*.ipynb")}
        assert want and want <= _names(server, folder), f"{folder}/ is not served in full"


def test_the_start_notebook_opens_first(server):
    page = Path(unquote(urlparse(server.start_url()).path)).read_text(encoding="utf-8")
    assert f"/lab/tree/{START}?token=" in page, f"`make lab` would open:\n{page}"


def test_lab_page_is_served(server):
    status, body = http_get(server.url("/lab"))
    assert status == 200, f"GET /lab gave HTTP {status}.\nServer log:\n{server.log_tail()}"
    assert "JupyterLab" in body


def test_lab_refuses_requests_without_token(server):
    status, _ = http_get(f"http://127.0.0.1:{server.port}/api/contents")
    assert status in (401, 403), f"the API answered {status} without a token"


def test_course_kernel_is_registered_in_the_venv(server):
    status, body = http_get(server.url("/api/kernelspecs"))
    assert status == 200
    specs = json.loads(body)["kernelspecs"]
    assert KERNEL in specs, (f"kernel {KERNEL!r} is not registered (have {sorted(specs)}). "
                             "Fix: make setup (it runs ipykernel install --sys-prefix).")
    assert json.loads(body)["default"] == KERNEL, "new notebooks would not get the course kernel"
    python = Path(specs[KERNEL]["spec"]["argv"][0])
    assert python.resolve() == Path(sys.executable).resolve(), (
        f"the {KERNEL} kernel runs {python}, not this venv's {sys.executable}. Fix: make setup")


def test_course_notebooks_name_the_course_kernel():
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        meta = json.loads(nb.read_text(encoding="utf-8"))["metadata"]
        assert meta.get("kernelspec", {}).get("name") == KERNEL, (
            f"{nb.name} lacks kernelspec {KERNEL!r}: JupyterLab would ask which kernel to use. "
            f"Fix: python -m helpers.tools.notebooks fmt {nb}")


def test_news_toast_is_switched_off(server):
    plugin = "@jupyterlab/apputils-extension:notification"
    status, body = http_get(server.url(f"/lab/api/settings/{plugin}"))
    assert status == 200, body[:300]
    props = json.loads(body)["schema"]["properties"]
    assert props["fetchNews"]["default"] == "false", (
        "JupyterLab would show the 'Jupyter news' toast: jupyter/overrides.json is not in "
        f"{sys.prefix}/share/jupyter/lab/settings. Fix: make setup")
    assert props["checkForUpdates"]["default"] is False


def test_widgets_extension_matches_ipywidgets(server):
    import ipywidgets

    status, body = http_get(server.url("/lab/api/extensions"))
    assert status == 200, body[:300]
    names = {e["name"]: e for e in json.loads(body)}
    ext = (names.get("@jupyter-widgets/jupyterlab-manager")
           or names.get("jupyter-widgets-jupyterlab-manager"))
    assert ext is not None and ext.get("enabled", True), (
        "the ipywidgets extension is missing from JupyterLab, so sliders would not render. "
        "Fix: pip install jupyterlab_widgets (it pairs with ipywidgets "
        f"{ipywidgets.__version__}), then make setup")
    major = int(ipywidgets.__version__.split(".")[0])
    assert major == 8 and ext["installed_version"].startswith("5."), (
        f"ipywidgets {ipywidgets.__version__} needs jupyterlab_widgets 3.x "
        f"(@jupyter-widgets/jupyterlab-manager 5.x); got {ext['installed_version']}")
