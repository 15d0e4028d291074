"""Chapter 9: Q/DQ export and the Q/DQ validator."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from ch09_models import tiny_cnn, tiny_inputs
from onnx import TensorProto, helper, numpy_helper

from helpers.deploy.export import export_onnx, export_qdq, op_counts, require_qdq
from helpers.deploy.qdq_check import check_qdq
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
