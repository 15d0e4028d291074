"""`make lab` works: JupyterLab starts headless from .venv, serves /lab, knows the course kernel,
has the widgets extension, and carries the course's settings overrides (no news toast)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from browser_support import KERNEL, REPO, http_get, lab_server


@pytest.fixture(scope="module")
def server():
    """One lab server over a copy of the start notebook, stopped after the module."""
    with lab_server([REPO / "notebooks" / "00_start_here.ipynb"], "smoke") as srv:
        yield srv


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
