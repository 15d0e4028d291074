"""Which TensorRT is here: full TensorRT (10/11) or TensorRT-RTX, and the few ways they differ.

Both expose the same strongly typed API (``helpers.plugins.trt_protocol.TrtModule``); this module
finds one, names it, catches its log, and holds the small adapters:
- network flags: the STRONGLY_TYPED bit where the module still has it (TensorRT 10, TensorRT-RTX);
- timing cache: full TensorRT only (TensorRT-RTX tunes at run time, on the student's GPU);
- engine validity: TensorRT-RTX can say why a runtime refuses an engine (e.g. an unsupported GPU).

TensorRT-RTX installs as ``pip install tensorrt-rtx`` (module ``tensorrt_rtx``); its bindings wheel
alone is ``tensorrt_rtx_bindings``, next to a ``tensorrt_rtx_libs`` folder (the GPU reference run
unpacks both under /tmp/rtx and puts it on PYTHONPATH).

Serves: core — used by chapters 9–12 and labs 08, 09.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, cast

from helpers.errors import MissingPackageError
from helpers.plugins import present
from helpers.plugins.trt_protocol import TrtModule

TENSORRT, TENSORRT_RTX = "tensorrt", "tensorrt_rtx"
# (family, import name), in the order tried: full TensorRT runs engines on every NVIDIA GPU.
CANDIDATES = (
    (TENSORRT, "tensorrt"),
    (TENSORRT_RTX, "tensorrt_rtx"),
    (TENSORRT_RTX, "tensorrt_rtx_bindings"),
)
TITLES = {TENSORRT: "TensorRT", TENSORRT_RTX: "TensorRT-RTX"}
INSTALL_RTX = "pip install tensorrt-rtx (TensorRT for RTX GPUs: GeForce RTX 30xx or newer, RTX workstation GPUs)"
INSTALL_FULL = "pip install tensorrt (TensorRT 10/11, any recent NVIDIA GPU)"
INSTALL = f"{INSTALL_RTX}, or {INSTALL_FULL}; both need an NVIDIA driver"


@dataclass(frozen=True)
class Family:
    """One importable TensorRT-family module."""

    key: str  # "tensorrt" or "tensorrt_rtx"
    import_name: str
    module: TrtModule = field(repr=False)

    @property
    def version(self) -> str:
        """The module's version string."""
        return str(getattr(self.module, "__version__", "?"))

    @property
    def title(self) -> str:
        """'TensorRT-RTX'."""
        return TITLES[self.key]

    @property
    def label(self) -> str:
        """'TensorRT-RTX 1.7.1.116 (tensorrt_rtx_bindings)'."""
        return f"{self.title} {self.version} ({self.import_name})"

    @property
    def is_rtx(self) -> bool:
        """True for TensorRT-RTX."""
        return self.key == TENSORRT_RTX


@functools.cache
def families() -> tuple[Family, ...]:
    """Every TensorRT-family module importable here (one per family), in preference order."""
    found: dict[str, Family] = {}
    for key, name in CANDIDATES:
        if key not in found:
            module = present(name, needs=("Builder",))  # no Builder: only tensorrt-stubs is installed
            if module is not None:
                found[key] = Family(key, name, cast(TrtModule, module))
    return tuple(found.values())


def find(prefer: str | None = None) -> Family | None:
    """The family to use (`prefer`: 'tensorrt' or 'tensorrt_rtx'), or None when none is here."""
    have = families()
    if prefer is not None:
        have = tuple(f for f in have if f.key == prefer)
    return have[0] if have else None


def require(prefer: str | None = None, why: str = "the TensorRT backend") -> Family:
    """The family to use, or MissingPackageError with the install line."""
    fam = find(prefer)
    if fam is None:
        name, install = {
            TENSORRT: ("tensorrt", INSTALL_FULL),
            TENSORRT_RTX: ("tensorrt-rtx", INSTALL_RTX),
        }.get(prefer or "", ("TensorRT (tensorrt or tensorrt-rtx)", INSTALL))
        raise MissingPackageError(name, install, why)
    return fam


def describe() -> str:
    """One line: which TensorRT the backend uses here, or that none is installed."""
    fam = find()
    return (
        f"TensorRT backend: {fam.label}" if fam else f"TensorRT backend: none installed ({INSTALL})"
    )


@dataclass
class LogBook:
    """Messages a TensorRT logger received, as (severity, text)."""

    messages: list[tuple[str, str]] = field(default_factory=list)

    def since(self, start: int, *severities: str) -> list[str]:
        """'WARNING: text' lines from message `start` on, of these severities (all if none given)."""
        return [f"{s}: {m}" for s, m in self.messages[start:] if not severities or s in severities]

    def problems(self, start: int = 0) -> list[str]:
        """Warnings and errors from message `start` on."""
        return self.since(start, "INTERNAL_ERROR", "ERROR", "WARNING")


def capturing_logger(fam: Family, book: LogBook) -> Any:
    """A logger of this family (a subclass of its ILogger) that appends every message to `book`."""
    base: Any = fam.module.ILogger

    class CourseLogger(base):  # base: the module's pybind11 ILogger class
        def __init__(self) -> None:
            base.__init__(self)  # pybind11 trampolines need the base initialised explicitly

        def log(self, severity: Any, msg: str) -> None:
            book.messages.append(
                (str(getattr(severity, "name", severity)).rsplit(".", 1)[-1], str(msg))
            )

    return CourseLogger()


def network_flags(fam: Family) -> int:
    """Flags of a strongly typed network (TensorRT 11 has no flag: every network is strongly typed)."""
    flag = getattr(fam.module.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    return 1 << int(flag) if flag is not None else 0


def uses_timing_cache(fam: Family) -> bool:
    """Full TensorRT times tactics when building (a timing cache helps); TensorRT-RTX tunes at run time."""
    return not fam.is_rtx


def engine_validity(fam: Family, runtime: Any, data: bytes) -> str:
    """TensorRT-RTX's verdict on an engine here ('INVALID: UNSUPPORTED_CC'), or '' where unknown."""
    check = getattr(runtime, "get_engine_validity", None)
    flags = getattr(fam.module, "EngineInvalidityDiagnostics", None)
    if check is None or flags is None:
        return ""
    try:
        validity, diagnostics = check(data)
    except Exception as exc:  # noqa: BLE001 - the verdict is informative only
        return f"validity unknown ({type(exc).__name__}: {exc})"
    bits = int(diagnostics or 0)
    reasons = [name for name, bit in flags.__members__.items() if bits & int(bit)]
    return str(getattr(validity, "name", validity)) + (f": {', '.join(reasons)}" if reasons else "")


def runs_on(fam: Family, cc: tuple[int, int]) -> bool:
    """Can this family's runtime run engines on a GPU of compute capability `cc`?

    Full TensorRT: yes. TensorRT-RTX: only the GPUs its ComputeCapability enum names (SM75 ...
    SM121), read from the module; Hopper (9.0) is not one. The enum can name more than the runtime
    accepts: TensorRT-RTX 1.7 names SM75 (Turing), yet its runtime's refusal on the H200 listed only
    8.0, 8.6, 8.9 and 12.x (stored ch09.trt_rtx.*.runs). The runtime's own message has the last word.
    """
    if not fam.is_rtx:
        return True
    names = getattr(getattr(fam.module, "ComputeCapability", None), "__members__", {})
    ccs = {(int(n[2:-1]), int(n[-1])) for n in names if n.startswith("SM") and n[2:].isdigit()}
    return cc in ccs


def probe() -> Any:
    """The environment report's line for TensorRT (a helpers.environment.StackStatus): can a builder be created here?"""
    from helpers.device import GPU_EXTRAS, has_gpu
    from helpers.environment import StackStatus

    fam = find()
    if fam is None:
        fix = GPU_EXTRAS if has_gpu() else "needs an NVIDIA GPU; then " + GPU_EXTRAS
        return StackStatus("TensorRT", "missing", "not installed", fix)
    try:
        builder = fam.module.Builder(capturing_logger(fam, LogBook()))
        assert builder is not None
    except Exception as exc:  # noqa: BLE001 - the probe reports any failure (full TensorRT's Builder needs a GPU)
        return StackStatus("TensorRT", "broken", f"{fam.label}: {type(exc).__name__}: {exc}", GPU_EXTRAS)
    return StackStatus("TensorRT", "real", fam.label)
