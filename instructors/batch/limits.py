"""Resource limits of one graded kernel: memory, CPU time, file size, processes, and the size of its /tmp.

Each kernel starts through a small launcher that joins the kernel's own control groups, where this
machine lets the grader make them (Linux cgroup v1 or v2: ``memory`` caps what all its processes hold
together, ``pids`` how many processes and threads it may have), sets its rlimits (address space, CPU
seconds, file size, processes; the process rlimit is not enforced for root, the pids group is) and
then becomes the kernel. Under bubblewrap its /tmp is a tmpfs of a fixed size. A kernel over a limit
gets an error in its cell (MemoryError, "File too large", "No space left on device", a failed fork)
or is killed; ``explain`` and ``Groups.hit`` say which limit it was, for the feedback.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

GIB, MIB = 1 << 30, 1 << 20
CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "gpu-int8-grading-"


@dataclass(frozen=True)
class Resources:
    """What one graded kernel may use (0 for a limit means: none)."""

    memory_bytes: int = 8 * GIB     # address space of each process, and all its processes together (cgroup)
    cpu_seconds: int = 0            # CPU seconds of each process (0: twice the submission's total time)
    file_bytes: int = 1 * GIB       # the largest file it may write
    processes: int = 2048           # processes and threads (the CUDA simulator runs a thread per GPU thread)
    tmp_bytes: int = 512 * MIB      # its private /tmp (bubblewrap only)

    def to_dict(self) -> dict[str, int]:
        """As plain data (for a worker's job)."""
        return asdict(self)

    def describe(self, what: str) -> str:
        """A limit in words, for a feedback line ('memory (8 GiB)')."""
        size = {"memory": self.memory_bytes, "file size": self.file_bytes, "/tmp size": self.tmp_bytes}
        if what in size:
            return f"{what} ({_size(size[what])})"
        if what == "processes":
            return f"process count ({self.processes})"
        return f"CPU time ({self.cpu_seconds} s)" if self.cpu_seconds else "CPU time"


def _size(n: int) -> str:
    """Bytes in GiB or MiB."""
    return f"{n / GIB:g} GiB" if n >= GIB else f"{n / MIB:g} MiB"


def with_cpu(res: Resources, total_timeout: float) -> Resources:
    """`res` with its CPU limit filled in from the submission's total time when it has none."""
    if res.cpu_seconds:
        return res
    return Resources(**dict(res.to_dict(), cpu_seconds=int(2 * total_timeout + 30)))


def validate(res: Resources) -> None:
    """Raise InputError for a limit that is negative, not a whole number, or too small to start Python."""
    from helpers.errors import InputError

    for name, value in res.to_dict().items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"resource limit {name} must be a whole number of 0 or more; got {value!r}.")
    if 0 < res.memory_bytes < 256 * MIB:
        raise InputError(f"--memory must be at least 0.25 GiB (a Python kernel needs that); got {_size(res.memory_bytes)}.")
    if 0 < res.processes < 16:
        raise InputError(f"--max-processes must be at least 16 (a kernel runs several threads); got {res.processes}.")


# ---------- control groups ----------

def _own_groups() -> dict[str, Path]:
    """controller -> the folder of this process's own cgroup for it (v1 per controller, v2 unified)."""
    out: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            if c in ("memory", "pids") and (CGROUP_ROOT / c).is_dir():
                out[c] = CGROUP_ROOT / c / path.lstrip("/")
        if controllers == "" and (CGROUP_ROOT / "cgroup.controllers").is_file():
            avail = (CGROUP_ROOT / path.lstrip("/") / "cgroup.controllers")
            names = avail.read_text().split() if avail.is_file() else []
            for c in ("memory", "pids"):
                if c in names and c not in out:
                    out[c] = CGROUP_ROOT / path.lstrip("/")
    return out


def make_parent(tag: str) -> list[str]:
    """Create this batch's cgroup folders (one per usable controller); return their paths (may be empty)."""
    made = []
    for c, base in _own_groups().items():
        d = base / f"{PREFIX}{tag}"
        try:
            d.mkdir(exist_ok=True)
            if (d / "cgroup.subtree_control").is_file():  # v2: let the kernels' groups use the controller
                (d / "cgroup.subtree_control").write_text(f"+{c}")
            made.append(str(d))
        except OSError:
            continue
    return sorted(set(made))


def _kill_all(d: Path, rounds: int = 50) -> None:
    """SIGKILL every process of a cgroup folder and of its children, until none is left."""
    for _ in range(rounds):
        pids = []
        for procs in d.rglob("cgroup.procs"):
            try:
                pids += [int(p) for p in procs.read_text().split()]
            except (OSError, ValueError):
                continue
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def remove_tree(path: str) -> None:
    """Kill what is left in a cgroup folder and remove it with its children (deepest first)."""
    d = Path(path)
    if not d.is_dir():
        return
    _kill_all(d)
    for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [d]:
        for _ in range(20):
            try:
                sub.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


class Groups:
    """The cgroups of one kernel: made under the batch's folders, limited, watched, removed."""

    def __init__(self, parents: list[str], name: str, res: Resources):
        self.dirs: dict[str, Path] = {}
        self.res = res
        for parent in parents:
            d = Path(parent) / name
            try:
                d.mkdir()
                self._limit(d)
                self.dirs[str(d)] = d
            except OSError:
                continue

    def _limit(self, d: Path) -> None:
        """Write this kernel's limits into one cgroup folder (whichever files it has)."""
        files = {"memory.limit_in_bytes": self.res.memory_bytes, "memory.max": self.res.memory_bytes,
                 "memory.memsw.limit_in_bytes": self.res.memory_bytes, "memory.swap.max": 0,
                 "pids.max": self.res.processes}
        for name, value in files.items():
            if (d / name).is_file() and (value or name == "memory.swap.max"):
                try:
                    (d / name).write_text(str(value))
                except OSError:
                    pass

    def paths(self) -> list[str]:
        """The folders the launcher joins."""
        return list(self.dirs)

    def _read(self, name: str) -> str:
        """The text of a control file in any of this kernel's folders ('' if none)."""
        for d in self.dirs.values():
            try:
                return (d / name).read_text()
            except OSError:
                continue
        return ""

    def hit(self) -> str:
        """Which group limit was reached ('memory', 'processes' or '')."""
        oom = self._read("memory.oom_control") + self._read("memory.events")
        for line in oom.splitlines():
            key, _, value = line.partition(" ")
            if key in ("oom_kill", "oom") and value.strip() not in ("", "0"):
                return "memory"
        events = self._read("pids.events")
        if any(line.startswith("max ") and line.split()[1] != "0" for line in events.splitlines()):
            return "processes"
        return ""

    def kill(self) -> None:
        """Kill every process of this kernel's groups (a fork bomb at its limit cannot outrun it)."""
        for d in self.dirs.values():
            _kill_all(d)

    def remove(self) -> None:
        """Kill what is left and remove the folders."""
        for d in self.dirs.values():
            remove_tree(str(d))


# ---------- the launcher and the explanations ----------

LAUNCHER = ("import os, resource, signal, sys\n"
            "cg, lim = sys.argv[1], sys.argv[2]\n"
            "for d in filter(None, cg.split(':')):\n"
            "    open(os.path.join(d, 'cgroup.procs'), 'w').write(str(os.getpid()))\n"
            "for k, v in zip(('AS', 'CPU', 'FSIZE', 'NPROC'), map(int, lim.split(','))):\n"
            "    if v:\n"
            "        r = getattr(resource, 'RLIMIT_' + k)\n"
            "        hard = resource.getrlimit(r)[1]\n"
            "        v = v if hard == resource.RLIM_INFINITY else min(v, hard)\n"
            "        resource.setrlimit(r, (v, v + 5 if k == 'CPU' and hard == resource.RLIM_INFINITY else v))\n"
            "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
            "os.execvp(sys.argv[3], sys.argv[3:])\n")


def launcher(res: Resources, groups: list[str]) -> list[str]:
    """The command prefix that joins `groups`, sets the rlimits of `res`, then runs the rest of the line."""
    # No process rlimit for root: it is not enforced for root, and under bubblewrap's user namespace it would be,
    # against every process root has on the machine (other submissions' included). Root's kernels are held by their
    # own pids group where the machine has one.
    nproc = res.processes if os.geteuid() != 0 else 0
    rl = f"{res.memory_bytes},{res.cpu_seconds},{res.file_bytes},{nproc}"
    return [sys.executable, "-c", LAUNCHER, ":".join(groups), rl]


def explain(ename: str, evalue: str) -> str:
    """The limit an error in a cell points to ('memory', 'file size', '/tmp size', 'processes'), or ''."""
    text = f"{ename}: {evalue}"
    if ename == "MemoryError" or "Unable to allocate" in text or "std::bad_alloc" in text:
        return "memory"
    if f"[Errno {errno.EFBIG}]" in text or "File too large" in text:
        return "file size"
    if f"[Errno {errno.ENOSPC}]" in text or "No space left on device" in text:
        return "/tmp size"
    if ename == "BlockingIOError" or "Resource temporarily unavailable" in text or "can't start new thread" in text:
        return "processes"
    return ""


def explain_exit(code: int | None) -> str:
    """The limit a kernel's exit status points to ('CPU time', 'file size', 'memory'), or ''."""
    if code is None:
        return ""
    sig = -code if code < 0 else code - 128 if code > 128 else 0
    return {signal.SIGXCPU: "CPU time", signal.SIGXFSZ: "file size"}.get(sig, "")


def processes_enforced() -> bool:
    """True when a kernel's process count can be limited here (a pids cgroup, or an rlimit for a non-root user)."""
    made = make_parent(f"probe-{os.getpid()}")
    try:
        return any(Path(d, "pids.max").is_file() for d in made) or os.geteuid() != 0
    finally:
        for d in made:
            remove_tree(d)
