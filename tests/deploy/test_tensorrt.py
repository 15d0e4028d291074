"""Chapter 9: the TensorRT-family backend (TensorRT or TensorRT-RTX) and the chapter's TensorRT-RTX builds.

Most tests drive the shared code path through a fake module that satisfies
helpers.plugins.trt_protocol.TrtModule (no TensorRT needed); the last ones use a real TensorRT
or TensorRT-RTX module where one is importable (TensorRT-RTX builds even without a GPU).
"""

from __future__ import annotations

import ctypes
import json
import types
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnx
import pytest
import torch
from tests.support.tiny_models import tiny_cnn, tiny_inputs
from helpers.figure_check import figure_problems

from helpers import bench
from helpers.chapters.ch09_deployment import trt_rtx, trt_rtx_view
from helpers.plugins import trt_family, trt_layers
from helpers.deploy.export import export_fp16, export_onnx, export_qdq
from helpers.deploy.qdq_model import fake_quant_copy
from helpers.deploy.tensorrt_backend import TensorRTBackend, build, build_engine, parser_report
from helpers.plugins.trt_protocol import MEMBERS
from helpers.errors import InputError, MissingPackageError

LAYER_TYPES = {
    "Conv": "CONVOLUTION",
    "Gemm": "MATRIX_MULTIPLY",
    "Relu": "ACTIVATION",
    "QuantizeLinear": "QUANTIZE",
    "DequantizeLinear": "DEQUANTIZE",
}
DTYPES = {1: "FLOAT", 10: "HALF"}
RTX_LINE = (
    "Name: /0/Conv_myl0_2, LayerType: correlation, Inputs: [ {{ Name: a, Datatype: {dt}, Format: x }}], "
    "Constants: [ {{ Name: w, Datatype: Int8 }}], Outputs: [ {{ Name: b, Datatype: Float }}], TacticName: t"
)


def fake_module(runtime_ok: bool = False) -> types.SimpleNamespace:
    """A TensorRT-shaped module: parses ONNX with onnx, 'builds' a JSON engine, runs it on raw pointers."""
    calls: dict = {"profiles": [], "flags": [], "timing_cache": 0, "inputs_seen": []}

    class ILogger:
        def __init__(self):
            pass

    class Tensor:
        def __init__(self, name, shape, dtype):
            self.name, self.shape, self.dtype = name, shape, dtype

    class Layer:
        def __init__(self, node):
            self.name, self.type, self.num_outputs = (
                node.name,
                LAYER_TYPES.get(node.op_type, "OTHER"),
                1,
            )

    class Network:
        def __init__(self, flags):
            calls["flags"].append(flags)
            self.inputs, self.layers, self.outputs = [], [], []
            self.num_inputs = self.num_layers = 0

        get_input = lambda self, i: self.inputs[i]  # noqa: E731
        get_layer = lambda self, i: self.layers[i]  # noqa: E731

    class Parser:
        def __init__(self, network, logger):
            self.net, self.logger, self.errors = network, logger, []

        def parse_from_file(self, path):
            g = onnx.load(path).graph
            for n in g.node:
                if n.op_type == "Bogus":
                    self.errors.append(
                        types.SimpleNamespace(
                            desc=lambda: "No importer registered for op: Bogus",
                            node_name=lambda n=n: n.name,
                        )
                    )
            if any(n.op_type == "QuantizeLinear" for n in g.node):
                self.logger.log("WARNING", "fake parser: explicit quantization (Q/DQ) found")
            if self.errors:
                return False
            for v in g.input:
                t = v.type.tensor_type
                shape = tuple(d.dim_value if d.dim_value else -1 for d in t.shape.dim)
                self.net.inputs.append(Tensor(v.name, shape, DTYPES[t.elem_type]))
            out = g.output[0].type.tensor_type
            self.net.outputs.append(
                (g.output[0].name, out.shape.dim[1].dim_value, DTYPES[out.elem_type])
            )
            self.net.layers = [Layer(n) for n in g.node]
            self.net.num_inputs, self.net.num_layers = len(self.net.inputs), len(self.net.layers)
            return True

        num_errors = property(lambda self: len(self.errors))
        get_error = lambda self, i: self.errors[i]  # noqa: E731

    class Config:
        profiling_verbosity = None

        def __init__(self):
            self.profiles, self.pool = [], None

        def add_optimization_profile(self, p):
            self.profiles.append(p)
            return 0

        def set_memory_pool_limit(self, pool, size):
            self.pool = (pool, size)

        def create_timing_cache(self, data):
            calls["timing_cache"] += 1
            return data

        set_timing_cache = lambda self, cache, ignore: True  # noqa: E731
        get_timing_cache = lambda self: types.SimpleNamespace(serialize=lambda: b"cache")  # noqa: E731

    class Profile:
        def set_shape(self, name, lo, opt, hi):
            calls["profiles"].append((name, tuple(lo), tuple(opt), tuple(hi)))

    class Builder:
        def __init__(self, logger):
            self.logger = logger

        create_network = lambda self, flags=0: Network(flags)  # noqa: E731
        create_builder_config = lambda self: Config()  # noqa: E731
        create_optimization_profile = lambda self: Profile()  # noqa: E731

        def build_serialized_network(self, net, config):
            assert (
                config.profiles
                and config.profiling_verbosity == "DETAILED"
                and config.pool[0] == "WORKSPACE"
            )
            int8 = any(layer.type == "QUANTIZE" for layer in net.layers)
            self.logger.log(
                "VERBOSE", "Layers:\n" + RTX_LINE.format(dt="Int8" if int8 else "Float")
            )
            inp = net.inputs[0]
            return bytearray(
                b"FAKE"
                + json.dumps(
                    {"input": [inp.name, list(inp.shape), inp.dtype], "output": net.outputs[0]}
                ).encode()
            )

    class Context:
        def __init__(self, spec):
            self.spec, self.addr, self.batch = spec, {}, None

        def set_input_shape(self, name, shape):
            ok = (
                name == self.spec["input"][0]
                and list(shape[1:]) == self.spec["input"][1][1:]
                and shape[0] <= 32
            )
            self.batch = shape[0] if ok else None
            return ok

        def set_tensor_address(self, name, ptr):
            self.addr[name] = ptr
            return True

        get_tensor_shape = lambda self, name: (self.batch, self.spec["output"][1])  # noqa: E731

        def execute_async_v3(self, stream):
            (iname, ishape, idt), (oname, n_out, odt) = self.spec["input"], self.spec["output"]
            shape = (self.batch, *ishape[1:])
            x = _view(self.addr[iname], shape, NPTYPE[idt])
            calls["inputs_seen"].append(x.dtype)
            y = _view(self.addr[oname], (self.batch, n_out), NPTYPE[odt])
            y[:] = x.reshape(self.batch, -1).astype(np.float64).sum(1, keepdims=True) + np.arange(
                n_out
            )
            return True

    class Engine:
        def __init__(self, spec):
            self.spec, self.num_io_tensors = spec, 2

        get_tensor_name = lambda self, i: [self.spec["input"][0], self.spec["output"][0]][i]  # noqa: E731
        get_tensor_mode = lambda self, n: "INPUT" if n == self.spec["input"][0] else "OUTPUT"  # noqa: E731
        get_tensor_shape = lambda self, n: tuple(self.spec["input"][1])  # noqa: E731
        def get_tensor_profile_shape(self, name, index):
            return [(b, *self.spec["input"][1][1:]) for b in (1, 8, 32)]

        def get_tensor_dtype(self, name):
            return self.spec["input"][2] if name == self.spec["input"][0] else self.spec["output"][2]
        create_execution_context = lambda self: Context(self.spec)  # noqa: E731
        create_engine_inspector = lambda self: types.SimpleNamespace(  # noqa: E731
            get_engine_information=lambda fmt: json.dumps(
                {
                    "Layers": [
                        {
                            "Name": "conv",
                            "LayerType": "CaskConvolution",
                            "Inputs": [{"Format/Datatype": "Channel major INT8 format"}],
                        }
                    ]
                }
            )
        )

    class Runtime:
        def __init__(self, logger):
            self.logger = logger

        def deserialize_cuda_engine(self, data):
            if not runtime_ok:
                self.logger.log("ERROR", "fake runtime: this compute capability is not supported")
                return None
            return Engine(json.loads(bytes(data)[4:]))

        get_engine_validity = lambda self, data: ("INVALID", 2)  # noqa: E731

    enum = types.SimpleNamespace
    return types.SimpleNamespace(
        __version__="0.fake",
        calls=calls,
        ILogger=ILogger,
        Logger=ILogger,
        Builder=Builder,
        OnnxParser=Parser,
        Runtime=Runtime,
        Dims=tuple,
        NetworkDefinitionCreationFlag=enum(STRONGLY_TYPED=0),
        MemoryPoolType=enum(WORKSPACE="WORKSPACE"),
        ProfilingVerbosity=enum(DETAILED="DETAILED"),
        TensorIOMode=enum(INPUT="INPUT", OUTPUT="OUTPUT"),
        LayerInformationFormat=enum(JSON="JSON"),
        nptype=lambda dt: NPTYPE[dt],
        ComputeCapability=enum(__members__={"NONE": 0, "SM86": 1, "SM120": 2}),
        EngineInvalidityDiagnostics=enum(__members__={"VERSION_MISMATCH": 1, "UNSUPPORTED_CC": 2}),
    )


NPTYPE = {"FLOAT": np.float32, "HALF": np.float16}


def _view(ptr: int, shape: tuple, dtype: type) -> np.ndarray:
    """A numpy array over raw memory (what a real engine reads and writes)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer((ctypes.c_char * n).from_address(ptr), dtype=dtype).reshape(shape)


def family(runtime_ok: bool = False, key: str = trt_family.TENSORRT_RTX) -> trt_family.Family:
    """The fake module as a TensorRT-family member."""
    return trt_family.Family(key, "fake_trt", fake_module(runtime_ok))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    """The tiny CNN as FP32, FP16 and Q/DQ INT8 ONNX (the course's export code)."""
    d = tmp_path_factory.mktemp("ch09trt")
    m, x = tiny_cnn(), tiny_inputs(64)
    return {
        "fp32": export_onnx(m, x[:1], d / "fp32.onnx"),
        "fp16": export_fp16(m, x[:1], d / "fp16.onnx"),
        "int8": export_qdq(fake_quant_copy(m, [x]), x[:1], d / "int8.onnx"),
    }


def test_build_uses_a_strongly_typed_network_and_a_dynamic_batch_profile(exports, tmp_path):
    fam = family()
    rep = build(
        exports["int8"], tmp_path / "e.engine", family=fam, min_batch=1, opt_batch=8, max_batch=32
    )
    calls = fam.module.calls
    assert (
        rep.built
        and rep.engine == tmp_path / "e.engine"
        and rep.engine.read_bytes().startswith(b"FAKE")
    )
    assert calls["flags"] == [1] and calls["profiles"] == [
        ("input", (1, 1, 12, 12), (8, 1, 12, 12), (32, 1, 12, 12))
    ]
    assert (
        rep.network_types["QUANTIZE"] >= 2
        and rep.int8_layers == 1
        and rep.parser_messages[0].startswith("WARNING")
    )
    assert calls["timing_cache"] == 0  # TensorRT-RTX: no timing cache
    full = family(key=trt_family.TENSORRT)
    build_engine(
        exports["fp32"], tmp_path / "f.engine", family=full, timing_cache=tmp_path / "t.cache"
    )
    assert (
        full.module.calls["timing_cache"] == 1 and (tmp_path / "t.cache").read_bytes() == b"cache"
    )
    with pytest.raises(InputError, match="min_batch"):
        build(exports["fp32"], family=fam, min_batch=4, opt_batch=2)


def test_parser_rejection_is_reported_with_the_node(tmp_path, monkeypatch):
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Bogus", ["x"], ["y"], name="weird_node")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    bad = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g), str(bad))
    fam = family()
    rep = build(bad, family=fam)
    assert not rep.parsed and not rep.built and any("weird_node" in m for m in rep.parser_messages)
    with pytest.raises(InputError, match="rejected .*weird_node"):
        build_engine(bad, tmp_path / "bad.engine", family=fam)
    monkeypatch.setattr(trt_family, "find", lambda prefer=None: fam)
    lines = parser_report(bad)
    assert lines is not None and "REJECTED" in lines[0] and "1 error(s)" in lines[0]
    monkeypatch.setattr(trt_family, "find", lambda prefer=None: None)
    assert parser_report(bad) is None


def test_runtime_refusal_is_reported_in_its_own_words(exports, tmp_path):
    fam = family(runtime_ok=False)
    engine = build_engine(exports["fp32"], tmp_path / "e.engine", family=fam)
    with pytest.raises(
        InputError, match=r"compute capability is not supported .*INVALID: UNSUPPORTED_CC.*RTX"
    ):
        TensorRTBackend(engine, "fp32", family=fam)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_engine_runs_with_explicit_io_tensors(exports, tmp_path, precision):
    fam = family(runtime_ok=True)
    be = TensorRTBackend(
        build_engine(exports[precision], tmp_path / "e.engine", family=fam), precision, family=fam
    )
    x = tiny_inputs(70).numpy()  # more than the profile's largest batch (32): run in chunks
    want = x.reshape(70, -1).astype(be.input_dtype).astype(np.float64).sum(
        1, keepdims=True
    ) + np.arange(10)
    got = be.run(x)
    assert got.shape == (70, 10) and np.allclose(got, want.astype(be.input_dtype), rtol=1e-3)
    assert fam.module.calls["inputs_seen"][-1] == np.dtype(
        NPTYPE["HALF" if precision == "fp16" else "FLOAT"]
    )
    assert be.layers() == [{"name": "conv", "type": "CaskConvolution", "precision": "int8"}]
    assert be.describe()["provider"] == fam.label
    with pytest.raises(InputError, match=r"shape \(batch, 1, 12, 12\)"):
        be.run(np.zeros((2, 1, 8, 8), np.float32))


def test_family_choice_and_guards(monkeypatch):
    real = {
        "tensorrt": types.SimpleNamespace(__version__="10.13"),  # stubs only: no Builder
        "tensorrt_rtx": fake_module(),
    }
    monkeypatch.setattr(  # helpers.plugins.present's contract: None unless every attribute in `needs` is there
        trt_family,
        "present",
        lambda name, needs=(): real[name] if name in real and all(hasattr(real[name], n) for n in needs) else None,
    )
    trt_family.families.cache_clear()
    try:
        fams = trt_family.families()
        assert [f.key for f in fams] == ["tensorrt_rtx"] and fams[0].import_name == "tensorrt_rtx"
        assert "TensorRT-RTX 0.fake (tensorrt_rtx)" in trt_family.describe()
        with pytest.raises(MissingPackageError, match="pip install tensorrt"):
            trt_family.require(trt_family.TENSORRT)
    finally:
        trt_family.families.cache_clear()
    rtx, full = family(), family(key=trt_family.TENSORRT)
    assert (
        trt_family.runs_on(rtx, (8, 6))
        and trt_family.runs_on(rtx, (12, 0))
        and not trt_family.runs_on(rtx, (9, 0))
    )
    assert trt_family.runs_on(full, (9, 0))


def test_layer_information_from_the_log_and_the_inspector():
    log = [
        "Layers:\n"
        + RTX_LINE.format(dt="Int8")
        + "\nName: q, LayerType: kgen, Inputs: [ { Datatype: Half }], "
        "Constants: [], Outputs: [ { Datatype: Int8 }], TacticName: k\n"
        "Name: s, LayerType: shape_call, Inputs: [], Constants: [], Outputs: [], TacticName: "
    ]
    layers = trt_layers.layers_from_log(log)
    assert [d["precision"] for d in layers] == ["int8", "fp16", ""] and layers[0][
        "type"
    ] == "correlation"
    assert trt_layers.int8_layers(layers) == 1 and trt_layers.summary(layers)["kgen fp16"] == 1
    info = json.dumps(
        {
            "Layers": [
                "only_a_name",
                {
                    "Name": "c",
                    "LayerType": "CaskGemm",
                    "Inputs": [{"Format/Datatype": "Row major linear FP16 format"}],
                },
            ]
        }
    )
    assert [d["precision"] for d in trt_layers.layers_from_inspector(info)] == ["", "fp16"]


def test_run_builds_records_and_shows_what_ran(tmp_path, monkeypatch, capsys):
    from helpers import reference

    x = tiny_inputs(64)
    spec = trt_rtx.ModelSpec(
        "resnet50", tiny_cnn, x[:1], [x]
    )  # named as the headline model, tiny inside
    start = len(bench.session_records())
    rows = trt_rtx.run_builds(tmp_path, [spec], family=family(runtime_ok=False))
    recs = bench.session_records()[start:]
    assert [(r["precision"], r["built"], r["runs"]) for r in rows] == [
        (p, True, False) for p in ("fp32", "fp16", "int8")
    ]
    names = {r.name for r in recs}
    assert {f"ch09.trt_rtx.resnet50.int8.{f}" for f in trt_rtx_view.FIELDS} <= names
    head = next(r for r in recs if r.name == trt_rtx.HEADLINE)
    assert head.value == pytest.approx(rows[2]["engine_mb"] / rows[0]["engine_mb"])
    assert (
        "compute capability is not supported"
        in next(r for r in recs if r.name.endswith("int8.runs")).extra["error"]
    )
    assert trt_rtx_view.table_rows(trt_rtx.results_from_records(recs)) == trt_rtx_view.table_rows(
        rows
    )
    monkeypatch.setattr(reference, "lookup_all", lambda prefix, source="h200": [])
    trt_rtx.show(None)
    assert "not stored yet" in capsys.readouterr().out
    monkeypatch.setattr(
        reference,
        "lookup_all",
        lambda prefix, source="h200": [r for r in recs if r.name.startswith(prefix)],
    )
    trt_rtx.show(None)
    assert figure_problems(plt.gcf()) == []
    plt.close("all")
    out = capsys.readouterr().out
    assert "(stored reference)" in out and "What did not run" in out and "not supported" in out
    assert "pip install tensorrt-rtx" in out and "Full TensorRT" in out
    monkeypatch.setattr(trt_rtx, "run_builds", lambda work: rows)  # the GPU run's command line
    assert trt_rtx.main(["--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "trt_rtx.json").read_text())[2]["int8_layers"] == 1
    plt.close("all")

    def missing(work):
        raise MissingPackageError("tensorrt-rtx", "pip install tensorrt-rtx")

    monkeypatch.setattr(trt_rtx, "run_builds", missing)
    assert trt_rtx.main(["--out", str(tmp_path / "out")]) == 2


def test_run_builds_times_engines_where_the_runtime_works(tmp_path):
    x, y = tiny_inputs(64), torch.arange(64) % 10
    spec = trt_rtx.ModelSpec("tiny", tiny_cnn, x[:1], [x], (x, y))
    rows = trt_rtx.run_builds(tmp_path, [spec], family=family(runtime_ok=True), bench_repeats=2)
    assert all(r["runs"] for r in rows)
    timed = {(b["backend"], b["batch"]) for b in rows[-1]["bench"]}
    assert {
        ("TensorRT-RTX int8", 32),
        ("ORT FP32", 1),
        ("PyTorch INT8 (torch._int_mm)", 32),
    } <= timed


# ---- a real TensorRT-family module, where one is importable ------------------------------------


def _real_families() -> list[trt_family.Family]:
    return list(trt_family.families())


@pytest.mark.parametrize("fam", _real_families() or [None], ids=lambda f: f.key if f else "none")
def test_real_module_has_every_protocol_member(fam):
    if fam is None:
        pytest.skip("no TensorRT or TensorRT-RTX here (pip install tensorrt-rtx)")
    missing = [
        f"{cls}.{m}"
        for cls, members in MEMBERS.items()
        for m in members
        if not hasattr(fam.module if cls == "module" else getattr(fam.module, cls), m)
    ]
    assert not missing, f"{fam.label} lacks {missing}"


@pytest.mark.parametrize("fam", _real_families() or [None], ids=lambda f: f.key if f else "none")
def test_real_builder_builds_a_tiny_qdq_engine(fam, exports, tmp_path):
    from helpers.device import has_gpu

    if fam is None:
        pytest.skip("no TensorRT or TensorRT-RTX here (pip install tensorrt-rtx)")
    if not fam.is_rtx and not has_gpu():
        pytest.skip("full TensorRT's builder needs a GPU")
    int8 = build(exports["int8"], tmp_path / "int8.engine", family=fam, opt_batch=8, max_batch=32)
    fp32 = build(exports["fp32"], tmp_path / "fp32.engine", family=fam, opt_batch=8, max_batch=32)
    assert int8.built and fp32.built and int8.engine_mb > 0, int8.error or fp32.error
    assert int8.network_types.get("QUANTIZE", 0) >= 2 and "QUANTIZE" not in fp32.network_types
    if fam.is_rtx:  # its build log names each engine layer's input type
        assert int8.int8_layers >= 2 and fp32.int8_layers == 0, trt_layers.summary(
            int8.engine_layers
        )
    report = parser_report(exports["int8"])
    assert report is not None and "parsed" in report[0]
