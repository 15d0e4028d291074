"""helpers.model_quant.qat and lab 7: QAT recovers W4A4 accuracy; the lab's checks reject known-wrong answers."""

from __future__ import annotations

import pytest
import torch

from helpers.model_quant import ptq, qat
from helpers.errors import InputError
from helpers.grading import CheckFailed, check
from helpers.models.train import build_model, evaluate

pytest.importorskip("pytorch_quantization")
from tests.support.trained import data, resnet  # noqa: E402,F401  (fixtures)
from tests.support.grading import one_torch_thread  # noqa: E402,F401  (fixture)




def test_qat_recovers_what_w4a4_ptq_lost(resnet, data):
    fp32 = evaluate(resnet, data)
    q = ptq.ptq(resnet, data, method="mse", weight_bits=4, act_bits=4)
    before = evaluate(q, data)
    history = qat.qat(q, data, epochs=4, lr=1e-3, progress=False)
    after = evaluate(qat.freeze(q), data)
    assert fp32 - before > 3.0  # the lesson needs a visible PTQ loss
    assert after > before + 1.0
    assert [h["epoch"] for h in history] == [0, 1, 2, 3, 4] and all("val_acc" in h for h in history)
    assert history[-1]["lr"] < 1e-3 / 10  # cosine schedule decays to ~0
    r = qat.recovery(fp32, before, after)
    assert 0 < r["recovered %"] <= 100 + 1e-6 or after > fp32


def test_qat_seeds_trains_a_fresh_copy_per_seed_and_leaves_the_calibrated_model_alone(resnet, data):
    import copy

    calibrated = ptq.ptq(resnet, data, method="mse", weight_bits=4, act_bits=8)
    before = {k: v.clone() for k, v in calibrated.state_dict().items()}
    made = []

    def make():
        made.append(copy.deepcopy(calibrated))
        return made[-1]

    rows = qat.qat_seeds(make, data, (0, 1), epochs=1, lr=1e-3, progress=False)
    assert [r["seed"] for r in rows] == [0, 1] and len(made) == 2 and made[0] is not made[1]
    assert all(len(r["history"]) == 2 and 0 <= r["test_acc"] <= 100 for r in rows)
    assert not torch.equal(made[0].state_dict()["stem.0.weight"], made[1].state_dict()["stem.0.weight"])
    assert all(torch.equal(v, calibrated.state_dict()[k]) for k, v in before.items())


def test_exact_fp32_turns_tf32_off_inside_and_restores_it():
    old = torch.backends.cudnn.allow_tf32
    with qat.exact_fp32():
        assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cudnn.deterministic is True
    assert torch.backends.cudnn.allow_tf32 == old


def test_qat_validates_its_inputs(resnet, data):
    with pytest.raises(InputError, match="quantized"):
        qat.qat(resnet, data, epochs=1)
    q = ptq.ptq(build_model("resnet_small", data.input_shape, 10).eval(), data)
    with pytest.raises(InputError, match="Dataset"):
        qat.qat(q, data.train, epochs=1)
    with pytest.raises(InputError):
        qat.qat(q, data, epochs=0)


def _ste_ok(x, amax, bits):
    top = 2 ** (bits - 1) - 1
    x_c = torch.clamp(x, -amax, amax)
    q = torch.clamp(torch.round(x / (amax / top)), -top, top) * (amax / top)
    return x_c + (q - x_c).detach()


def _ste_no_gradient(x, amax, bits):
    top = 2 ** (bits - 1) - 1
    return torch.clamp(torch.round(x / (amax / top)), -top, top) * (amax / top)


def _ste_unclipped_gradient(x, amax, bits):
    return x + (_ste_no_gradient(x, amax, bits) - x).detach()


def _ste_wrong_scale(x, amax, bits):
    top = 2 ** bits - 1
    x_c = torch.clamp(x, -amax, amax)
    return x_c + (torch.clamp(torch.round(x / (amax / top)), -top, top) * (amax / top) - x_c).detach()


@pytest.mark.usefixtures("one_torch_thread")
def test_lab07_ste_check_accepts_the_solution_and_rejects_wrong_ones():
    check("lab07.ste_fake_quant", _ste_ok, plot=False)
    for wrong in (_ste_no_gradient, _ste_unclipped_gradient, _ste_wrong_scale):
        with pytest.raises(CheckFailed):
            check("lab07.ste_fake_quant", wrong, plot=False)


@pytest.mark.usefixtures("one_torch_thread")
def test_lab07_qat_check_rejects_a_loop_that_does_not_train(resnet):
    def no_training(qmodel, data, epochs, lr):
        return qmodel.eval()

    def wrong_sign(qmodel, data, epochs, lr):  # gradient ascent: maximizes the loss
        opt = torch.optim.AdamW(qmodel.parameters(), lr=lr)
        qmodel.train()
        for _ in range(epochs):
            for x, y in torch.utils.data.DataLoader(data.train, batch_size=128, shuffle=True):
                opt.zero_grad()
                (-torch.nn.functional.cross_entropy(qmodel(x), y)).backward()
                opt.step()
        return qmodel.eval()

    def other_style(qmodel, data, epochs, lr):  # correct, written differently: plain AdamW, batches of 64
        opt = torch.optim.AdamW(qmodel.parameters(), lr=lr)
        qmodel.train()
        for _ in range(epochs):
            for x, y in torch.utils.data.DataLoader(data.train, batch_size=64, shuffle=True):
                loss = torch.nn.functional.cross_entropy(qmodel(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        qmodel.eval()
        return qmodel

    for wrong in (no_training, wrong_sign):
        with pytest.raises(CheckFailed):
            check("lab07.qat_finetune", wrong, plot=False)
    assert check("lab07.qat_finetune", other_style, plot=False).passed


def test_chapter8_summary_follows_the_results():
    from helpers.chapters.ch08_qat import readings

    rows = [{"bits": "W4A8", "FP32 %": 98.8, "PTQ %": 96.9, "QAT % (median)": 98.8, "QAT % per seed": "98.7 / 98.8 / 98.2"},
            {"bits": "W4A4", "FP32 %": 98.8, "PTQ %": 91.7, "QAT % (median)": 94.7, "QAT % per seed": "94.7 / 94.1 / 95.0"}]
    text = readings.qat_summary(rows).splitlines()
    assert "W4A8: PTQ lost 1.9 points" in text[0] and "(nearly) all" in text[0] and "0.6 points" in text[0]
    assert "won back 42%" in text[1]
    flat = [{**rows[0], "PTQ %": 98.8}]
    assert "nothing to recover" in readings.qat_summary(flat)


def test_the_notes_qat_descriptor_does_not_exist():
    pytest.importorskip("pytorch_quantization")
    from helpers import claims
    from helpers.chapters.ch08_qat import notes

    assert notes.notes_api_exists() is False
    verdict = claims.judge(claims.get("ch08.qat_recipe"), {"ch08.notes_quantdesc_exists": 0.0,
                                                             "ch08.w4a8.qat_delta_pts": 0.0})
    assert verdict["verdict"] == claims.FAILS and "QuantDescriptor" in verdict["evidence"]
