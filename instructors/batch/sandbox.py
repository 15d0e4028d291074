"""How a graded kernel is started: in an empty folder, with the students' copy of the course package (no
answer key), and, where bubblewrap is installed, inside Linux namespaces.

Modes (``mode()``):
- ``bwrap``: no network, a read-only view of the system (only /usr, /etc, Python, the venv and the
  model cache), a private /tmp, its own process tree (it sees no other process and cannot signal
  one), the answer-key-free course package and an empty working folder; nothing else of the disk
  (not the course folder, the submissions or the output folder). It ends with its worker.
- ``plain``: the same empty folder and package copy, its own process group, every descendant
  killed at the end; but it runs with your user's rights and can read what your user can.
Both start the kernel through instructors.batch.limits' launcher: its memory, CPU time, file size and
process limits (and, under bubblewrap, a /tmp of a fixed size).

Serves: instructors (batch grading).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from instructors.batch import limits

MODES = ("auto", "bwrap", "plain")
# Every graded process (kernel and worker) computes on one thread, unless the grader's environment says
# otherwise: the labs' models are small, so a second thread gains less than contention costs, above all
# with --jobs 2 on two cores (on the course's busy 2-core machine, an evaluation of the chapter-7 ResNet
# was many times slower on two threads than on one; this was seen while building the grader, not stored).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# glibc gives threads their own malloc arenas, up to 8 per core, each reserving 64 MiB of address space: on a 16-core
# machine a kernel running the CUDA simulator's hundreds of threads reserved more than the 8 GiB address-space limit
# (lab 12's demo cell on the H200), on 2 cores a sixteenth of that. A fixed count makes the limit mean the same everywhere.
MALLOC_ARENAS = "2"
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
COURSE_ROOT = Path(__file__).resolve().parents[2]  # the grader's own checkout: never on a kernel's path


def library_paths() -> list[Path]:
    """The grader's own PYTHONPATH folders that a kernel needs for its libraries (e.g. packages installed with
    ``pip --target``), read-only: never the course checkout, nor any folder that holds a ``helpers`` or an
    ``instructors`` package."""
    out: list[Path] = []
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry:
            continue
        p = Path(entry).resolve()
        if (p.is_dir() and p not in out and not p.is_relative_to(COURSE_ROOT) and not COURSE_ROOT.is_relative_to(p)
                and not (p / "helpers").exists() and not (p / "instructors").exists()):
            out.append(p)
    return out


@functools.cache
def bwrap_works() -> bool:
    """True when bubblewrap is installed and can create namespaces here."""
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        r = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                           capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def mode(requested: str = "auto") -> str:
    """The sandbox mode to use: 'bwrap' where it works (or when asked), else 'plain'."""
    from helpers.errors import InputError

    if requested not in MODES:
        raise InputError(f"sandbox must be one of {MODES}; got {requested!r}.")
    if requested == "bwrap" and not bwrap_works():
        raise InputError("bubblewrap is not usable here. Install it (Debian: apt-get install bubblewrap), "
                         "or pass --sandbox plain.")
    if requested == "auto":
        return "bwrap" if bwrap_works() else "plain"
    return requested


def _model_cache() -> Path:
    """The trained-model cache folder the kernels read (same rule as helpers.models.train)."""
    return Path(os.environ.get("WORKBOOK_CACHE") or "~/.cache/gpu-int8-course").expanduser()


@dataclass
class Sandbox:
    """Where and how one kernel runs."""

    mode: str
    course: Path   # the answer-key-free copy of the course package (its folder holds helpers/)
    workdir: Path  # the kernel's empty working folder
    conn: Path     # the folder of the kernel's connection file and sockets
    resources: limits.Resources = field(default_factory=limits.Resources)
    groups: limits.Groups | None = None  # its cgroups, where this machine lets the grader make them

    def env(self) -> dict[str, str]:
        """The kernel's environment: nothing of the grader's beyond what Python needs."""
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", *ONE_THREAD)}
        home = "/tmp" if self.mode == "bwrap" else str(self.workdir)
        path = os.pathsep.join([str(self.course), *map(str, library_paths())])
        return dict(ONE_THREAD, **keep, HOME=home, PYTHONPATH=path, MPLBACKEND="Agg",
                    PYTHONDONTWRITEBYTECODE="1", MPLCONFIGDIR=f"{home}/.mpl", NUMBA_CACHE_DIR=f"{home}/.numba",
                    WORKBOOK_CACHE=str(_model_cache()), TMPDIR="/tmp" if self.mode == "bwrap" else str(self.workdir),
                    PYDEVD_DISABLE_FILE_VALIDATION="1", MALLOC_ARENA_MAX=MALLOC_ARENAS)

    def argv(self) -> list[str]:
        """The kernel command line ({connection_file} is filled in by jupyter_client)."""
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        limited = limits.launcher(self.resources, self.groups.paths() if self.groups else [])
        if self.mode != "bwrap":
            return limited + kernel
        # bwrap itself ignores SIGINT (an interrupt is for the kernel, whose own handler survives exec)
        ignore_int = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                      "os.execvp(sys.argv[1], sys.argv[1:])"]
        tmp = ["--size", str(self.resources.tmp_bytes)] if self.resources.tmp_bytes else []
        cmd = limited + ignore_int + ["bwrap", "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev",
                                      "/dev", *tmp, "--tmpfs", "/tmp", "--unsetenv", "JPY_PARENT_PID"]
        for d in _SYSTEM_DIRS:
            p = Path(d)
            if p.is_symlink():
                cmd += ["--symlink", os.readlink(p), d]
            elif p.is_dir():
                cmd += ["--ro-bind", d, d]
        for p in {Path(sys.base_prefix).resolve(), Path(sys.prefix), Path(sys.prefix).resolve()}:
            cmd += ["--ro-bind", str(p), str(p)]
        for lib in library_paths():
            cmd += ["--ro-bind", str(lib), str(lib)]
        cache = _model_cache()
        if cache.is_dir():
            cmd += ["--ro-bind", str(cache), str(cache)]
        cmd += ["--ro-bind", str(self.course), str(self.course), "--bind", str(self.workdir), str(self.workdir),
                "--bind", str(self.conn), str(self.conn), "--chdir", str(self.workdir)]
        return cmd + ["--"] + kernel
