"""Chapter 9: the TensorRT backend type-checks against the patched tensorrt-stubs 10.13."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mypy")


@pytest.fixture(scope="module", autouse=True)
def patched_stubs() -> None:
    """Write typings/tensorrt/ from the installed tensorrt-stubs (make setup does the same)."""
    subprocess.run([sys.executable, str(ROOT / "typings" / "patch_tensorrt_stubs.py")], check=True,
                   capture_output=True)


def test_patched_stubs_are_present():
    stub = (ROOT / "typings" / "tensorrt" / "tensorrt.pyi").read_text()
    assert "in_: list" in stub and ", in:" not in stub and "(self, in:" not in stub


def test_tensorrt_backend_typechecks_and_trt8_calls_do_not(tmp_path):
    """One mypy run (it reads [tool.mypy] in pyproject.toml): our module is clean, TRT 8 calls are not."""
    bad = tmp_path / "trt8_calls.py"
    bad.write_text(
        "import tensorrt as trt\n"
        "b = trt.Builder(trt.Logger(trt.Logger.WARNING))\n"
        "n = b.create_network(0)\n"
        "c = b.create_builder_config()\n"
        "c.max_workspace_size = 1 << 30\n"
        "e = b.build_engine(n, c)\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "helpers/deploy/tensorrt_backend.py", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in res.stdout.splitlines() if ": error:" in ln]
    assert lines, res.stdout + res.stderr
    assert not [ln for ln in lines if "tensorrt_backend.py" in ln], res.stdout
    assert any("build_engine" in ln for ln in lines) and any(
        "max_workspace_size" in ln for ln in lines
    )
