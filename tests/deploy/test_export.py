"""Chapter 9: Q/DQ export and the Q/DQ validator."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from tests.support.tiny_models import tiny_cnn, tiny_inputs
from onnx import TensorProto, helper, numpy_helper

from helpers.deploy.export import export_onnx, export_qdq, op_counts, require_qdq
from helpers.deploy.qdq_check import check_qdq, qdq_nodes
from helpers.deploy.qdq_model import calibrate, fake_quant_copy, insert_qdq
from helpers.errors import InputError


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """FP32 and Q/DQ exports of the tiny CNN."""
    d = tmp_path_factory.mktemp("ch09")
    m, x = tiny_cnn(), tiny_inputs()
    fq = fake_quant_copy(m, [x[:32]])
    return {
        "model": m,
        "fq": fq,
        "x": x,
        "fp32": export_onnx(m, x[:1], d / "fp32.onnx"),
        "qdq": export_qdq(fq, x[:1], d / "qdq.onnx"),
    }


def test_fp32_export_has_dynamic_batch_and_opset17(exported):
    m = onnx.load(str(exported["fp32"]))
    assert m.opset_import[0].version == 17
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert "QuantizeLinear" not in op_counts(exported["fp32"])


def test_fp32_export_shares_no_weight_through_identity(exported):
    assert "Identity" not in op_counts(exported["fp32"])


def test_qdq_export_matches_fake_quant_model_in_ort(exported):
    import onnxruntime as ort

    s = ort.InferenceSession(str(exported["qdq"]), providers=["CPUExecutionProvider"])
    x = exported["x"]
    got = s.run(None, {"input": x.numpy()})[0]
    want = exported["fq"](x).detach().numpy()
    # Rounding ties can flip one quantization step (ORT and torch accumulate in different
    # orders), so logits agree to a small tolerance; top-1 agrees where the winner is clear.
    assert np.abs(got - want).mean() < 0.01 * np.abs(want).max()
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 0.005
    assert clear.sum() > 20 and (got.argmax(1) == want.argmax(1))[clear].all()


def test_qdq_export_passes_validator_with_every_layer_int8(exported):
    rep = check_qdq(exported["qdq"])
    assert rep.ok, rep.summary()
    assert rep.compute_layers == rep.int8_layers == 4
    assert rep.qdq_pairs == 8  # input + weight pair per layer
    assert rep.output_quantized == 0  # TensorRT style: no Q after a layer
    weights = [r for r in rep.rows if r["role"] == "weight"]
    assert weights and all(r["scales"] == "per-channel" for r in weights)


def test_require_qdq_rejects_a_float_export(exported):
    with pytest.raises(InputError, match="use_fb_fake_quant"):
        require_qdq(exported["fp32"])


def test_calibrate_max_is_the_largest_input_magnitude():
    m, x = tiny_cnn(), tiny_inputs()
    amax = calibrate(m, [x[:32], x[32:]])
    assert amax["0"] == pytest.approx(float(x.abs().max()))
    assert set(amax) == {"0", "3", "7", "9"}


def test_calibrate_and_insert_reject_bad_input():
    with pytest.raises(InputError, match="no batches"):
        calibrate(tiny_cnn(), [])
    with pytest.raises(InputError, match="does not have"):
        insert_qdq(tiny_cnn(), {"nope": 1.0})
    with pytest.raises(InputError, match="positive"):
        insert_qdq(tiny_cnn(), {"0": 0.0})
    with pytest.raises(InputError, match="NaN"):
        fake_quant_copy(tiny_cnn(), [torch.full((2, 1, 12, 12), float("nan"))])


def _qdq_graph(zp_dtype=TensorProto.INT8, zp_value=0, axis=0, scale_const=True, q_after=False):
    """A hand-built DQ(x) / DQ(w) -> Conv graph with one thing to get wrong at a time."""
    w = numpy_helper.from_array(np.ones((4, 2, 3, 3), np.int8), "w")
    ws = numpy_helper.from_array(np.full(4, 0.1, np.float32), "ws")
    wz = helper.make_tensor("wz", zp_dtype, [4], [zp_value] * 4)
    xs = numpy_helper.from_array(np.array(0.05, np.float32), "xs")
    xz = helper.make_tensor("xz", zp_dtype, [], [zp_value])
    nodes = [
        helper.make_node(
            "QuantizeLinear", ["x", "xs" if scale_const else "dyn", "xz"], ["xq"], name="qx"
        ),
        helper.make_node(
            "DequantizeLinear", ["xq", "xs" if scale_const else "dyn", "xz"], ["xd"], name="dqx"
        ),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="dqw", axis=axis),
        helper.make_node("Conv", ["xd", "wd"], ["y"], name="conv"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])]
    if not scale_const:
        nodes.insert(0, helper.make_node("ReduceMax", ["x"], ["dyn"], keepdims=0))
    if q_after:
        nodes.append(helper.make_node("QuantizeLinear", ["y", "xs", "xz"], ["yq"], name="qy"))
        nodes.append(helper.make_node("DequantizeLinear", ["yq", "xs", "xz"], ["yd"], name="dqy"))
    out = "yd" if q_after else "y"
    g = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        [w, ws, wz, xs, xz],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_validator_accepts_the_reference_pattern():
    assert check_qdq(_qdq_graph()).ok
    assert check_qdq(_qdq_graph(q_after=True)).output_quantized == 1


@pytest.mark.parametrize(
    "kwargs, problem",
    [
        ({"zp_dtype": TensorProto.UINT8}, "uint8"),
        ({"zp_value": 3}, "not 0"),
        ({"axis": 1}, "axis 1"),
        ({"scale_const": False}, "computed at run time"),
    ],
)
def test_validator_flags_each_rule(kwargs, problem):
    rep = check_qdq(_qdq_graph(**kwargs))
    assert not rep.ok
    assert any(problem in p for p in rep.problems), rep.problems


def test_validator_flags_a_layer_left_in_float(exported):
    rep = check_qdq(exported["fp32"])
    assert rep.int8_layers == 0 and not rep.ok
    assert "stays in float" in rep.summary()


def test_validator_missing_file_is_clear(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        check_qdq(tmp_path / "nope.onnx")


def test_pytorch_quantization_model_exports_qdq_that_passes_the_validator(tmp_path):
    pytest.importorskip("pytorch_quantization")
    from torch.utils.data import TensorDataset

    from helpers.model_quant.ptq import ptq

    m, x = tiny_cnn(), tiny_inputs()
    qm = ptq(m, TensorDataset(x, torch.zeros(len(x), dtype=torch.long)), method="max")
    path = export_qdq(qm, x[:1], tmp_path / "pq.onnx")
    rep = check_qdq(path)
    assert rep.int8_layers == rep.compute_layers == 4, rep.summary()
    assert not [
        p for p in rep.problems if "axis" in p or "uint8" in p or "not 0" in p
    ], rep.problems


def _weight_graph(op: str, w_shape: tuple[int, ...], axis: int, trans_b: int | None = None,
                  transpose: bool = False):
    """DQ(x) and a per-channel DQ(w) on `axis` feeding one `op` (optionally through a Transpose of w)."""
    w = numpy_helper.from_array(np.ones(w_shape, np.int8), "w")
    ws = numpy_helper.from_array(np.full(w_shape[axis], 0.1, np.float32), "ws")
    wz = numpy_helper.from_array(np.zeros(w_shape[axis], np.int8), "wz")
    xs = numpy_helper.from_array(np.array(0.05, np.float32), "xs")
    xz = numpy_helper.from_array(np.array(0, np.int8), "xz")
    x_shape = {"ConvTranspose": [1, w_shape[0], 5, 5], "Gemm": [1, w_shape[1 if trans_b else 0]],
               "MatMul": [1, w_shape[1] if transpose else w_shape[0]]}[op]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="dqw", axis=axis)]
    if transpose:
        nodes.append(helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]))
    attrs = {"transB": trans_b} if trans_b is not None else {}
    nodes.append(helper.make_node(op, ["xd", "wt" if transpose else "wd"], ["y"], name="layer", **attrs))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, ws, wz, xs, xz])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "op, w_shape, good_axis, kwargs",
    [
        ("ConvTranspose", (2, 4, 3, 3), 1, {}),  # [C_in, C_out, kH, kW]: output channels on axis 1
        ("Gemm", (4, 3), 0, {"trans_b": 1}),  # a Linear's weight [N, K]
        ("Gemm", (3, 4), 1, {"trans_b": 0}),  # [K, N]
        ("MatMul", (3, 4), 1, {}),  # a MatMul weight stored [K, N] is per column
        ("MatMul", (4, 3), 0, {"transpose": True}),  # [N, K] then Transpose: axis 0 before the transpose
    ],
)
def test_per_channel_axis_rule_follows_the_op_that_reads_the_weight(op, w_shape, good_axis, kwargs):
    assert check_qdq(_weight_graph(op, w_shape, good_axis, **kwargs)).ok
    rep = check_qdq(_weight_graph(op, w_shape, 1 - good_axis, **kwargs))
    assert not rep.ok
    assert any(f"axis {1 - good_axis}, but {op} layer reads its output channels on axis {good_axis}" in p
               for p in rep.problems), rep.problems
    nodes = [n for n in qdq_nodes(_weight_graph(op, w_shape, good_axis, **kwargs)) if n["weight"]]
    assert [(n["layer"], n["axis"], n["expected_axis"]) for n in nodes] == [(op, good_axis, good_axis)]


def _residual_graph(quantize_skip: bool):
    """relu(x) -> DQ/Conv, and Add(conv output, skip); the skip input optionally through Q/DQ."""
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.int8), "w")
    ws = numpy_helper.from_array(np.full(2, 0.1, np.float32), "ws")
    wz = numpy_helper.from_array(np.zeros(2, np.int8), "wz")
    s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["rd", "wd"], ["c"], name="conv"),
             helper.make_node("Add", ["c", "rd" if quantize_skip else "r"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, ws, wz, s, z])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_residual_add_without_quantized_skip_input_is_advice_with_the_reason():
    rep = check_qdq(_residual_graph(quantize_skip=False))
    assert rep.ok and rep.residual_adds == 1 and rep.residual_adds_quantized == 0
    assert len(rep.advice) == 1 and "skip-branch input comes from DequantizeLinear" in rep.advice[0]
    assert "see the advice above" in rep.summary()
    good = check_qdq(_residual_graph(quantize_skip=True))
    assert good.ok and not good.advice and good.residual_adds_quantized == 1


def test_residual_advice_on_the_course_resnet_export(tmp_path):
    from helpers.models.cnn import ResNetSmall

    torch.manual_seed(0)
    m, x = ResNetSmall(1, 10, 1).eval(), torch.randn(8, 1, 40)
    rep = check_qdq(export_qdq(fake_quant_copy(m, [x]), x[:1], tmp_path / "r.onnx"))
    assert rep.ok and rep.residual_adds >= 3 and len(rep.advice) == rep.residual_adds - rep.residual_adds_quantized


def test_a_graph_without_compute_layers_is_not_ok(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    rep = check_qdq(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert not rep.ok and "nothing INT8 could run" in rep.problems[0] and "OK" not in rep.summary()


@pytest.mark.parametrize("content, problem", [(b"", r"is empty \(0 bytes\)"), (b"not onnx at all", "ONNX"),
                                              (None, "is a folder")])
def test_validator_refuses_files_that_are_not_whole_onnx_models(tmp_path, exported, content, problem):
    p = tmp_path / "m.onnx"
    p.mkdir() if content is None else p.write_bytes(content)
    with pytest.raises(InputError, match=problem):
        check_qdq(p)
    cut = tmp_path / "cut.onnx"
    data = exported["qdq"].read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(InputError, match="Export it again"):
        check_qdq(cut)
