"""Deploy a model from a shell, as the chapter 9 notebook does.

    python -m helpers.deploy export MODEL OUT.onnx --shape 3,224,224 [--int8]
    python -m helpers.deploy check  MODEL.onnx [--rows]
    python -m helpers.deploy build  MODEL.onnx --backend ort|tensorrt [--out PATH]
    python -m helpers.deploy bench  MODEL.onnx [--backend ort|tensorrt] [--batch 1,32] [--input-name NAME]

MODEL for export: resnet18, resnet50, a name known to helpers.models.train.trained_model
(e.g. trained:cnn_mnist1d), or a file saved with torch.save(model).

Serves: core — chapter 9 and lab08 (`python -m helpers.deploy`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from helpers.errors import InputError, MissingPackageError, WorkbookError


def _shape(text: str) -> tuple[int, ...]:
    """'3,224,224' -> (3, 224, 224)."""
    try:
        dims = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"shape must be integers separated by commas, e.g. 3,224,224; got {text!r}"
        )
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"shape dimensions must be positive; got {text!r}")
    return dims


def _batches(text: str) -> list[int]:
    """'1,32' -> [1, 32]."""
    return list(_shape(text))


def load_model(spec: str):
    """A torch model from a name or a torch.save file."""
    import torch

    if spec in ("resnet18", "resnet50"):
        from helpers.models import resnet

        return getattr(resnet, spec)()
    if spec.startswith("trained:"):
        from helpers.models.train import trained_model

        return trained_model(spec.split(":", 1)[1], progress=False)
    path = Path(spec)
    if not path.is_file():
        raise InputError(
            f"no model file {path} (and it is not resnet18, resnet50 or trained:NAME). "
            "Save one with torch.save(model, path), or check the spelling."
        )
    return torch.load(path, weights_only=False, map_location="cpu")


def _calib(shape: tuple[int, ...], npy: str | None, n: int = 4, batch: int = 8) -> list[np.ndarray]:
    """Calibration batches: from a .npy file of samples, else random normal (printed as such)."""
    if npy:
        p = Path(npy)
        if not p.is_file():
            raise InputError(f"calibration file {p} does not exist.")
        data = np.load(p).astype(np.float32)
        if tuple(data.shape[1:]) != shape:
            raise InputError(
                f"calibration samples have shape {data.shape[1:]}, the model needs {shape}."
            )
        return [data[i : i + batch] for i in range(0, len(data), batch)]
    print("note: calibrating on random normal inputs (pass --calib samples.npy for real ones)")
    rng = np.random.default_rng(0)
    return [rng.standard_normal((batch, *shape), dtype=np.float32) for _ in range(n)]


def cmd_export(a: argparse.Namespace) -> int:
    """Export FP32, or Q/DQ INT8 with --int8."""
    import torch

    from helpers.deploy.export import export_onnx, export_qdq, op_counts
    from helpers.deploy.qdq_model import fake_quant_copy

    model = load_model(a.model).eval()
    example = torch.zeros(1, *a.shape)
    try:
        model(example)
    except Exception as exc:  # noqa: BLE001 - say which shape was wrong
        raise InputError(
            f"the model does not accept inputs of shape (batch, {', '.join(map(str, a.shape))}): "
            f"{type(exc).__name__}: {exc}. Pass its sample shape with --shape."
        ) from None
    if a.int8:
        calib = [torch.from_numpy(b) for b in _calib(a.shape, a.calib)]
        out = export_qdq(fake_quant_copy(model, calib), example, a.out)
    else:
        out = export_onnx(model, example, a.out)
    print(f"wrote {out}: {dict(op_counts(out))}")
    return 0


def cmd_check(a: argparse.Namespace) -> int:
    """Validate Q/DQ placement for TensorRT."""
    from helpers.deploy.qdq_check import check_qdq
    from helpers.tables import to_text

    rep = check_qdq(a.onnx)
    if a.rows:
        print(to_text(rep.rows))
    print(rep.summary())
    return 0 if rep.ok else 1


def cmd_build(a: argparse.Namespace) -> int:
    """ORT: quantize_static INT8 model; TensorRT: a serialized engine."""
    src = Path(a.onnx)
    if not src.is_file():
        raise InputError(
            f"{src} does not exist. Export it first: python -m helpers.deploy export ..."
        )
    if a.backend == "tensorrt":
        from helpers.deploy.tensorrt_backend import build_engine, load_tensorrt

        load_tensorrt()
        out = build_engine(
            src, a.out or src.with_suffix(".engine"), timing_cache=src.with_suffix(".timing")
        )
    else:
        import onnx

        from helpers.deploy.ort_backend import quantize_static_qdq

        dims = (
            onnx.load(str(src), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
        )
        shape = tuple(d.dim_value for d in dims[1:])
        out = quantize_static_qdq(
            src, a.out or src.with_name(src.stem + "_int8.onnx"), _calib(shape, a.calib)
        )
    print(f"wrote {out}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    """Latency and throughput at each batch size."""
    from helpers.tables import to_text

    if a.backend == "tensorrt":
        from helpers.deploy.tensorrt_backend import TensorRTBackend, load_tensorrt

        load_tensorrt()
        be = TensorRTBackend(a.onnx)
    else:
        from helpers.deploy.ort_backend import OrtBackend

        be = OrtBackend(
            a.onnx, precision="int8" if "int8" in Path(a.onnx).name else "fp32", threads=a.threads
        )
        if a.input_name and a.input_name != be.input_name:
            raise InputError(
                f"the model has no input named {a.input_name!r}; its input is {be.input_name!r}."
            )
    sample = a.shape or tuple(d if d else 1 for d in be.sample_shape)
    rng = np.random.default_rng(0)
    make = lambda b: rng.standard_normal((b, *sample), dtype=np.float32)  # noqa: E731
    be.run(make(1))  # a wrong --shape fails here, with the model's expected shape in the message
    rows = [lat.row() for lat in be.benchmark(make, a.batch, repeats=a.repeats)]
    print(to_text(rows))
    return 0


def parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    p = argparse.ArgumentParser(
        prog="python -m helpers.deploy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="export a model to ONNX (FP32, or Q/DQ INT8 with --int8)")
    e.add_argument("model")
    e.add_argument("out")
    e.add_argument("--shape", type=_shape, required=True, help="one sample's shape, e.g. 3,224,224")
    e.add_argument("--int8", action="store_true", help="insert calibrated Q/DQ (TensorRT style)")
    e.add_argument("--calib", help=".npy file of calibration samples (default: random normal)")
    e.set_defaults(fn=cmd_export)
    c = sub.add_parser("check", help="validate a Q/DQ ONNX for TensorRT explicit quantization")
    c.add_argument("onnx")
    c.add_argument("--rows", action="store_true", help="print one row per Q/DQ and compute node")
    c.set_defaults(fn=cmd_check)
    b = sub.add_parser(
        "build", help="build a deployable model: ORT INT8 (default) or a TensorRT engine"
    )
    b.add_argument("onnx")
    b.add_argument("--backend", choices=("ort", "tensorrt"), default="ort")
    b.add_argument("--out")
    b.add_argument("--calib", help=".npy file of calibration samples (default: random normal)")
    b.set_defaults(fn=cmd_build)
    r = sub.add_parser("bench", help="latency p50/p99 and throughput over batch sizes")
    r.add_argument("onnx", help="an .onnx file (ort) or an .engine file (tensorrt)")
    r.add_argument("--backend", choices=("ort", "tensorrt"), default="ort")
    r.add_argument("--batch", type=_batches, default=[1, 32])
    r.add_argument("--shape", type=_shape, help="one sample's shape (default: the model's)")
    r.add_argument("--input-name", help="the model input to feed (checked against the model)")
    r.add_argument("--repeats", type=int, default=10)
    r.add_argument("--threads", type=int)
    r.set_defaults(fn=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; course errors become a one-line message and exit status 2."""
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except MissingPackageError as exc:
        print(f"error: backend not available: {exc}", file=sys.stderr)
        return 2
    except WorkbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
