"""FP32 and Q/DQ INT8 ONNX export: TorchScript exporter (dynamo=False), opset 17, dynamic batch.

Q/DQ models come from two places, and both export the same way:
- ``helpers.deploy.qdq_model.insert_qdq`` (scales from the chapter 5 calibrators, or ours);
- pytorch-quantization models (chapters 7-8), exported inside ``pq_compat.export_mode()`` (it sets
  ``TensorQuantizer.use_fb_fake_quant = True``) so that
  TensorQuantizer emits QuantizeLinear/DequantizeLinear instead of silent Round/Clip.
Every Q/DQ export is checked afterwards: no Q/DQ node, no file.

Serves: core — used by chapters 9–12 and labs 08, 09.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from pathlib import Path

import torch
from torch import nn

from helpers.errors import InputError
from helpers.validation import require_array, require_int_range

OPSET = 17
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


def export_onnx(
    model: nn.Module,
    example: torch.Tensor,
    path: str | os.PathLike,
    *,
    input_name: str = "input",
    output_name: str = "logits",
    opset: int = OPSET,
    dynamic_batch: bool = True,
) -> Path:
    """Export `model` (traced on `example`) to ONNX with a dynamic batch axis; return the path."""
    if not isinstance(model, nn.Module):
        raise InputError(f"export_onnx needs a torch.nn.Module, got {type(model).__name__}.")
    require_array(example, "example")
    require_int_range(opset, 13, 21, "opset")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    axes = {input_name: {0: "batch"}, output_name: {0: "batch"}} if dynamic_batch else None
    was_training = model.training
    model.eval()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                (example,),
                str(path),
                dynamo=False,
                opset_version=opset,
                input_names=[input_name],
                output_names=[output_name],
                dynamic_axes=axes,
                do_constant_folding=True,
            )
    finally:
        model.train(was_training)
    _unshare_initializers(path)
    return path


def _unshare_initializers(path: Path) -> None:
    """Replace `Identity(initializer)` nodes by copies of the initializer, in place.

    The exporter merges identical weights (e.g. the all-zero biases of freshly folded
    BatchNorms) into one tensor read through Identity nodes; ONNX Runtime's quantizer then
    expects an initializer, finds an Identity, and leaves those convolutions in float.
    """
    import onnx

    model = onnx.load(str(path))
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    keep = []
    for n in g.node:
        if n.op_type == "Identity" and n.input[0] in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[n.input[0]])
            copy.name = n.output[0]
            g.initializer.append(copy)
        else:
            keep.append(n)
    if len(keep) != len(g.node):
        del g.node[:]
        g.node.extend(keep)
        onnx.save(model, str(path))


def _undefined_inputs(graph) -> list[str]:
    """Tensors a node reads that no graph input, initializer or earlier node provides (a cut-off file)."""
    known = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    known.update(o for n in graph.node for o in n.output)
    return [i for n in graph.node for i in n.input if i not in known]


def load_onnx(path: str | os.PathLike):
    """Read an ONNX file; InputError naming the problem when it is missing, a folder, empty, cut off or not ONNX."""
    import onnx

    p = Path(path)
    again = "Export it again: python -m helpers.deploy export MODEL OUT.onnx --shape ..."
    if p.is_dir():
        raise InputError(f"{p} is a folder, not an ONNX file. Pass the .onnx file itself.")
    if not p.is_file():
        raise InputError(f"{p} does not exist. {again}")
    if p.stat().st_size == 0:
        raise InputError(f"{p} is empty (0 bytes): the export did not finish. {again}")
    try:
        model = onnx.load(str(p))
    except Exception as exc:  # noqa: BLE001 - protobuf raises several kinds for a file that is not ONNX
        raise InputError(f"{p} is not a readable ONNX model ({type(exc).__name__}: {str(exc)[:120]}); "
                         f"it is cut off or another kind of file. {again}") from None
    g = model.graph
    if not g.node or not g.input or not g.output:
        raise InputError(f"{p} holds no ONNX graph (nodes {len(g.node)}, inputs {len(g.input)}, outputs "
                         f"{len(g.output)}): it is cut off or not an ONNX model. {again}")
    missing = _undefined_inputs(g)
    if missing:
        raise InputError(f"{p} is incomplete: {len(missing)} tensor(s) are read but never defined (e.g. "
                         f"{missing[0]!r}); the file is cut off or was edited by hand. {again}")
    return model


def op_counts(path: str | os.PathLike) -> Counter:
    """How many nodes of each op type an ONNX file holds."""
    return Counter(n.op_type for n in load_onnx(path).graph.node)


def require_qdq(path: str | os.PathLike) -> Counter:
    """Raise InputError unless the ONNX file has QuantizeLinear and DequantizeLinear nodes."""
    counts = op_counts(path)
    if not all(counts.get(op, 0) for op in QDQ_OPS):
        raise InputError(
            f"{path} has no QuantizeLinear/DequantizeLinear nodes (ops: {dict(counts)}). "
            "A pytorch-quantization model must be exported inside helpers.plugins.pq_compat.export_mode() "
            "(use_fb_fake_quant=True), "
            "otherwise the quantizers become Round/Clip; a plain model needs insert_qdq() first."
        )
    return counts


def export_qdq(model: nn.Module, example: torch.Tensor, path: str | os.PathLike, **kwargs) -> Path:
    """Export a fake-quantized model (insert_qdq or pytorch-quantization) as Q/DQ ONNX, checked."""
    if any(type(m).__module__.startswith("pytorch_quantization") for m in model.modules()):
        from helpers.plugins.pq_compat import export_mode

        with export_mode():  # TensorQuantizer.use_fb_fake_quant = True: Q/DQ, not Round/Clip
            out = export_onnx(model, example, path, **kwargs)
    else:
        out = export_onnx(model, example, path, **kwargs)
    require_qdq(out)
    return out


def export_fp16(model: nn.Module, example: torch.Tensor, path: str | os.PathLike, **kwargs) -> Path:
    """Export a half-precision copy (what TensorRT's strongly typed networks need for FP16)."""
    import copy

    half = copy.deepcopy(model).half()
    return export_onnx(half, example.half(), path, **kwargs)


def file_mb(path: str | os.PathLike) -> float:
    """Size of a file on disk in MB (1e6 bytes)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p} does not exist. Export the model first.")
    return p.stat().st_size / 1e6
