"""Copy tensorrt-stubs 10.13 into typings/tensorrt/ with the small patch mypy needs (and TensorRT-RTX's).

    python typings/patch_tensorrt_stubs.py         (run from the repository root, with .venv active)
    python typings/patch_tensorrt_stubs.py --rtx   (with TensorRT-RTX importable: regenerate its stubs)

The published stubs (pip: tensorrt-stubs==10.13.0.35.1) have no py.typed marker, so mypy
ignores them; three methods name a parameter `in` (a Python keyword: a syntax error) and
`INetworkDefinition.add_scale_nd` puts a parameter without a default after defaulted ones.
The patch renames `in` to `in_`, gives `channel_axis` a default, and makes the package
self-contained (`tensorrt/__init__.pyi` re-exports `tensorrt/tensorrt.pyi`).

TensorRT-RTX publishes no stubs. `--rtx` writes typings/tensorrt_rtx_bindings/ with mypy's
stubgen from the real module (pip install tensorrt-rtx, or PYTHONPATH=/tmp/rtx on the GPU
machine), applies the same `add_scale_nd` fix and declares IHostMemory's buffer protocol. The
result is committed, so that mypy checks helpers.plugins.trt_protocol.TrtModule against
TensorRT-RTX's real signatures on every machine.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import sysconfig
from pathlib import Path

SITE = Path(sysconfig.get_paths()["purelib"])
OUT = Path(__file__).resolve().parent / "tensorrt"
RTX = "tensorrt_rtx_bindings"


def patch_bindings(text: str) -> str:
    """Fix the two syntax problems of tensorrt_bindings/tensorrt.pyi."""
    text = re.sub(r"([(,] ?)in: list", r"\1in_: list", text)
    return re.sub(r"(power: Weights = [^,()]+, channel_axis: [\w.]+)\)", r"\1 = ...)", text)


def patch_init(text: str) -> str:
    """Point tensorrt/__init__.pyi at the local copy and define the helpers it re-exported."""
    drop = (
        "from tensorrt_bindings import common_enter",
        "from tensorrt_bindings import common_exit",
        "from tensorrt_bindings import nptype",
        "import tensorrt_bindings.tensorrt",
        "from tensorrt_bindings import tensorrt",
        "import tensorrt_libs as tensorrt_libs",
        "from tensorrt_bindings.tensorrt import volume",
        "from tensorrt_bindings import volume",
    )
    lines = [ln for ln in text.splitlines() if ln.strip() not in drop]
    text = "\n".join(lines).replace("tensorrt_bindings.tensorrt", "tensorrt.tensorrt")
    text = text.replace("'tensorrt_libs', ", "").replace("tensorrt.tensorrt.", "")
    text = text.replace(
        "import sys as sys", "import sys as sys\nimport typing\nfrom tensorrt import tensorrt"
    )
    return text + (
        "\ndef common_enter(this: typing.Any) -> typing.Any: ...\n"
        "def common_exit(this: typing.Any, exc_type: typing.Any, exc_value: typing.Any, "
        "traceback: typing.Any) -> None: ...\n"
        "def nptype(trt_type: DataType) -> type: ...\n"
        "def volume(iterable: typing.Iterable[int]) -> int: ...\n"
    )


def patch_rtx(text: str) -> str:
    """stubgen misses the buffer protocol of IHostMemory (memoryview(m) works at run time): declare it."""
    return patch_bindings(text).replace(
        "class IHostMemory:\n",
        "class IHostMemory:\n    def __buffer__(self, flags: int, /) -> memoryview: ...\n",
    )


def write_rtx_stubs() -> Path:
    """Generate typings/tensorrt_rtx_bindings/ from the importable TensorRT-RTX module (mypy's stubgen)."""
    if importlib.util.find_spec(RTX) is None:
        raise SystemExit(f"{RTX} is not importable: pip install tensorrt-rtx (or use PYTHONPATH).")
    from mypy import stubgen

    stubgen.main(["-p", RTX, "-o", str(OUT.parent), "--quiet"])
    for stub in (OUT.parent / RTX).glob("*.pyi"):  # generated: report errors in our code, not in these
        stub.write_text("# mypy: ignore-errors\n" + patch_rtx(stub.read_text()))
    return OUT.parent / RTX


def main() -> None:
    """Write the patched stubs."""
    if "--rtx" in sys.argv[1:]:
        print(f"wrote {write_rtx_stubs()}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "tensorrt.pyi").write_text(
        patch_bindings((SITE / "tensorrt_bindings" / "tensorrt.pyi").read_text())
    )
    (OUT / "__init__.pyi").write_text(patch_init((SITE / "tensorrt" / "__init__.pyi").read_text()))
    (OUT / "py.typed").write_text("partial\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
