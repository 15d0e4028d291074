"""The files of a class on JupyterHub: labs released into the students' homes, submissions collected from
them into the grader's folder layout, feedback returned into them.

Each student has a home of their own (a system user, as JupyterHub's LocalProcessSpawner starts one):

    ~/labs/<lab>.ipynb          released here, then edited and saved by the student (their submission)
    ~/feedback/<lab>.md         the grader's feedback, returned here

The instructor's commands run as root (sudo) and so never trust what a student controls: every folder and
file in a home is opened without following links (a student's ``~/labs`` pointing at /etc, or a
``<lab>.ipynb`` pointing at another student's notebook, is refused, never followed), only regular files
owned by that student are collected, and a file is written only where nothing is (release never touches a
student's own copy) or where this command wrote it and nobody changed it since (a ledger in the hub's
state folder keeps each written file's SHA-256).

Serves: instructors (teaching on JupyterHub).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import InputError

LABS, FEEDBACK = "labs", "feedback"
LEDGER = "written.json"  # in the hub's state folder: {path: sha256} of every file written into a home
MAX_NOTEBOOK_BYTES = 20_000_000  # a submission larger than this is not collected (reported instead)
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
LAB_NAME = re.compile(r"^lab\d\d_[a-z0-9_]+$")
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Account:
    """A student on the hub: user name, home folder, and the ids their files belong to."""

    name: str
    home: Path
    uid: int
    gid: int


def check_name(name: str, what: str = "user") -> str:
    """A user name the hub accepts (a portable system user name), else InputError."""
    if not USER_NAME.match(name):
        raise InputError(f"{what} name {name!r} is not a plain system user name. Use lower-case letters, digits, "
                         f"'_' or '-', starting with a letter (e.g. gic_alice).")
    return name


def accounts(names: list[str]) -> list[Account]:
    """The system accounts of the named students (each must exist and have a home folder)."""
    if not names:
        raise InputError("no students given. Pass --students alice,bob (system users with home folders).")
    found = []
    for name in dict.fromkeys(names):
        try:
            pw = pwd.getpwnam(check_name(name, "student"))
        except KeyError:
            raise InputError(f"no system user {name!r} on this machine. Create it first "
                             f"(useradd -m {name} && passwd {name}), or fix the name.") from None
        if pw.pw_uid == 0:
            raise InputError(f"{name!r} is root, not a student. Pass the students' own user names.")
        home = Path(pw.pw_dir)
        if not home.is_dir() or home.is_symlink():
            raise InputError(f"the home folder of {name!r} ({home}) is missing or a link. Create it: "
                             f"mkhomedir_helper {name}.")
        found.append(Account(name, home, pw.pw_uid, pw.pw_gid))
    return found


def check_lab(lab: str, solutions: Path) -> Path:
    """The solution notebook of a lab name such as lab00_warmup_quantize, else InputError."""
    if not LAB_NAME.match(lab) or not (solutions / f"{lab}.ipynb").is_file():
        known = sorted(p.stem for p in solutions.glob("lab*.ipynb"))
        raise InputError(f"unknown lab {lab!r}. Pass one of: {', '.join(known) or '(no labs found)'}.")
    return solutions / f"{lab}.ipynb"


def _sha(data: bytes) -> str:
    """SHA-256 of bytes."""
    return hashlib.sha256(data).hexdigest()


class Ledger:
    """The files this command wrote into homes, with their SHA-256 (so it replaces only its own, unchanged)."""

    def __init__(self, state: Path) -> None:
        self.path = state / LEDGER
        self.written: dict[str, str] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def owns(self, path: Path, data: bytes) -> bool:
        """True when `path` holds exactly what this command wrote there."""
        return self.written.get(str(path)) == _sha(data)

    def add(self, path: Path, data: bytes) -> None:
        """Remember that `path` now holds `data`, and save the ledger (atomically)."""
        self.written[str(path)] = _sha(data)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{LEDGER}.partial")
        tmp.write_text(json.dumps(self.written, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


@contextlib.contextmanager
def _folder(account: Account, name: str, create: bool) -> Iterator[int | None]:
    """A file descriptor of home/<name>, a real folder owned by the student (made when `create`), or None."""
    home = os.open(account.home, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=home)
                os.chown(name, account.uid, account.gid, dir_fd=home, follow_symlinks=False)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=home)
        except FileNotFoundError:
            fd = None
        except (NotADirectoryError, OSError) as exc:
            raise InputError(f"{account.home / name} is not a folder (a link or a file: {exc.strerror}); "
                             f"nothing was done for {account.name}. Ask them to move it away.") from None
        if fd is not None and os.fstat(fd).st_uid != account.uid:
            os.close(fd)
            raise InputError(f"{account.home / name} does not belong to {account.name}; nothing was done for "
                             f"them. Give it back: chown {account.name} {account.home / name}.")
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)
    finally:
        os.close(home)


def _read(folder: int, name: str) -> bytes | None:
    """The bytes of a regular file in `folder`, or None when there is none (links are never followed)."""
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{name} is not a regular file")
        return f.read()


def _write(account: Account, sub: str, name: str, data: bytes, ledger: Ledger) -> str:
    """Write home/<sub>/<name> as the student's file unless someone else's is there; say what happened."""
    path = account.home / sub / name
    try:
        return _write_in(account, sub, name, data, ledger, path)
    except InputError as exc:
        return f"skipped {account.name}: {exc}"


def _write_in(account: Account, sub: str, name: str, data: bytes, ledger: Ledger, path: Path) -> str:
    """_write's work, once home/<sub> is known to be the student's own folder (else InputError)."""
    with _folder(account, sub, create=True) as folder:
        assert folder is not None
        try:
            old = _read(folder, name)
        except (InputError, OSError):
            return f"kept {path}: something else is there (a link or a folder); nothing was written"
        if old is not None and not ledger.owns(path, old):
            return f"kept {path}: the student's own file (written or changed by them)"
        if old == data:
            return f"unchanged {path}"
        tmp = f".{name}.{secrets.token_hex(6)}.partial"  # a new name: nothing of the student's is touched
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchown(f.fileno(), account.uid, account.gid)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    ledger.add(path, data)
    return f"{'replaced' if old is not None else 'wrote'} {path}"


def release(lab_notebook: Path, students: list[Account], state: Path) -> list[str]:
    """Copy the lab's student notebook into each home's labs/ folder; never over a student's own file."""
    data, ledger = lab_notebook.read_bytes(), Ledger(state)
    return [_write(a, LABS, lab_notebook.name, data, ledger) for a in students]


def collect(lab: str, students: list[Account], out: Path) -> list[str]:
    """Copy each home's labs/<lab>.ipynb to out/<student>/<lab>.ipynb (the grader's folder-each layout)."""
    report = []
    for a in students:
        src = a.home / LABS / f"{lab}.ipynb"
        try:
            with _folder(a, LABS, create=False) as folder:
                data = None if folder is None else _read_own(folder, f"{lab}.ipynb", a)
        except (InputError, OSError) as exc:
            report.append(f"not collected {src}: {exc}")
            continue
        if data is None:
            report.append(f"nothing to collect for {a.name}: no {src}")
            continue
        dest = out / a.name / f"{lab}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        report.append(f"collected {src} -> {dest}")
    return report


def _read_own(folder: int, name: str, account: Account) -> bytes | None:
    """A student's own regular file, not over MAX_NOTEBOOK_BYTES, else InputError (links never followed)."""
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"not a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("not a regular file")
        if st.st_uid != account.uid:
            raise InputError(f"the file does not belong to {account.name}")
        if st.st_size > MAX_NOTEBOOK_BYTES:
            raise InputError(f"{st.st_size} bytes, over the {MAX_NOTEBOOK_BYTES}-byte limit for a notebook")
        return f.read()


def feedback_file(grades: Path, student: str, lab: str) -> Path:
    """Where `grade` wrote a student's feedback for a lab (grades/feedback/<student>__<lab>.md)."""
    return grades / "feedback" / f"{student}__{lab}.md"


def give_back(lab: str, students: list[Account], grades: Path, state: Path) -> list[str]:
    """Copy each student's feedback file from the grader's folder into their home's feedback/<lab>.md."""
    if not (grades / "gradebook.csv").is_file():
        raise InputError(f"{grades} holds no gradebook.csv: pass the --out folder of "
                         f"python -m instructors.batch grade.")
    ledger, report = Ledger(state), []
    for a in students:
        src = feedback_file(grades, a.name, lab)
        if not src.is_file():
            report.append(f"no feedback for {a.name}: {src} does not exist (nothing was submitted or graded)")
            continue
        report.append(_write(a, FEEDBACK, f"{lab}.md", src.read_bytes(), ledger))
    return report
