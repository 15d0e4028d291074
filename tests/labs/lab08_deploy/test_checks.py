"""Lab 8: the checks accept the reference answers and reject the classic wrong ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers.grading import CheckFailed, check, get
from instructors.batch.labgen import lab_from_solution

ROOT = Path(__file__).resolve().parents[3]


def _spec(ex_id):
    """The exercise's own spec as a student function."""
    return get(ex_id).spec


@pytest.mark.parametrize(
    "ex_id", ["lab08.weight_scales", "lab08.qdq_rules", "lab08.agreement", "lab08.throughput"]
)
def test_reference_answers_pass(ex_id):
    assert check(ex_id, _spec(ex_id), plot=False).passed


WRONG = {
    "lab08.weight_scales": [
        lambda w: np.full(w.shape[0], np.abs(w).max() / 127, np.float32),  # per-tensor
        lambda w: np.abs(w.reshape(w.shape[0], -1)).max(axis=0)[: w.shape[0]] / 127,  # wrong axis
        lambda w: w.reshape(w.shape[0], -1).max(axis=1) / 127,  # forgot abs
        lambda w: np.abs(w.reshape(w.shape[0], -1)).max(axis=1) / 128,  # 128 levels
    ],
    "lab08.qdq_rules": [
        lambda zp, axis, weight, want: bool(np.all(np.asarray(zp) == 0)),  # accepts uint8/int32
        lambda zp, axis, weight, want: np.asarray(zp).dtype == np.int8,  # accepts a non-zero zero point
        lambda zp, axis, weight, want: np.asarray(zp).dtype == np.int8
        and bool(np.all(np.asarray(zp) == 0)),  # any axis
        lambda zp, axis, weight, want: np.asarray(zp).dtype == np.int8
        and bool(np.all(np.asarray(zp) == 0))
        and not (weight and np.asarray(zp).size > 1 and axis != 0),  # the old rule: axis 0 for every layer
        lambda zp, axis, weight, want: np.asarray(zp).dtype == np.int8
        and bool(np.all(np.asarray(zp) == 0))
        and not (weight and axis != want),  # judges per-tensor weights by their axis too
    ],
    "lab08.agreement": [
        lambda r, g: (
            float((g.argmax(-1) == np.arange(len(g)) % g.shape[1]).mean()),
            float(np.abs(r - g).max()),
        ),
        lambda r, g: (
            float((r.argmax(0) == g.argmax(0)).mean()),
            float(np.abs(r - g).max()),
        ),  # wrong axis
        lambda r, g: (
            float((r.argmax(-1) == g.argmax(-1)).mean()),
            float(np.abs(r - g).mean()),
        ),  # mean diff
        lambda r, g: (float((r.argmax(-1) == g.argmax(-1)).mean()), float((r - g).max())),  # no abs
    ],
    "lab08.throughput": [
        lambda b, lat: float(b / np.mean(lat)),
        lambda b, lat: float(1 / np.median(lat)),
        lambda b, lat: float(b / np.min(lat)),
    ],
}


@pytest.mark.parametrize("ex_id, i", [(k, i) for k, v in WRONG.items() for i in range(len(v))])
def test_wrong_answers_are_rejected(ex_id, i):
    with pytest.raises(CheckFailed):
        check(ex_id, WRONG[ex_id][i], plot=False)


def test_generated_lab_has_stubs_and_no_solutions_or_hidden_tests():
    sol = json.loads((ROOT / "solutions" / "lab08_deploy.ipynb").read_text())
    lab = json.loads((ROOT / "labs" / "lab08_deploy.ipynb").read_text())
    assert lab == lab_from_solution(sol)
    text = "".join("".join(c["source"]) for c in lab["cells"])
    assert "BEGIN SOLUTION" not in text and "HIDDEN" not in text
    assert text.count("raise NotImplementedError") == 4
    graded = [
        c["metadata"]["nbgrader"]["grade_id"]
        for c in sol["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade")
    ]
    assert set(graded) >= {
        "lab08-weight_scales",
        "lab08-qdq_rules",
        "lab08-agreement",
        "lab08-throughput",
    }


@pytest.mark.parametrize("op, w_shape, good_axis, kwargs", [
    ("ConvTranspose", (2, 4, 3, 3), 1, {}), ("Gemm", (4, 3), 0, {"trans_b": 1}), ("MatMul", (3, 4), 1, {}),
])
def test_the_labs_rule_is_the_validators_rule(op, w_shape, good_axis, kwargs):
    """On a per-channel weight read by each kind of layer, the answer key agrees with check_qdq, node by node."""
    from tests.deploy.test_export import _weight_graph

    from helpers.deploy.qdq_check import check_qdq, qdq_nodes

    for axis in (good_axis, 1 - good_axis):
        model = _weight_graph(op, w_shape, axis, **kwargs)
        lab = [_spec("lab08.qdq_rules")(n["zero_point"], n["axis"], n["weight"], n["expected_axis"])
               for n in qdq_nodes(model)]
        assert all(lab) == check_qdq(model).ok == (axis == good_axis), (op, axis, lab)
