"""Command lines that speak to a student: any bad input is one line on stderr and a non-zero exit.

Every verb of the course (``python -m helpers.deploy``, ``helpers.tools.report``, ``helpers.tools.notebooks``,
``helpers.tools.site``) runs through ``run``: a course error, a usage error or an OS error (missing file,
folder instead of file, no permission) prints ``error: <problem>. <fix>`` on stderr and exits 2; anything
unexpected exits 1 with one line too. ``--debug`` anywhere on the line adds the Python traceback.

The output contract, one implementation for every command that writes: a command writes only into a folder
that is new, empty, or marked as its own (``claim_output_dir``/``output_dir``: the marker file ``.workbook-output``
lists what each command wrote there, with each file's SHA-256), and never into the course folder, its
solutions/, labs/, notebooks/, reference/, helpers/ or .git, an input folder, or a folder holding a .git.
A single output file (``check_output_file``/``replacing``) never replaces a file the command did not write
unless the user passes --force; it is written beside and renamed, keeping the old file's mode. A refusal
comes before any work, as one line naming the folder and what to pass instead.

Serves: core — used by chapters 1, 3, 4, 9, 10, 12.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import stat
import sys
import tarfile
import tempfile
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from helpers.errors import InputError, WorkbookError

DEBUG_FLAG = "--debug"
MARKER = ".workbook-output"  # in every folder a command wrote into: what each command wrote there
MAX_CHARS = 400


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one-line InputErrors instead of a usage dump and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        """Raise the problem with the fix (the verb's --help) instead of printing usage."""
        raise InputError(f"{message}. See: {self.prog} --help")


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= `minimum`."""

    def parse(text: str) -> int:
        """`text` as a whole number, or a one-line argparse error naming the bound."""
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_int = whole_number(1)  # an argparse type: a whole number >= 1


def _os_message(exc: OSError) -> str:
    """An OSError as the problem and what to do about it."""
    where = exc.filename or "a path"
    fixes = {FileNotFoundError: "does not exist: check the path",
             IsADirectoryError: "is a folder: pass a file",
             NotADirectoryError: "has a file where a folder is expected: check the path",
             PermissionError: "cannot be read or written by you: pick a path you own"}
    for kind, text in fixes.items():
        if isinstance(exc, kind):
            return f"{where} {text}."
    return f"{where}: {exc.strerror or exc}. Check the path and the disk."


def describe(exc: BaseException) -> str:
    """One line: the problem and the fix for a course error or OS error; for anything else, how to see more."""
    if isinstance(exc, WorkbookError):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = _os_message(exc)
    else:
        text = (f"unexpected {type(exc).__name__}: {exc}. This is a bug or an input the course does not "
                f"recognise: rerun with {DEBUG_FLAG} to see where it failed")
    text = " ".join(text.split())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


def run(command: Callable[[list[str]], int], argv: Iterable[str] | None = None) -> int:
    """Run `command(argv)` as a command line; return its exit status (2 for bad input, 1 for a crash)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in args
    args = [a for a in args if a != DEBUG_FLAG]
    try:
        return int(command(args) or 0)
    except SystemExit as exc:  # --help (0), or a verb that exits on its own
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("error: interrupted.", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place every command-line failure is turned into a line
        if debug:
            traceback.print_exc()
        print(f"error: {describe(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, (WorkbookError, OSError)) else 1


# ---------- the output contract: a command writes only what is new or its own, and never into the course ----------

COURSE = Path(__file__).resolve().parents[1]  # the course folder this package belongs to
COURSE_PARTS = ("solutions", "labs", "notebooks", "reference", "helpers", "instructors", "tests", "docs", "jupyter",
                ".git")


def _real(path: Path | str) -> Path:
    """`path` made absolute with its symbolic links resolved (it need not exist)."""
    return Path(os.path.realpath(Path(path).expanduser()))


def course_place(path: Path | str) -> str | None:
    """What part of the course `path` is ('the course folder', "the course's solutions/"), or None."""
    p = _real(path)
    if p == COURSE:
        return "the course folder"
    for part in COURSE_PARTS:
        if p == COURSE / part or COURSE / part in p.parents:
            return f"{'' if p == COURSE / part else 'inside '}the course's {part}/ folder"
    return None


def refuse_protected(folder: Path | str, inputs: Iterable[Path | str] = (), instead: str = "a new folder",
                     subject: str | None = None) -> None:
    """Raise unless a command may write into `folder`: not the course, not an input, not a repository.

    `subject` names what was asked for when it is not the folder itself (a file to be written there).
    """
    p, said = _real(folder), subject or str(folder)
    place = course_place(p)
    if place:
        raise InputError(f"{said} is {place}: commands never write there; nothing was changed. Pass {instead}.")
    for given in inputs:
        q = _real(given)
        if p == q or q in p.parents:
            raise InputError(f"{said} is {'' if p == q else 'inside '}{given}, an input of this command; "
                             f"nothing was changed. Pass {instead}.")
    if (p / ".git").exists():
        raise InputError(f"{said} holds a .git: it is a repository, not an output folder; nothing was "
                         f"changed. Pass {instead}.")


def digest(path: Path) -> str:
    """What a file is, to tell later whether it changed: the SHA-256 of its bytes, or its link target."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if not path.is_file():
        return "not a regular file"
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _walk(folder: Path, dirs: list[str] | None = None) -> Iterator[tuple[str, Path]]:
    """(relative path, path) of each file under `folder`, links not followed and the top-level marker left
    out, without reading any (its folders are added to `dirs`)."""
    for top, subdirs, names in os.walk(folder):
        rel = Path(top).relative_to(folder)
        for d in list(subdirs):
            if (Path(top) / d).is_symlink():
                subdirs.remove(d)
                names.append(d)
            elif dirs is not None:
                dirs.append((rel / d).as_posix())
        for n in names:
            if not (rel == Path(".") and n == MARKER):
                yield (rel / n).as_posix(), Path(top) / n


def entries(folder: Path) -> tuple[dict[str, str], list[str]]:
    """The files under `folder` (relative path -> digest, the top-level marker left out) and its folders."""
    dirs: list[str] = []
    files = {rel: digest(p) for rel, p in _walk(folder, dirs)}
    return files, sorted(dirs)


def read_marker(folder: Path) -> dict[str, dict]:
    """The marker of `folder`: for each command, what it wrote there ({} when there is none)."""
    path = Path(folder) / MARKER
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = json.loads(text).get("commands", {})
        return {k: v for k, v in data.items() if isinstance(v, dict)}
    except (ValueError, AttributeError):  # the first course versions wrote one line: "Written by COMMAND; ..."
        first = text.split(";")[0]
        return {first[len("Written by "):]: {"folder": True}} if first.startswith("Written by ") else {}


def _write_marker(folder: Path, command: str, section: dict) -> None:
    """Set `command`'s part of the marker of `folder`, beside and renamed, so it is never half-written."""
    data = {"about": "Written by the course's commands: which files each one wrote here. They replace only "
                     "these, and only while unchanged.", "commands": {**read_marker(folder), command: section}}
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f"{MARKER}.", suffix=".partial")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, Path(folder) / MARKER)


def _umask() -> int:
    """This process's file-creation mask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _shown(names: list[str]) -> str:
    """Up to five names, comma-separated."""
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def check_output_dir(path: Path | str, command: str, *, beside: Iterable[Path] = (), inputs: Iterable[Path | str] = (),
                     keep: bool = False, instead: str = "a new or empty folder") -> dict | None:
    """Raise unless `path` may be `command`'s output folder: new, empty, or holding only what it wrote there.

    `beside` are files it writes next to the folder (DIR.tar.gz): each must be new or its own. With `keep`
    (a command that adds to its folder run after run), an earlier run need not have finished. Changes nothing;
    returns the command's part of the folder's marker (None for a new or unmarked folder).
    """
    path, beside, inputs = Path(path), [Path(b) for b in beside], list(inputs)
    if path.is_symlink() and not path.exists():
        raise InputError(f"{path} is a link to nothing; nothing was changed. Pass {instead}.")
    if path.exists() and not path.is_dir():
        raise InputError(f"{path} is a file, not a folder; nothing was changed. Pass {instead}.")
    refuse_protected(path, inputs, instead)
    for b in beside:
        refuse_protected(b.parent, inputs, instead, subject=f"the folder of {b} (written beside {path})")
    section = read_marker(path).get(command) if path.is_dir() else None
    walk = _walk(path) if path.is_dir() else iter(())  # a refusal decides on names first: a foreign file is not read
    if section is None and (files := [r for r, _ in itertools.islice(walk, 6)]):
        owners = [c for c, s in read_marker(path).items() if s.get("folder")]
        whose = f" (it is the output of {owners[0]})" if owners else ""
        raise InputError(f"{path} already exists and holds files {command} did not write{whose} "
                         f"({_shown(sorted(files))}); nothing was changed. Pass {instead}, or move those files away.")
    if section is not None and section.get("sealed"):
        own = section.get("files", {})
        foreign = list(itertools.islice((r for r, p in walk if r not in own or digest(p) != own[r]), 6))
        if foreign:
            raise InputError(f"{path} holds files {command} did not write, or that changed since it wrote them "
                             f"({_shown(foreign)}); nothing was changed. Pass {instead}, or move those files away.")
    elif section is not None and not keep and (files := [r for r, _ in itertools.islice(walk, 6)]):
        raise InputError(f"{path} holds files of an earlier {command} that did not record what it wrote (it "
                         f"was killed, or an older version ran), so they cannot be told from files of yours "
                         f"({_shown(sorted(files))}); nothing was changed. Pass {instead}, or empty that folder yourself.")
    for b in beside:
        if (b.exists() or b.is_symlink()) and (section or {}).get("beside", {}).get(b.name) != digest(b):
            raise InputError(f"{b} already exists and {command} did not write it (or it changed since); nothing "
                             f"was changed. Pass {instead} in another folder, or move {b.name} away.")
    return section


def claim_output_dir(path: Path | str, command: str, *, beside: Iterable[Path] = (),
                     inputs: Iterable[Path | str] = (), keep: bool = False,
                     instead: str = "a new or empty folder") -> Path:
    """Check `path` (check_output_dir), clear what an earlier run wrote there (unless `keep`), create, mark it."""
    path = Path(path)
    section = check_output_dir(path, command, beside=beside, inputs=inputs, keep=keep, instead=instead) or {}
    if section.get("sealed") and not keep:
        for rel in section.get("files", {}):
            (path / rel).unlink(missing_ok=True)
        for rel in sorted(section.get("dirs", []), key=lambda r: r.count("/"), reverse=True):
            with contextlib.suppress(OSError):  # a folder that holds something else stays
                (path / rel).rmdir()
    path.mkdir(parents=True, exist_ok=True)
    _write_marker(path, command, {"folder": True, "sealed": False, "beside": section.get("beside", {})})
    return path


def seal_output_dir(path: Path | str, command: str) -> None:
    """Record every file now in the claimed folder `path` as `command`'s, so that its next run may replace them."""
    path = Path(path)
    section = read_marker(path).get(command, {})
    files, dirs = entries(path)
    beside = {n: d for n, d in section.get("beside", {}).items() if digest(path.parent / n) == d}
    _write_marker(path, command, {"folder": True, "sealed": True, "files": files, "dirs": dirs, "beside": beside})


@contextlib.contextmanager
def output_dir(path: Path | str, command: str, **claim: Any) -> Iterator[Path]:
    """Claim `path` for `command` (claim_output_dir's keywords), and seal it when done, interrupted or not."""
    out = claim_output_dir(path, command, **claim)
    try:
        yield out
    finally:
        seal_output_dir(out, command)


def owns_file(path: Path | str, command: str, folder: Path | None = None) -> bool:
    """True when `command` wrote `path` and it is unchanged since (per the marker of `folder`, else its own)."""
    path = Path(path)
    if folder is not None:
        return read_marker(folder).get(command, {}).get("beside", {}).get(path.name) == digest(path)
    return read_marker(path.parent).get(command, {}).get("files", {}).get(path.name) == digest(path)


def check_output_file(path: Path | str, command: str, *, force: bool = False, force_flag: str | None = "--force",
                      inputs: Iterable[Path | str] = (), instead: str = "another file name") -> Path:
    """Raise unless `command` may write the file `path`: in a folder it may write into, new or its own (or `force`)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise InputError(f"{path} is a folder; nothing was changed. Pass {instead}.")
    refuse_protected(path.parent, inputs, instead, subject=f"the folder of {path} ({path.parent})")
    for given in inputs:
        if _real(given) == _real(path):
            raise InputError(f"{path} is an input of this command; it would be overwritten. Pass {instead}.")
    if (path.exists() or path.is_symlink()) and not force and not owns_file(path, command):
        how = f"or {force_flag} to replace it on purpose" if force_flag else "or move that file away"
        raise InputError(f"{path} already exists and {command} did not write it; nothing was changed. "
                         f"Pass {instead}, {how}.")
    return path


@contextlib.contextmanager
def write_beside(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write; then rename it over `path`, keeping the old file's mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".partial{path.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        old = path.stat().st_mode if path.exists() and not path.is_symlink() else 0o666 & ~_umask()
        os.chmod(tmp, stat.S_IMODE(old))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def replacing(path: Path | str, command: str, *, force: bool = False, folder: Path | None = None,
              **check: Any) -> Iterator[Path]:
    """write_beside `path` as `command`'s output: checked first, then recorded in a marker.

    The check is check_output_file's (keywords `check`); for a file beside an output folder (`folder`, e.g.
    DIR.tar.gz) it must be new or recorded in that folder's marker. The record goes to the same marker.
    """
    path = Path(path)
    if folder is None:
        check_output_file(path, command, force=force, **check)
    elif (path.exists() or path.is_symlink()) and not owns_file(path, command, folder):
        raise InputError(f"{path} already exists and {command} did not write it; nothing was changed. Move it away.")
    with write_beside(path) as tmp:
        yield tmp
    where, key = (path.parent, "files") if folder is None else (Path(folder), "beside")
    section = read_marker(where).get(command, {})
    _write_marker(where, command, {**section, key: {**section.get(key, {}), path.name: digest(path)}})


def tar_beside(folder: Path | str, command: str) -> Path:
    """Write FOLDER.tar.gz next to the output folder (its marker left out), as `command`'s; return its path."""
    folder = Path(folder)
    archive = folder.parent / f"{folder.name}.tar.gz"
    with replacing(archive, command, folder=folder) as tmp, tarfile.open(tmp, "w:gz") as tar:
        tar.add(folder, arcname=folder.name, filter=lambda t: None if t.name == f"{folder.name}/{MARKER}" else t)
    return archive
