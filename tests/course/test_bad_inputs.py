"""Bad input never destroys, never lies, never dumps a traceback (issue 19).

One table of bad inputs to the public quantization, calibration, bench, data and cache functions
(each row: the exact error class and a fragment of the fix its message must name), one table of
every command-line verb against missing, empty, truncated, wrong-type and directory inputs (exit 2,
one line on stderr that names the fix, no traceback), and a property-based test over the command lines.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from helpers import bench, cli, data
from helpers.deploy import __main__ as deploy_cli
from helpers.errors import InputError, MissingPackageError, NoGPUError
from helpers.models import train
from helpers.quant import calibrators as C
from helpers.quant import core as Q
from helpers.quant import fake_quant, fp8, intgemm, metrics, sizes
from helpers.tools import notebooks, report, site, suite_time

ROOT = Path(__file__).resolve().parents[2]
F32 = np.linspace(-1, 1, 8, dtype=np.float32)
INTS = np.arange(8, dtype=np.int32)
NAN = np.array([1.0, np.nan], np.float32)
EMPTY = np.zeros(0, np.float32)


def _hist(bins: int) -> C.Histogram:
    """A histogram of |F32| with `bins` bins."""
    return C.Histogram(bins).collect(F32)


def _no_cupy(mp: pytest.MonkeyPatch) -> None:
    """Make `import cupy` fail, as on a machine without it."""
    mp.setitem(sys.modules, "cupy", None)


def _torch_without_gpu(mp: pytest.MonkeyPatch) -> None:
    """Make torch report no CUDA device."""
    mp.setattr(torch.cuda, "is_available", lambda: False)


def _truncated_jsonl(tmp: Path) -> Path:
    """A JSON-lines records file whose last line was cut off."""
    rec = bench.Record("a.b", 1.0, "x", "CPU", "2026-01-01")
    p = tmp / "r.jsonl"
    p.write_text(json.dumps(rec.to_json()) + "\n" + json.dumps(rec.to_json())[:20])
    return p


def _corrupt_cifar(tmp: Path) -> Path:
    """A cifar-10-batches-py folder whose files are all there but hold garbage."""
    folder = tmp / "cifar-10-batches-py"
    folder.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(b"not a pickle")
    return tmp


def _corrupt_imagefolder(tmp: Path) -> Path:
    """An ImageFolder tree with a .png that is not an image."""
    (tmp / "cat").mkdir()
    (tmp / "cat" / "broken.png").write_bytes(b"\x89PNG truncated")
    return tmp


def _cache_is_a_file(tmp: Path, mp: pytest.MonkeyPatch) -> Path:
    """Point WORKBOOK_CACHE at a file."""
    f = tmp / "cache"
    f.write_text("x")
    mp.setenv(train.CACHE_VAR, str(f))
    return train.cache_dir()


# (call, error class, fragment of the fix the message must name); call(tmp_path, monkeypatch)
FUNCTION_ROWS = [
    # quantize / dequantize / fake_quantize: wrong dtype, NaN/inf, empty, out-of-range parameter
    ("quantize-int-dtype", lambda t, m: Q.quantize(INTS, 0.1), InputError, "astype(np.float32)"),
    ("quantize-nan", lambda t, m: Q.quantize(NAN, 0.1), InputError, "nan_to_num"),
    ("quantize-empty", lambda t, m: Q.quantize(EMPTY, 0.1), InputError, "Pass at least one element"),
    ("quantize-zp-300-unsigned", lambda t, m: Q.quantize(F32, 0.1, 300, signed=False), InputError,
     "scale_zero_point()"),
    ("quantize-zp-half", lambda t, m: Q.quantize(F32, 0.1, 0.5), InputError, "round it first"),
    ("quantize-zp-128-signed", lambda t, m: Q.quantize(F32, 0.1, 128), InputError, "signed=False"),
    ("quantize-zp-nan", lambda t, m: Q.quantize(F32, 0.1, float("nan")), InputError, "round it first"),
    ("quantize-scale-zero", lambda t, m: Q.quantize(F32, 0.0), InputError, "scale_zero_point(amin, amax)"),
    ("quantize-bits-1", lambda t, m: Q.quantize(F32, 0.1, bits=1), InputError, "whole number from 2 to 16"),
    ("quantize-bits-float", lambda t, m: Q.quantize(F32, 0.1, bits=8.0), InputError, "whole number"),
    ("dequantize-float-q", lambda t, m: Q.dequantize(F32, 0.1), InputError, "Quantize it first"),
    ("dequantize-empty", lambda t, m: Q.dequantize(np.zeros(0, np.int8), 0.1), InputError, "at least one"),
    ("dequantize-nan-scale", lambda t, m: Q.dequantize(INTS.astype(np.int8), float("nan")), InputError,
     "scale_zero_point"),
    ("dequantize-zp-out-of-int8", lambda t, m: Q.dequantize(INTS.astype(np.int8), 0.1, 200), InputError,
     "scale_zero_point()"),
    ("fake-quantize-zp-half", lambda t, m: Q.fake_quantize(F32, 0.1, 0.5), InputError, "round it first"),
    ("fake-quantize-inf", lambda t, m: Q.fake_quantize(np.array([np.inf], np.float32), 0.1), InputError,
     "nan_to_num"),
    ("min-max-axis", lambda t, m: Q.min_max(F32, axis=3), InputError, "use a value in"),
    ("min-max-int", lambda t, m: Q.min_max(INTS), InputError, "astype"),
    ("scale-zp-nan", lambda t, m: Q.scale_zero_point(float("nan"), 1.0), InputError, "finite data"),
    ("scale-zp-order", lambda t, m: Q.scale_zero_point(2.0, 1.0), InputError, "in that order"),
    ("per-channel-axis", lambda t, m: Q.quantize_per_channel(F32.reshape(2, 4), axis=2), InputError,
     "use a value in"),
    ("per-group-size", lambda t, m: Q.quantize_per_group(F32.reshape(2, 4), 3), InputError, "Pick a divisor"),
    ("per-tensor-empty", lambda t, m: Q.quantize_per_tensor(EMPTY), InputError, "at least one"),
    ("roundtrip-nan", lambda t, m: Q.roundtrip(NAN), InputError, "nan_to_num"),
    ("ste-numpy", lambda t, m: fake_quant.fake_quant_ste(F32, 0.1), InputError, "helpers.quant.fake_quantize"),
    ("ste-int", lambda t, m: fake_quant.fake_quant_ste(torch.arange(4), 0.1), InputError, ".float()"),
    ("ste-zp-300", lambda t, m: fake_quant.fake_quant_ste(torch.ones(4), 0.1, 300), InputError,
     "scale_zero_point()"),
    ("fp8-int", lambda t, m: fp8.fp8_round(INTS), InputError, "astype"),
    ("fp8-nan", lambda t, m: fp8.fp8_round(NAN), InputError, "nan_to_num"),
    ("fp8-format", lambda t, m: fp8.fp8_round(F32, "e3m4"), InputError, "must be one of"),
    ("fp8-scale-zero", lambda t, m: fp8.fp8_fake_quantize(F32, 0.0), InputError, "Pass a positive value"),
    ("fp8-amax-text", lambda t, m: fp8.fp8_scale("big"), InputError, "Pass a positive value"),
    ("int4-float", lambda t, m: fp8.pack_int4(F32), InputError, "astype"),
    ("int4-range", lambda t, m: fp8.pack_int4(np.array([9, 0], np.int8)), InputError, "bits=4"),
    ("gemm-float", lambda t, m: intgemm.gemm_int8_ref(F32.reshape(2, 4), F32.reshape(4, 2)), InputError,
     "astype(np.int8)"),
    ("gemm-empty", lambda t, m: intgemm.gemm_int8_ref(np.zeros((0, 4), np.int8), np.zeros((4, 2), np.int8)),
     InputError, "at least one"),
    ("requant-zp-300", lambda t, m: intgemm.requantize_fixed(INTS, 1 << 30, 0, 300), InputError,
     "scale_zero_point()"),
    ("multiplier-nan", lambda t, m: intgemm.quantize_multiplier(float("nan")), InputError, "s_in * s_w / s_out"),
    ("metrics-shape", lambda t, m: metrics.mse(F32, F32[:4]), InputError, "same shape"),
    ("metrics-list", lambda t, m: metrics.sqnr_db([1.0], [1.0]), InputError, "np.asarray"),
    ("sizes-dtype", lambda t, m: sizes.tensor_bytes(4, "int3"), InputError, "must be one of"),
    # calibrators
    ("amax-max-int", lambda t, m: C.amax_max(INTS), InputError, "astype"),
    ("amax-max-nan", lambda t, m: C.amax_max(NAN), InputError, "nan_to_num"),
    ("amax-max-empty", lambda t, m: C.amax_max(EMPTY), InputError, "at least one"),
    ("amax-max-axis", lambda t, m: C.amax_max(F32, axis=2), InputError, "use a value in"),
    ("histogram-0-bins", lambda t, m: C.Histogram(num_bins=0), InputError, "whole number from 1"),
    ("histogram-edges", lambda t, m: C.Histogram(4, counts=np.ones(4, np.int64), edges=np.zeros(3)), InputError,
     "as np.histogram returns them"),
    ("histogram-collect-int", lambda t, m: C.Histogram().collect(INTS), InputError, "astype"),
    ("histogram-collect-nan", lambda t, m: C.Histogram().collect(NAN), InputError, "nan_to_num"),
    ("histogram-collect-empty", lambda t, m: C.Histogram().collect(EMPTY), InputError, "at least one"),
    ("percentile-empty-hist", lambda t, m: C.amax_percentile(C.Histogram()), InputError, "call collect(x)"),
    ("percentile-120", lambda t, m: C.amax_percentile(_hist(16), 120), InputError, "e.g. 99.99"),
    ("mse-one-bin", lambda t, m: C.amax_mse(_hist(1)), InputError, "num_bins=2048"),
    ("mse-stride-0", lambda t, m: C.amax_mse(_hist(256), stride=0), InputError, "whole number from 1"),
    ("entropy-fewer-bins-than-start", lambda t, m: C.amax_entropy(_hist(64)), InputError, "num_bins=2048"),
    ("entropy-start-0", lambda t, m: C.amax_entropy(_hist(256), start_bin=0), InputError, "whole number from 1"),
    ("calibrate-method", lambda t, m: C.calibrate(F32, "kl"), InputError, "must be one of"),
    ("calibrate-no-batches", lambda t, m: C.calibrate([]), InputError, "pass an array"),
    ("calibrate-nan", lambda t, m: C.calibrate([F32, NAN], "mse"), InputError, "nan_to_num"),
    ("calibrate-bins-0", lambda t, m: C.calibrate(F32, "entropy", num_bins=0), InputError, "whole number"),
    ("calibrate-all-few-bins", lambda t, m: C.calibrate_all(F32, num_bins=100), InputError, "num_bins=2048"),
    # bench: timing and records
    ("timeit-not-callable", lambda t, m: bench.timeit(3), InputError, "lambda: f(x)"),
    ("timeit-repeats-2.5", lambda t, m: bench.timeit(lambda: None, repeats=2.5), InputError, "whole number"),
    ("timeit-warmup-neg", lambda t, m: bench.timeit(lambda: None, warmup=-1), InputError, "whole number from 0"),
    ("timeit-backend", lambda t, m: bench.timeit(lambda: None, backend="gpu"), InputError, "must be one of"),
    ("timeit-torch-no-gpu", lambda t, m: (_torch_without_gpu(m), bench.timeit(lambda: None, backend="torch")),
     NoGPUError, "stored GPU reference"),
    ("timeit-cupy-missing", lambda t, m: (_no_cupy(m), bench.timeit(lambda: None, backend="cupy")),
     MissingPackageError, "pip install"),
    ("interleaved-empty", lambda t, m: bench.timeit_interleaved({}), InputError, "lambda: f(x)"),
    ("interleaved-repeats-0", lambda t, m: bench.timeit_interleaved({"a": lambda: None}, repeats=0), InputError,
     "whole number from 1"),
    ("record-nan", lambda t, m: bench.record("t.x", float("nan"), "x"), InputError, "Find where the NaN"),
    ("record-inf", lambda t, m: bench.record("t.x", float("inf"), "x"), InputError, "Find where the NaN"),
    ("record-text", lambda t, m: bench.record("t.x", "fast", "x"), InputError, "float(t.median_s)"),
    ("record-unit", lambda t, m: bench.record("t.x", 1.0, 5), InputError, "'ratio'"),
    ("records-truncated", lambda t, m: bench.load_records(_truncated_jsonl(t)), InputError,
     "delete the broken line"),
    ("records-missing", lambda t, m: bench.load_records(t / "none.jsonl"), InputError, "pass a records file"),
    ("records-folder", lambda t, m: bench.load_records(t), InputError, "pass a records file"),
    ("records-not-records", lambda t, m: (t.joinpath("l.json").write_text("[1, 2]"),
                                          bench.load_records(t / "l.json")), InputError, "helpers.records.record"),
    ("save-records-nan", lambda t, m: bench.save_records([bench.Record("a.b", float("nan"), "x", "CPU", "d")],
                                                          t / "r.json"), InputError, "Drop or re-measure"),
    ("ratios-baseline", lambda t, m: bench.ratios({}, "a"), InputError, "Pass one of"),
    # data and the model cache
    ("dataset-name", lambda t, m: data.load_dataset("mnist"), InputError, "must be one of"),
    ("dataset-root-is-file", lambda t, m: data.load_dataset("cifar10", root=__file__), InputError,
     "Pass the folder"),
    ("dataset-corrupt-cifar", lambda t, m: data.load_dataset("cifar10", root=_corrupt_cifar(t)), InputError,
     "Unpack cifar-10-python.tar.gz"),
    ("dataset-corrupt-image", lambda t, m: data.load_dataset("imagefolder", root=_corrupt_imagefolder(t)),
     InputError, "Replace or remove it"),
    ("cache-is-a-file", lambda t, m: _cache_is_a_file(t, m), InputError, "Point $WORKBOOK_CACHE"),
]


@pytest.mark.parametrize("call, error, fix", [pytest.param(c, e, f, id=i) for i, c, e, f in FUNCTION_ROWS])
def test_bad_input_to_a_public_function_is_a_clear_error(call, error, fix, tmp_path, monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    with pytest.raises(error) as info:
        call(tmp_path, monkeypatch)
    assert type(info.value) is error
    assert fix in str(info.value), str(info.value)


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> dict[str, Path]:
    """Files to feed the command lines: good ones to cut, and bad ones of every kind."""
    d = tmp_path_factory.mktemp("bad")
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    conv = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(conv, opset_imports=[helper.make_opsetid("", 17)]), d / "good.onnx")
    relu = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)]), d / "relu.onnx")
    torch.save(torch.nn.Linear(4, 2), d / "good.pt")
    torch.save(torch.nn.Linear(4, 2).state_dict(), d / "weights.pt")
    good_nb = (ROOT / "notebooks" / "00_start_here.ipynb").read_bytes()
    paths = {"missing.onnx": None, "missing.pt": None, "missing.jsonl": None, "missing.ipynb": None}
    for name in paths:
        paths[name] = d / name
    for name, content in {"empty.onnx": b"", "empty.pt": b"", "empty.jsonl": b"", "empty.ipynb": b"",
                          "trunc.onnx": (d / "good.onnx").read_bytes()[:60],
                          "trunc.pt": (d / "good.pt").read_bytes()[:200],
                          "trunc.jsonl": b'{"name": "a.b", "value": 1.0, "un',
                          "trunc.ipynb": good_nb[: len(good_nb) // 2],
                          "text.onnx": b"hello, not onnx\n", "text.jsonl": b"\x89PNG\r\n\x1a\n\x00\xff",
                          "list.ipynb": b"[1, 2]", "notes.txt": b"hello"}.items():
        (d / name).write_bytes(content)
        paths[name] = d / name
    for folder in ("dir.onnx", "dir.pt", "nb_folder", "foreign"):
        (d / folder).mkdir()
    (d / "foreign" / "mine.txt").write_text("keep me")
    paths.update({k: d / k for k in ("dir.onnx", "dir.pt", "nb_folder", "foreign", "good.onnx", "relu.onnx",
                                     "good.pt", "weights.pt")})
    paths["root"] = d
    return paths


DEPLOY_FILE_CASES = [("missing", "missing.onnx", "Export it again"), ("empty", "empty.onnx", "Export it again"),
                     ("truncated", "trunc.onnx", "Export it again"), ("wrong-type", "text.onnx", "Export it again"),
                     ("directory", "dir.onnx", "Pass the .onnx file itself")]
RECORD_FILE_CASES = [("missing", "missing.jsonl", "make notebooks"), ("empty", "empty.jsonl", "make notebooks"),
                     ("truncated", "trunc.jsonl", "delete the broken line"),
                     ("wrong-type", "text.jsonl", "Pass results.json"), ("directory", "dir.pt", "make notebooks")]
STORE_CASES = [("missing", "missing.jsonl", "make test"), ("empty", "empty.jsonl", "make test"),
               ("truncated", "trunc.jsonl", "delete the broken line"),
               ("wrong-type", "text.jsonl", "Pass results.json"), ("directory", "dir.pt", "make test")]
NOTEBOOK_CASES = [("missing", "missing.ipynb", "Pass a notebook"), ("empty", "empty.ipynb", "git checkout"),
                  ("truncated", "trunc.ipynb", "git checkout"), ("wrong-type", "notes.txt", "Pass a notebook"),
                  ("wrong-json", "list.ipynb", "git checkout"), ("directory", "nb_folder", "Pass a notebook")]
MODEL_CASES = [("missing", "missing.pt", "check the spelling"), ("empty", "empty.pt", "torch.save(model, path)"),
               ("truncated", "trunc.pt", "torch.save(model, path)"),
               ("wrong-type", "weights.pt", "torch.save(model, path)"), ("directory", "dir.pt", "torch.save")]

# (id, main, argv with {name} for a file of the `bad` fixture, fix fragment)
CLI_ROWS = (
    [(f"deploy-{verb}-{kind}", deploy_cli.main, [verb, "{%s}" % f], fix)
     for verb in ("check", "build", "bench") for kind, f, fix in DEPLOY_FILE_CASES]
    + [(f"deploy-export-{kind}", deploy_cli.main, ["export", "{%s}" % f, "{root}/o.onnx", "--shape", "4"], fix)
       for kind, f, fix in MODEL_CASES]
    + [("deploy-export-out-not-onnx", deploy_cli.main, ["export", "{good.pt}", "{notes.txt}", "--shape", "4"],
        "Name it OUT.onnx"),
       ("deploy-export-out-is-model", deploy_cli.main, ["export", "{good.pt}", "{good.pt}", "--shape", "4"],
        "Name it OUT.onnx"),
       ("deploy-export-bad-shape", deploy_cli.main, ["export", "{good.pt}", "{root}/o.onnx", "--shape", "3,3"],
        "--shape"),
       ("deploy-build-calib-truncated", deploy_cli.main, ["build", "{good.onnx}", "--calib", "{trunc.onnx}"],
        "np.save"),
       ("deploy-bench-repeats-0", deploy_cli.main, ["bench", "{good.onnx}", "--repeats", "0"], "bench --help"),
       ("deploy-no-verb", deploy_cli.main, [], "--help")]
    + [(f"report-check-names-{kind}", report.main, ["check-names", "{%s}" % f], fix)
       for kind, f, fix in RECORD_FILE_CASES]
    + [(f"report-store-cpu-{kind}", report.main, ["store-cpu", "{%s}" % f, "{missing.jsonl}"], fix)
       for kind, f, fix in STORE_CASES]
    + [("report-store-cpu-no-args", report.main, ["store-cpu"], "store-cpu --help"),
       ("report-check-names-no-args", report.main, ["check-names"], "check-names --help"),
       ("report-check-tmp-missing", report.main, ["check-tmp", "{missing.jsonl}"], "private TMPDIR"),
       ("report-check-tmp-file", report.main, ["check-tmp", "{notes.txt}"], "private TMPDIR"),
       ("report-run-only-matches-nothing", report.main, ["--only", "typo*", "--out", "{root}/r"], "Fix the pattern"),
       ("report-run-only-empty", report.main, ["--only", "", "--out", "{root}/r"], "Pass a glob"),
       ("report-run-out-is-a-file", report.main, ["--only", "00_*", "--out", "{notes.txt}"], "new or empty folder"),
       ("report-run-out-foreign-folder", report.main, ["--only", "00_*", "--out", "{foreign}"],
        "new or empty folder"),
       ("report-run-timeout-negative", report.main, ["--timeout", "-5"], "report --help"),
       ("report-run-timeout-text", report.main, ["--timeout", "soon"], "report --help"),
       ("report-run-store-not-reference", report.main, ["--only", "00_*", "--out", "{root}/r", "--store",
                                                         "{foreign}"], "not a reference folder")]
    + [(f"notebooks-{verb}-{kind}", notebooks.main, [verb, "{%s}" % f], fix)
       for verb in ("fmt", "check") for kind, f, fix in NOTEBOOK_CASES]
    + [("notebooks-no-verb", notebooks.main, [], "notebooks --help"),
       ("site-out-is-a-file", site.main, ["--out", "{notes.txt}"], "new or empty folder"),
       ("site-out-foreign-folder", site.main, ["--out", "{foreign}"], "new or empty folder"),
       ("suite-time-no-args", suite_time.main, [], "suite_time --help"),
       ("suite-time-start-text", suite_time.main, ["yesterday", "{root}/s.json"], "suite_time --help"),
       ("suite-time-start-ancient", suite_time.main, ["0", "{root}/s.json"], "$(date +%s)"),
       ("suite-time-out-folder", suite_time.main, ["NOW", "{dir.pt}"], "Pass the JSON file")]
)


def _argv(template: list[str], bad: dict[str, Path]) -> list[str]:
    """Fill {name} placeholders with the paths of the `bad` fixture, and NOW with the current time."""
    fill = {**{k: str(v) for k, v in bad.items()}, "NOW": str(time.time())}
    return [re.sub(r"\{([^}]+)\}|NOW", lambda m: fill[m.group(1) or "NOW"], a) for a in template]


def _run(main, argv: list[str]) -> tuple[int, str, str]:
    """Run a command line in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def untouchable(monkeypatch, tmp_path):
    """Guards: no notebook is ever executed, and the stored CPU reference is a scratch copy."""
    def never(*a, **k):
        raise AssertionError("a bad command line must not run notebooks")
    monkeypatch.setattr(report, "execute_all", never)
    monkeypatch.setattr(report, "REFERENCE_DIR", tmp_path / "reference")


@pytest.mark.parametrize("main, template, fix", [pytest.param(m, a, f, id=i) for i, m, a, f in CLI_ROWS])
def test_bad_command_line_is_one_line_naming_the_fix(main, template, fix, bad, untouchable):
    before = {p: p.read_bytes() for p in bad["root"].rglob("*") if p.is_file()}
    rc, _, err = _run(main, _argv(template, bad))
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and fix in err, err
    assert {p: p.read_bytes() for p in before} == before  # nothing the command did not write was changed


def test_check_proves_it_had_something_to_check(bad, capsys):
    assert deploy_cli.main(["check", str(bad["relu.onnx"])]) == 1
    out = capsys.readouterr().out
    assert "nothing INT8 could run" in out and "OK" not in out


def test_debug_shows_the_traceback_and_a_crash_is_still_one_line(bad, capsys, monkeypatch):
    assert deploy_cli.main(["check", str(bad["empty.onnx"]), "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")

    def boom(argv):
        raise ZeroDivisionError("division by zero")
    assert cli.run(boom, []) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected ZeroDivisionError") and "--debug" in err and "Traceback" not in err


def test_command_lines_as_processes_print_no_traceback(bad):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (["helpers.deploy", "check", str(bad["trunc.onnx"])],
                 ["helpers.tools.report", "store-cpu"]):
        out = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("error: ")


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the command times the solution")
def test_lab13_solution_timer_without_a_gpu_is_one_line_and_writes_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "instructors.lab13_bench", "--out", str(tmp_path / "l13")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "needs an NVIDIA GPU" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "l13").exists()


def test_report_out_on_an_unrelated_folder_leaves_it_intact(tmp_path, untouchable):
    folder = tmp_path / "thesis"
    (folder / "figures").mkdir(parents=True)
    (folder / "chapter1.tex").write_text("years of work")
    (folder / "figures" / "plot.png").write_bytes(b"png")
    before = sorted((p.relative_to(folder), p.read_bytes() if p.is_file() else b"") for p in folder.rglob("*"))
    for argv in (["--out", str(folder), "--only", "00_*"], ["--out", str(folder)]):
        rc, _, err = _run(report.main, argv)
        assert rc == 2 and "did not write" in err and "chapter1.tex" in err
    after = sorted((p.relative_to(folder), p.read_bytes() if p.is_file() else b"") for p in folder.rglob("*"))
    assert after == before and not (tmp_path / "thesis.tar.gz").exists()


def test_only_matching_nothing_never_rewrites_the_stored_summary(tmp_path, untouchable):
    store = tmp_path / "h200"
    store.mkdir()
    (store / "results.json").write_text("[]")
    (store / "summary.md").write_text("the stored summary")
    rc, _, err = _run(report.main, ["--only", "typo*", "--out", str(tmp_path / "r"), "--store", str(store)])
    assert rc == 2 and "matches no notebook" in err
    assert (store / "summary.md").read_text() == "the stored summary" and not (tmp_path / "r").exists()


def test_report_reuses_only_its_own_output_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "execute_all", lambda paths, out, timeout, **options: [])
    out = tmp_path / "report"
    report.run(out, "00_*", 5)
    assert cli.MARKER in {p.name for p in out.iterdir()} and (tmp_path / "report.tar.gz").is_file()
    (out / "figures").mkdir(exist_ok=True)
    report.run(out, "00_*", 5)  # an earlier output of the same command is cleared and rewritten
    (out / "mine.txt").write_text("x")
    with pytest.raises(InputError, match="did not write"):
        report.run(out, "00_*", 5)
    assert (out / "mine.txt").read_text() == "x"


def test_notebooks_fmt_writes_nothing_when_one_notebook_is_corrupt(tmp_path):
    good = notebooks.build(tmp_path / "a.ipynb", [("md", "# hi")])
    messy = json.loads(good.read_text())
    messy["cells"][0]["metadata"] = {"scrolled": True}
    good.write_text(json.dumps(messy))
    (tmp_path / "b.ipynb").write_text('{"cells": [')
    before = good.read_text()
    with pytest.raises(InputError, match="b.ipynb is not a readable notebook"):
        notebooks.fmt([tmp_path])
    assert good.read_text() == before


def test_rejected_cache_entry_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    model = torch.nn.Linear(2, 2)
    path = tmp_path / "m.pt"
    state = model.state_dict()
    torch.save({"state_dict": state, "weights_hash": "0" * 64}, path)
    assert not train._load_cached(path, model, "resnet_small")
    assert capsys.readouterr().out == "cached model resnet_small failed its hash check (m.pt): retraining.\n"
    path.write_bytes(b"garbage")
    assert not train._load_cached(path, model, "resnet_small")
    assert "cached model resnet_small could not be read" in capsys.readouterr().out


def test_tmp_checker_lists_what_is_left_and_honours_allow(tmp_path, capsys):
    (tmp_path / "leaked_onnx").mkdir()
    (tmp_path / "leaked_onnx" / "model.onnx").write_bytes(b"x" * 2_000_000)
    (tmp_path / "torchinductor_me").mkdir()
    (tmp_path / ".ses").write_text("ONNX Runtime's session id")
    assert report.tmp_leftovers(tmp_path) == ["leaked_onnx (2.0 MB)", "torchinductor_me (0.0 MB)"]
    assert report.tmp_leftovers(tmp_path, ())[0].startswith(".ses")
    assert report.tmp_leftovers(tmp_path, (*report.KNOWN_TMP_FILES, "torchinductor_*")) == ["leaked_onnx (2.0 MB)"]
    assert report.main(["check-tmp", str(tmp_path), "--allow", "torchinductor_*"]) == 1
    assert "leaked_onnx" in capsys.readouterr().out
    (tmp_path / "leaked_onnx" / "model.onnx").unlink()
    (tmp_path / "leaked_onnx").rmdir()
    assert report.main(["check-tmp", str(tmp_path), "--allow", "torchinductor_*"]) == 0
    assert "nothing left behind" in capsys.readouterr().out


def test_deploy_command_lines_leave_nothing_in_a_private_tmpdir(tmp_path, bad):
    private, work = tmp_path / "tmp", tmp_path / "work"
    private.mkdir(), work.mkdir()
    code = ("import sys; from helpers.deploy.__main__ import main\n"
            f"assert main(['export', {str(bad['good.pt'])!r}, {str(work / 'm.onnx')!r}, '--shape', '4']) == 0\n"
            f"assert main(['check', {str(work / 'm.onnx')!r}]) == 1\n"
            f"assert main(['build', {str(work / 'm.onnx')!r}]) == 0\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(private)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert report.tmp_leftovers(private) == []


# ---------- property-based: any command line with a bad part exits non-zero, in one line, no traceback ----------
# (--help and --debug are left out of the generated words: they are the two ways to ask for more than one line)

PROGRAMS = {"deploy": deploy_cli.main, "report": report.main, "notebooks": notebooks.main, "site": site.main,
            "suite_time": suite_time.main}
WORDS = ["export", "check", "build", "bench", "run", "check-names", "store-cpu", "check-tmp", "fmt", "--out",
         "--only", "--timeout", "--store", "--shape", "--batch", "--repeats", "--backend", "--rows", "--int8",
         "--calib", "--allow", "ort", "tensorrt", "1,32", "-5", "0", "3.5", "nan", "00_*", ""]
POISONS = ["--no-such-flag", "--timeout=-5", "--repeats=0", "--shape=0,x"]
token = st.one_of(st.sampled_from(WORDS), st.text(max_size=12).filter(
    lambda t: not t.startswith(("-h", "--h")) and t != cli.DEBUG_FLAG and "\x00" not in t))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=st.sampled_from(sorted(PROGRAMS)), words=st.lists(token, max_size=6),
       poison=st.sampled_from(POISONS), where=st.integers(0, 6))
def test_property_a_poisoned_command_line_always_fails_cleanly(program, words, poison, where, untouchable_module):
    argv = words[:where] + [poison] + words[where:]
    rc, _, err = _run(PROGRAMS[program], argv)
    assert rc == 2, (argv, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and err.startswith("error: "), (argv, err)


BAD_FILES = ["missing.onnx", "empty.onnx", "trunc.onnx", "text.onnx", "dir.onnx", "empty.pt", "trunc.pt",
             "weights.pt", "trunc.jsonl", "text.jsonl", "empty.ipynb", "trunc.ipynb", "list.ipynb", "notes.txt"]
VERBS = {"deploy": [["check"], ["check", "--rows"], ["build"], ["bench", "--batch", "1,2", "--repeats", "1"],
                    ["export", "--shape", "4", "--int8"]],
         "report": [["check-names"], ["store-cpu"]], "notebooks": [["fmt"], ["check"]]}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=st.sampled_from(sorted(VERBS)), pick=st.integers(0, 4), files=st.lists(
    st.sampled_from(BAD_FILES), min_size=1, max_size=2, unique=True))
def test_property_a_bad_file_always_fails_cleanly(program, pick, files, bad, untouchable_module):
    verb = VERBS[program][pick % len(VERBS[program])]
    paths = [str(bad[f]) for f in files]
    if verb[0] == "export":
        argv = ["export", paths[0], str(bad["root"] / "out.onnx"), *verb[1:]]
    elif verb[0] == "store-cpu":
        argv = ["store-cpu", paths[0], paths[-1]]
    else:
        argv = [verb[0], *paths[: 1 if program != "notebooks" else 2], *verb[1:]]
    rc, _, err = _run(PROGRAMS[program], argv)
    assert rc == 2, (argv, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and err.startswith("error: "), (argv, err)


@pytest.fixture(scope="module")
def untouchable_module(tmp_path_factory):
    """The `untouchable` guards for module-scoped (hypothesis) tests."""
    mp = pytest.MonkeyPatch()

    def never(*a, **k):
        raise AssertionError("a bad command line must not run notebooks")
    mp.setattr(report, "execute_all", never)
    mp.setattr(report, "REFERENCE_DIR", tmp_path_factory.mktemp("reference"))
    yield
    mp.undo()
