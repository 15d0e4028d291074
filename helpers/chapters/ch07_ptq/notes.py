"""What the lecture notes say about post-training quantization with pytorch-quantization, registered in
the course's claims registry and judged by what the library does when their recipe is run.

Serves: chapter 7.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values


def standalone_calibrator_amax() -> float | None:
    """Run the notes' recipe: a MaxCalibrator built on its own, the model run, then compute_amax()."""
    from helpers.plugins.pq_compat import pq

    calib = pq().calib.MaxCalibrator(num_bits=8, axis=(0,), unsigned=False)
    amax = calib.compute_amax()  # nothing ever called calib.collect(): the model's layers do not know it
    return None if amax is None else float(amax.max())


def _recipe(m: Values) -> tuple[str, str]:
    got = m.get("ch07.notes_calibrator_has_amax")
    if got is None:
        return "pytorch-quantization was not run here", NOT_MEASURED
    what = "returned an amax" if got else "returned None: the calibrator never saw a tensor"
    return (f"a MaxCalibrator created on its own, with the model run over calibration data, {what}. In "
            "pytorch-quantization every layer's TensorQuantizer owns its calibrator: enable calibration on the "
            "quantizers, run the data, then load_calib_amax() (helpers.model_quant.ptq.calibrate). And "
            "torch.save(state_dict) stores PyTorch tensors, not a deployable model: TensorRT reads an ONNX "
            "graph with Q/DQ nodes (chapter 9)"), FAILS if not got else HOLDS


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch07.ptq_recipe", 7, "notes 3 §3.1",
        "PTQ: create MaxCalibrator(num_bits=8, axis=(0,)), run the model over the calibration data, call "
        "calibrator.compute_amax(), then export with torch.save(model.state_dict()).",
        "训练后量化：创建 MaxCalibrator(num_bits=8, axis=(0,))，用校准数据运行模型后调用 calibrator.compute_amax()，"
        "再用 torch.save(model.state_dict()) 导出模型。",
        _recipe, "pytorch-quantization 2.1.3, run here (helpers.chapters.ch07_ptq.notes.standalone_calibrator_amax)",
        ("ch07.notes_calibrator_has_amax",),
        baseline="pytorch-quantization's own PTQ flow (quantizers' calibrators, load_calib_amax, ONNX export)",
        summary_zh=lambda m: ("尚未运行 pytorch-quantization" if m.get("ch07.notes_calibrator_has_amax") is None else
                              "单独创建的 MaxCalibrator " + ("得到了 amax" if m.get("ch07.notes_calibrator_has_amax")
                                                          else "返回 None：它从未见过任何张量")
                              + "；校准器属于各层的 TensorQuantizer，torch.save 保存的也不是可部署的模型")),
)
registry.register(*CLAIMS)
