"""Chapter 9: the `python -m helpers.deploy` command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tests.support.tiny_models import tiny_cnn

from helpers.deploy.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The tiny CNN saved with torch.save, and its FP32 / Q/DQ exports made through the CLI."""
    d = tmp_path_factory.mktemp("cli")
    torch.save(tiny_cnn(), d / "tiny.pt")
    assert main(["export", str(d / "tiny.pt"), str(d / "fp32.onnx"), "--shape", "1,12,12"]) == 0
    assert (
        main(["export", str(d / "tiny.pt"), str(d / "qdq.onnx"), "--shape", "1,12,12", "--int8"])
        == 0
    )
    return d


def test_help_runs_as_a_module():
    out = subprocess.run(
        [sys.executable, "-m", "helpers.deploy", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0
    for cmd in ("export", "check", "build", "bench"):
        assert cmd in out.stdout


def test_check_passes_qdq_and_fails_fp32(saved, capsys):
    assert main(["check", str(saved / "qdq.onnx")]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["check", str(saved / "fp32.onnx"), "--rows"]) == 1
    assert "stays in float" in capsys.readouterr().out


def test_build_ort_int8_then_bench(saved, capsys):
    assert main(["build", str(saved / "fp32.onnx"), "--out", str(saved / "fp32_int8.onnx")]) == 0
    assert main(["bench", str(saved / "fp32_int8.onnx"), "--batch", "1,4", "--repeats", "2"]) == 0
    assert "items/s" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["check", "missing.onnx"], "does not exist"),
        (["bench", "missing.onnx"], "does not exist"),
        (["build", "missing.onnx"], "does not exist"),
        (["export", "missing.pt", "x.onnx", "--shape", "1,12,12"], "no model file"),
    ],
)
def test_missing_file_is_a_clear_error(argv, message, capsys, tmp_path):
    argv = [str(tmp_path / a) if a.startswith("missing") else a for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_wrong_input_name_and_shape(saved, capsys):
    assert main(["bench", str(saved / "fp32.onnx"), "--input-name", "images"]) == 2
    assert "no input named 'images'" in capsys.readouterr().err
    assert main(["bench", str(saved / "fp32.onnx"), "--shape", "3,12,12"]) == 2
    assert "must have shape (batch, 1, 12, 12)" in capsys.readouterr().err
    assert main(["export", str(saved / "tiny.pt"), str(saved / "x.onnx"), "--shape", "3,7"]) == 2
    assert "--shape" in capsys.readouterr().err


def test_absent_backend_is_a_clear_error(saved, capsys):
    pytest.importorskip("numpy")
    from helpers.plugins import trt_family

    if trt_family.find():
        pytest.skip("a TensorRT-family module is installed here")
    assert main(["build", str(saved / "qdq.onnx"), "--backend", "tensorrt"]) == 2
    err = capsys.readouterr().err
    assert "is not installed" in err and "pip install" in err and len(err.strip().splitlines()) == 1


def test_bad_shape_syntax_is_one_line_naming_the_help(capsys):
    assert main(["export", "resnet18", "x.onnx", "--shape", "a,b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument --shape:") and "export --help" in err
    assert len(err.strip().splitlines()) == 1
