"""Copy tensorrt-stubs 10.13 into typings/tensorrt/ with the small patch mypy needs.

    python typings/patch_tensorrt_stubs.py   (run from the repository root, with .venv active)

The published stubs (pip: tensorrt-stubs==10.13.0.35.1) have no py.typed marker, so mypy
ignores them; three methods name a parameter `in` (a Python keyword: a syntax error) and
`INetworkDefinition.add_scale_nd` puts a parameter without a default after defaulted ones.
The patch renames `in` to `in_`, gives `channel_axis` a default, and makes the package
self-contained (`tensorrt/__init__.pyi` re-exports `tensorrt/tensorrt.pyi`).
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

SITE = Path(sysconfig.get_paths()["purelib"])
OUT = Path(__file__).resolve().parent / "tensorrt"


def patch_bindings(text: str) -> str:
    """Fix the two syntax problems of tensorrt_bindings/tensorrt.pyi."""
    text = re.sub(r"([(,] ?)in: list", r"\1in_: list", text)
    return text.replace(
        "power: Weights = None, channel_axis: int)",
        "power: Weights = None, channel_axis: int = ...)",
    )


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


def main() -> None:
    """Write the patched stubs."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "tensorrt.pyi").write_text(
        patch_bindings((SITE / "tensorrt_bindings" / "tensorrt.pyi").read_text())
    )
    (OUT / "__init__.pyi").write_text(patch_init((SITE / "tensorrt" / "__init__.pyi").read_text()))
    (OUT / "py.typed").write_text("partial\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
