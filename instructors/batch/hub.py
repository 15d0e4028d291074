"""Teaching on JupyterHub: start the course's hub, release a lab to the students, collect, return feedback.

    python -m instructors.batch hub serve   --students alice,bob --instructors teacher [--hub DIR] [--port 8000]
    python -m instructors.batch hub release LAB --students alice,bob [--hub DIR]
    python -m instructors.batch hub collect LAB --students alice,bob --out DIR
    python -m instructors.batch grade DIR --out GRADES                    (the course grader, unchanged)
    python -m instructors.batch hub return  LAB --students alice,bob --grades GRADES [--hub DIR]

Run them as root (sudo) on the hub's machine. The hub folder (default /srv/gpu-int8-course) holds
course/ (the student release: the course package without answer keys, solutions or grader, the chapters
and labs; what every student's kernel imports), cache/ (the model cache, read-only for students) and
state/ (root only: the hub's database, cookie secret and the ledger of files written into homes).
``serve`` refreshes course/ and cache/, checks that a student can run the course's Python, then becomes
JupyterHub (jupyter/hub_config.py: PAM log-in of system users, one JupyterLab per user started as that
user, the course kernel); Ctrl-C stops the hub, its proxy and every user's server.

Serves: instructors (teaching on JupyterHub).
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from helpers import cli
from helpers.errors import InputError
from instructors.batch import hub_files, release

PROG = "python -m instructors.batch hub"
DEFAULT_HUB = Path("/srv/gpu-int8-course")
COURSE, CACHE, STATE = "course", "cache", "state"
CONFIG = release.ROOT / "jupyter" / "hub_config.py"
PROXY = Path(sys.prefix) / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
ENV = {"students": "COURSE_HUB_STUDENTS", "instructors": "COURSE_HUB_INSTRUCTORS", "hub": "COURSE_HUB_DIR",
       "ip": "COURSE_HUB_IP", "ports": "COURSE_HUB_PORTS", "proxy": "COURSE_HUB_PROXY"}


def _names(text: str) -> list[str]:
    """User names from 'a,b c'."""
    return [n for n in text.replace(",", " ").split() if n]


def _parser(verb: str, what: str, lab: bool = True) -> cli.Parser:
    """A verb's parser with the options every verb shares."""
    ap = cli.Parser(prog=f"{PROG} {verb}", description=what)
    if lab:
        ap.add_argument("lab", help="the lab's name, e.g. lab00_warmup_quantize")
    ap.add_argument("--students", type=_names, default=[], help="the students' system user names: alice,bob")
    ap.add_argument("--hub", type=lambda t: Path(t).resolve(), default=DEFAULT_HUB,
                    help=f"the hub's folder (default {DEFAULT_HUB})")
    return ap


def _root_only(folder: Path) -> Path:
    """Make `folder` (if new) readable by root alone."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def _for_all(path: Path) -> None:
    """Let every user read (not write) what is under `path`."""
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)


def setup(hub: Path, cache: Path | None = None) -> Path:
    """Write hub/course (the student release) and hub/cache (a copy of `cache`, if given), both read-only to users."""
    hub = Path(hub)
    if hub.exists() and not hub.is_dir():
        raise InputError(f"{hub} is a file. Pass a folder for the hub, e.g. --hub {DEFAULT_HUB}.")
    foreign = sorted(p.name for p in hub.iterdir() if p.name not in (COURSE, CACHE, STATE)) if hub.is_dir() else []
    if foreign:
        raise InputError(f"{hub} holds other things ({', '.join(foreign[:3])}); the hub writes only into a new, "
                         f"empty or earlier hub folder. Pass another --hub, e.g. --hub {DEFAULT_HUB}.")
    hub.mkdir(parents=True, exist_ok=True)
    os.chmod(hub, 0o755)
    course = hub / COURSE
    with cli.output_dir(course, f"{PROG} setup", inputs=[release.ROOT / n for n in release.RELEASE_ITEMS],
                        instead=f"another --hub than {hub}"):
        release._copy(release.RELEASE_ITEMS, course, release.ROOT)  # noqa: SLF001 - the one copy rule
    _for_all(course)
    (hub / CACHE).mkdir(exist_ok=True)
    if cache is not None and Path(cache).is_dir():
        shutil.copytree(cache, hub / CACHE, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.lock", "*.tmp"))
    _for_all(hub / CACHE)
    _root_only(hub / STATE)
    return course


def protect(root: Path = release.ROOT) -> list[tuple[Path, int]]:
    """Close the course checkout to other users (answer keys, solutions, tests), all but the Python environment.

    Removes the group and other permission bits of each top-level entry of `root` except the folder holding
    this Python; returns (path, previous mode) of each entry changed, so that they can be put back.
    """
    keep = {Path(os.path.realpath(sys.prefix))}
    changed = []
    for entry in sorted(Path(root).iterdir()):
        mode = os.lstat(entry).st_mode
        if entry.is_symlink() or Path(os.path.realpath(entry)) in keep or any(
                Path(os.path.realpath(entry)) in k.parents for k in keep) or not mode & 0o077:
            continue
        os.chmod(entry, stat.S_IMODE(mode) & 0o700)
        changed.append((entry, stat.S_IMODE(mode)))
    return changed


def closed_folder(path: Path) -> Path | None:
    """The first folder above `path` (as given, then resolved) that other users cannot pass through, or None."""
    for folder in [*reversed(Path(os.path.abspath(path)).parents), *reversed(Path(os.path.realpath(path)).parents)]:
        if not os.stat(folder).st_mode & stat.S_IXOTH and not has_acl(folder):
            return folder
    return None


def has_acl(folder: Path) -> bool:
    """True when the folder has an access ACL beyond its mode bits (then `runuser` below is the judge)."""
    try:
        return bool(os.getxattr(folder, "system.posix_acl_access"))
    except OSError:
        return False


def check_reachable(student: str, hub: Path) -> None:
    """Refuse to serve when `student` cannot run this Python with the course package: name the fix."""
    probe = "import jupyterhub, helpers, sys; assert helpers.__file__.startswith(sys.argv[1]), helpers.__file__"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(hub / COURSE), "HOME": "/"}
    done = subprocess.run(["runuser", "-u", student, "--", sys.executable, "-c", probe, str(hub / COURSE)],
                          env=env, capture_output=True, text=True, timeout=60, cwd="/")
    if done.returncode == 0:
        return
    blocked = (closed_folder(Path(sys.prefix) / "bin") or closed_folder(Path(sys.executable))
               or closed_folder(hub / COURSE))
    where = (f"{blocked} is closed to other users. Let students pass through it: setfacl -m u:{student}:x {blocked} "
             f"(or chmod o+x {blocked}), or install the course where all users can reach it"
             if blocked else f"it failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    raise InputError(f"student {student!r} cannot run the course's Python ({sys.executable}): {where}.")


def hub_env(hub: Path, students: list[str], instructors: list[str], ip: str, ports: tuple[int, int, int],
            proxy: Path = PROXY) -> dict[str, str]:
    """The environment jupyter/hub_config.py reads."""
    env = dict(os.environ)
    env.update({ENV["students"]: ",".join(students), ENV["instructors"]: ",".join(instructors),
                ENV["hub"]: str(Path(hub).resolve()), ENV["ip"]: ip, ENV["ports"]: ",".join(map(str, ports)),
                ENV["proxy"]: str(proxy)})
    return env


def _serve(argv: list[str]) -> int:
    """serve: set up the hub folder, check, and become JupyterHub."""
    ap = _parser("serve", "start the course's JupyterHub", lab=False)
    ap.add_argument("--instructors", type=_names, default=[], help="hub admins (system users): teacher")
    ap.add_argument("--ip", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--port", type=cli.whole_number(1), default=8000, help="the hub's public port (default 8000)")
    ap.add_argument("--cache", type=Path, default=None, help="a model cache to copy for the students")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise InputError("the hub starts each user's JupyterLab as that user, which needs root. Run it with sudo.")
    people = hub_files.accounts(args.students + args.instructors)
    for a in people:
        if os.stat(a.home).st_mode & 0o077:
            raise InputError(f"the home folder of {a.name} ({a.home}) is open to other users: students could read "
                             f"each other's work. Close it: chmod 700 {a.home}.")
    students = [a.name for a in people if a.name in args.students]
    if not PROXY.exists():
        raise InputError(f"the hub's proxy is not installed ({PROXY}). Install it: make hub-deps.")
    from helpers import session

    setup(args.hub, args.cache or session.cache_dir())
    closed = protect()
    if closed:
        print(f"closed {len(closed)} entries of the course folder ({', '.join(p.name for p, _ in closed[:4])}, ...) "
              f"to other users: students read the release in {args.hub / COURSE}")
    check_reachable(students[0], args.hub)
    ports = (args.port, args.port + 1, args.port + 2)
    print(f"JupyterHub on http://{args.ip}:{args.port} for {', '.join(students)} "
          f"(instructors: {', '.join(args.instructors) or 'none'}); Ctrl-C stops it.", flush=True)
    exe = Path(sys.prefix) / "bin" / "jupyterhub"
    os.chdir(args.hub / STATE)
    os.execve(exe, [str(exe), "-f", str(CONFIG)], hub_env(args.hub, students, args.instructors, args.ip, ports))
    return 0  # not reached


def _lab_args(verb: str, what: str, argv: list[str], **folders: str) -> argparse.Namespace:
    """Parse a lab verb's arguments (LAB, --students, --hub and the required folder options) and check the lab."""
    ap = _parser(verb, what)
    for name, text in folders.items():
        ap.add_argument(f"--{name}", type=Path, required=True, help=text)
    args = ap.parse_args(argv)
    hub_files.check_lab(args.lab, release.ROOT / "solutions")
    return args


def _release(argv: list[str]) -> int:
    """release LAB: the student notebook of LAB into each home."""
    args = _lab_args("release", "copy a lab into the students' homes (~/labs/LAB.ipynb)", argv)
    notebook = release.ROOT / "labs" / f"{args.lab}.ipynb"
    print("\n".join(hub_files.release(notebook, hub_files.accounts(args.students), _root_only(args.hub / STATE))))
    return 0


def _collect(argv: list[str]) -> int:
    """collect LAB --out DIR: each student's saved notebook into DIR/<student>/LAB.ipynb."""
    args = _lab_args("collect", "copy the students' saved labs into the grader's folder layout", argv,
                     out="a new or empty folder (then: grade DIR --out GRADES)")
    instead = "a new or empty folder, e.g. --out submissions"
    cli.check_output_dir(args.out, f"{PROG} collect", instead=instead)  # refused before anything else
    students = hub_files.accounts(args.students)
    with cli.output_dir(args.out, f"{PROG} collect", instead=instead):
        report = hub_files.collect(args.lab, students, args.out)
    print("\n".join(report))
    print(f"next: python -m instructors.batch grade {args.out} --out GRADES")
    return 0


def _return(argv: list[str]) -> int:
    """return LAB --grades DIR: each student's feedback file into their home."""
    args = _lab_args("return", "copy each student's feedback into their home (~/feedback/LAB.md)", argv,
                     grades="the --out folder of the grade command")
    students = hub_files.accounts(args.students)
    print("\n".join(hub_files.give_back(args.lab, students, args.grades, _root_only(args.hub / STATE))))
    return 0


VERBS = {"serve": _serve, "release": _release, "collect": _collect, "return": _return}


def main(argv: list[str]) -> int:
    """Dispatch a hub verb."""
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] not in VERBS:
        raise InputError(f"unknown hub command {argv[0]!r}: use {', '.join(VERBS)}. See: {PROG} --help")
    return VERBS[argv[0]](argv[1:])
