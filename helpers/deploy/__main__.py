"""Deploy a model from a shell, as the chapter 9 notebook does.

    python -m helpers.deploy export MODEL OUT.onnx --shape 3,224,224 [--int8] [--force]
    python -m helpers.deploy check  MODEL.onnx [--rows]
    python -m helpers.deploy build  MODEL.onnx --backend ort|tensorrt [--out PATH] [--force]
    python -m helpers.deploy bench  MODEL.onnx [--backend ort|tensorrt] [--batch 1,32] [--input-name NAME]

MODEL for export: resnet18, resnet50, a name known to helpers.models.train.trained_model
(e.g. trained:resnet_small), or a file saved with torch.save(model).
Bad input (a missing, empty, cut-off or non-ONNX file, a folder, a wrong shape) is one line on stderr
and exit status 2; add --debug for the Python traceback.
export and build never replace a file they did not write (unless --force), nor write into the course's own
folders or a repository's top folder; they write beside and rename (helpers.cli's output contract).

Serves: core — chapter 9 and lab 8 (`python -m helpers.deploy`).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from helpers import cli
from helpers import backends as registry
from helpers.errors import InputError
from helpers.validation import require_finite

PROG = "python -m helpers.deploy"
EXPORT, BUILD = f"{PROG} export", f"{PROG} build"  # the commands that write, as their output markers name them
INSTEAD = "another output name with --out"  # what a refusal of `build`'s output tells the user to pass


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


def model_file(spec: str) -> Path | None:
    """The file a MODEL names (checked: it exists, is a file, is not empty), or None for a model name."""
    if spec in ("resnet18", "resnet50") or spec.startswith("trained:"):
        return None
    path = Path(spec)
    save = "Save the whole model with torch.save(model, path), or pass resnet18, resnet50 or trained:NAME."
    if path.is_dir():
        raise InputError(f"{path} is a folder, not a model file. {save}")
    if not path.is_file():
        raise InputError(
            f"no model file {path} (and it is not resnet18, resnet50 or trained:NAME). "
            "Save one with torch.save(model, path), or check the spelling."
        )
    if path.stat().st_size == 0:
        raise InputError(f"{path} is empty (0 bytes). {save}")
    return path


def load_model(spec: str):
    """A torch model from a name or a torch.save file."""
    import torch

    if spec in ("resnet18", "resnet50"):
        from helpers.models import resnet

        return getattr(resnet, spec)()
    if spec.startswith("trained:"):
        from helpers.models.train import trained_model

        return trained_model(spec.split(":", 1)[1], progress=False)
    path = model_file(spec)
    save = "Save the whole model with torch.save(model, path), or pass resnet18, resnet50 or trained:NAME."
    try:
        obj = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - pickle and zip raise many kinds for a file that is not a model
        raise InputError(f"{path} is not a file saved by torch.save ({type(exc).__name__}: {str(exc)[:100]}); "
                         f"it is cut off or another kind of file. {save}") from None
    if not isinstance(obj, torch.nn.Module):
        what = "a state_dict (weights without the model)" if isinstance(obj, dict) else f"a {type(obj).__name__}"
        raise InputError(f"{path} holds {what}, not a model. {save}")
    return obj


def _calib(shape: tuple[int, ...], npy: str | None, n: int = 4, batch: int = 8) -> list[np.ndarray]:
    """Calibration batches: from a .npy file of samples, else random normal (printed as such)."""
    if npy:
        p = Path(npy)
        fix = f"Save an array of samples, shape (n, {', '.join(map(str, shape))}), with np.save."
        if not p.is_file():
            raise InputError(f"calibration file {p} does not exist or is a folder. {fix}")
        try:
            data = np.asarray(np.load(p, allow_pickle=False), dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - a cut-off or non-.npy file
            raise InputError(f"{p} is not a readable .npy array ({type(exc).__name__}). {fix}") from None
        if data.ndim < 1 or tuple(data.shape[1:]) != shape or len(data) == 0:
            raise InputError(f"calibration samples have shape {data.shape}, the model needs (n >= 1, "
                             f"{', '.join(map(str, shape))}). {fix}")
        require_finite(data, f"calibration samples in {p}")
        return [data[i : i + batch] for i in range(0, len(data), batch)]
    print("note: calibrating on random normal inputs (pass --calib samples.npy for real ones)")
    rng = np.random.default_rng(0)
    return [rng.standard_normal((batch, *shape), dtype=np.float32) for _ in range(n)]


@contextlib.contextmanager
def _onnxruntime_errors(path: str) -> Iterator[None]:
    """Turn ONNX Runtime's own exceptions (a graph it cannot load or run) into one InputError line."""
    try:
        yield
    except Exception as exc:
        if not type(exc).__module__.startswith("onnxruntime"):
            raise
        raise InputError(f"ONNX Runtime cannot load or run {path} ({type(exc).__name__}: {str(exc)[:160]}). "
                         f"Check it with `{PROG} check {path}`, or export it again.") from None


def _onnx_out(out: str, *inputs: str) -> Path:
    """An output path: a .onnx file name, not a folder, and not one of the command's own inputs."""
    p = Path(out)
    if p.suffix != ".onnx":
        raise InputError(f"the output {out!r} does not end in .onnx (are MODEL and OUT swapped?). Name it OUT.onnx.")
    if p.is_dir():
        raise InputError(f"the output {out} is a folder. Pass a file name such as {p / 'model.onnx'}.")
    if any(Path(i).exists() and p.exists() and p.samefile(i) for i in inputs):
        raise InputError(f"the output {out} is also an input of this command; it would be overwritten. "
                         "Pass another output name.")
    return p


def cmd_export(a: argparse.Namespace) -> int:
    """Export FP32, or Q/DQ INT8 with --int8."""
    out = _onnx_out(a.out, a.model)
    source = model_file(a.model)  # a bad MODEL file is named first; then the output is checked, before any work
    writing = dict(force=a.force, inputs=[source] if source else [], instead="another OUT.onnx")
    cli.check_output_file(out, EXPORT, **writing)
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
    calib = [torch.from_numpy(b) for b in _calib(a.shape, a.calib)] if a.int8 else []
    with cli.replacing(out, EXPORT, **writing) as tmp:  # written beside, then renamed over OUT
        if a.int8:
            export_qdq(fake_quant_copy(model, calib), example, tmp)
        else:
            export_onnx(model, example, tmp)
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
    from helpers.deploy.tensorrt_backend import parser_report

    said = parser_report(a.onnx)  # None where no TensorRT-family module is importable
    if said is not None:
        print("\n".join(said))
    return 0 if rep.ok else 1


def cmd_build(a: argparse.Namespace) -> int:
    """ORT: quantize_static INT8 model; TensorRT: a serialized engine."""
    src = Path(a.onnx)
    if a.out is not None and registry.get(a.backend).output == "onnx":
        _onnx_out(a.out, a.onnx)
    elif a.out is not None and Path(a.out).is_dir():
        raise InputError(f"the output {a.out} is a folder. Pass a file name for the engine.")
    tensorrt = registry.get(a.backend).output == "engine"
    default = src.with_suffix(".engine") if tensorrt else src.with_name(src.stem + "_int8.onnx")
    out, writing = Path(a.out) if a.out else default, dict(force=a.force, inputs=[src], instead=INSTEAD)
    cli.check_output_file(out, BUILD, **writing)  # before any work: a file it did not write stays, unless --force
    from helpers.deploy.export import load_onnx

    model = load_onnx(src)
    if tensorrt:
        _build_engine(src, out, writing)
    else:
        from helpers.deploy.ort_backend import quantize_static_qdq

        shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:])
        if not a.calib and (not shape or min(shape) < 1):
            raise InputError(f"{src}'s input has no fixed sample shape ({shape}); pass --calib samples.npy.")
        calib = _calib(shape, a.calib)
        with _onnxruntime_errors(a.onnx), cli.replacing(out, BUILD, **writing) as tmp:
            quantize_static_qdq(src, tmp, calib)
    print(f"wrote {out}")
    return 0


def _build_engine(src: Path, out: Path, writing: dict) -> None:
    """A TensorRT engine at `out`, and full TensorRT's timing cache beside `src`, each written beside and renamed."""
    from helpers.plugins import trt_family
    from helpers.deploy.tensorrt_backend import build_engine, load_tensorrt

    fam = trt_family.find()
    timing = src.with_suffix(".timing") if fam is not None and trt_family.uses_timing_cache(fam) else None
    if timing is not None:
        cli.check_output_file(timing, BUILD, **writing)
    load_tensorrt()
    print(trt_family.describe())
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(cli.replacing(out, BUILD, **writing))
        cache = None if timing is None else stack.enter_context(cli.replacing(timing, BUILD, **writing))
        if timing is not None and timing.is_file():
            shutil.copyfile(timing, cache)  # the cache grows run after run: start from the one this command wrote
        build_engine(src, engine, timing_cache=cache)


def cmd_bench(a: argparse.Namespace) -> int:
    """Latency and throughput at each batch size."""
    from helpers.tables import to_text

    if registry.get(a.backend).output == "engine":
        from helpers.deploy.tensorrt_backend import TensorRTBackend, load_tensorrt

        src = Path(a.onnx)
        if src.is_dir() or (src.is_file() and src.stat().st_size == 0):
            raise InputError(f"{src} is a folder or an empty file, not an engine. Build one: {PROG} build ...")

        from helpers.plugins import trt_family

        load_tensorrt()
        print(trt_family.describe())
        be = TensorRTBackend(a.onnx)
    else:
        from helpers.deploy.export import load_onnx
        from helpers.deploy.ort_backend import OrtBackend

        load_onnx(a.onnx)
        with _onnxruntime_errors(a.onnx):
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
    with _onnxruntime_errors(a.onnx):
        be.run(make(1))  # a wrong --shape fails here, with the model's expected shape in the message
        rows = [lat.row() for lat in be.benchmark(make, a.batch, repeats=a.repeats)]
    print(to_text(rows))
    return 0


def parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    p = cli.Parser(
        prog=PROG,
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
    e.add_argument("--force", action="store_true", help="replace OUT even if this command did not write it")
    e.set_defaults(fn=cmd_export)
    c = sub.add_parser("check", help="validate a Q/DQ ONNX for TensorRT explicit quantization")
    c.add_argument("onnx")
    c.add_argument("--rows", action="store_true", help="print one row per Q/DQ and compute node")
    c.set_defaults(fn=cmd_check)
    b = sub.add_parser(
        "build", help="build a deployable model: ORT INT8 (default) or a TensorRT engine"
    )
    b.add_argument("onnx")
    b.add_argument("--backend", choices=registry.cli_names(), default="ort")
    b.add_argument("--out", help="the file to write (default: beside MODEL, as NAME_int8.onnx or NAME.engine)")
    b.add_argument("--calib", help=".npy file of calibration samples (default: random normal)")
    b.add_argument("--force", action="store_true", help="replace the output even if this command did not write it")
    b.set_defaults(fn=cmd_build)
    r = sub.add_parser("bench", help="latency p50/p99 and throughput over batch sizes")
    r.add_argument("onnx", help="an .onnx file (ort) or an .engine file (tensorrt)")
    r.add_argument("--backend", choices=registry.cli_names(), default="ort")
    r.add_argument("--batch", type=_batches, default=[1, 32])
    r.add_argument("--shape", type=_shape, help="one sample's shape (default: the model's)")
    r.add_argument("--input-name", help="the model input to feed (checked against the model)")
    r.add_argument("--repeats", type=cli.positive_int, default=10)
    r.add_argument("--threads", type=cli.positive_int)
    r.set_defaults(fn=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input is one line on stderr and exit status 2 (--debug: the traceback too)."""
    return cli.run(lambda args: (ns := parser().parse_args(args)).fn(ns), argv)


if __name__ == "__main__":
    sys.exit(main())
