"""`make lab LAB_ARGS=--no-browser` prints a URL that opens the start notebook, not JupyterLab's Launcher: a
student on a remote machine copies that URL into a browser, and it must land where the course begins."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from tests.support.browser import REPO, START, http_get, start_lab

PRINTED = re.compile(r"http://127\.0\.0\.1:\d+(/\S*?)\?token=")


def printed_paths(log: str) -> list[str]:
    """The URL paths the server printed for the user to open (before ?token=)."""
    return PRINTED.findall(log)


def test_a_planted_launcher_url_is_caught() -> None:
    log = "[I ServerApp] http://127.0.0.1:8888/lab?token=abc\n    http://127.0.0.1:8888/lab?token=abc\n"
    assert printed_paths(log) == ["/lab", "/lab"] and f"/lab/tree/{START}" not in printed_paths(log)


def test_the_printed_url_opens_the_start_notebook() -> None:
    with tempfile.TemporaryDirectory(prefix="lab-url-") as tmp:
        server = start_lab(REPO, Path(tmp) / "server.log")
        try:
            paths = printed_paths(server.log_tail(80))
            assert paths, f"the server printed no URL to open:\n{server.log_tail()}"
            assert set(paths) == {f"/lab/tree/{START}"}, (
                f"with --no-browser `make lab` prints {sorted(set(paths))}, which opens the Launcher, not {START}. "
                f"Fix: jupyter/lab.sh passes --LabApp.default_url=/lab/tree/{START}")
            status, body = http_get(server.url(paths[0]))
            assert status == 200 and "JupyterLab" in body, f"GET {paths[0]} gave HTTP {status}"
        finally:
            server.stop()
            shutil.rmtree(server.home, ignore_errors=True)
