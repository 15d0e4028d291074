"""Every command that writes keeps helpers.cli's output contract, run as a student or instructor runs it
(`python -m ...` in a subprocess): pointed at a folder holding a user's file, at a git repository, at the
course folder or its solutions/, it exits 2 with one line on stderr and leaves every byte as it was; into a
new folder, and again into its own, it works; `deploy build` replaces a file it did not write only with --force.

Where a command's work before its output step takes minutes (executing or rendering every notebook, cloning
the course and installing it), the subprocess replaces that step by a stub and runs the rest as it is.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import cli
from helpers.errors import InputError
from instructors.batch.labgen import generate
from tests.support.grading import write_solution

ROOT = cli.COURSE
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
MAIN = "import sys\nfrom {pkg} import {mod} as m\n{stub}\nsys.exit(m.main(sys.argv[1:]))"
STUBS = {  # the long step before the output step, replaced (only that)
    "report": "m.execute_all = lambda paths, out, timeout, **options: []",
    "site": "m.render = lambda page: '<html><body>stub</body></html>'",
    "fresh_clone": "m.time_fresh_clone = lambda **k: m.Timeline(1.0, 2.0, 3.0, {'installer': 'pip'})",
}


@dataclass(frozen=True)
class Writer:
    """One command that writes: how to point it at an output, and what a user's file there is called."""

    name: str
    program: list[str]  # after `python`
    argv: Callable[[Path, dict], list[str]]  # output path, fixture paths -> the rest of the command line
    folder: bool  # its output is a folder (else one file)
    user_file: str  # a user's file in the folder (for a file output: the output's own name)
    beside: bool = False  # it also writes OUTPUT.tar.gz beside the folder


def _tool(mod: str) -> list[str]:
    """`python -c` running helpers.tools.<mod>'s main with its long step stubbed."""
    return ["-c", MAIN.format(pkg="helpers.tools", mod=mod, stub=STUBS[mod])]


WRITERS = [
    Writer("report", _tool("report"), lambda o, f: ["--out", str(o), "--only", "00_*", "--timeout", "5"], True,
           "summary.md", beside=True),
    Writer("site", _tool("site"), lambda o, f: ["--out", str(o)], True, "index.html"),
    Writer("release", ["-m", "instructors.batch"], lambda o, f: ["release", "--out", str(o)], True, "README.md",
           beside=True),
    Writer("grade", ["-m", "instructors.batch"],
           lambda o, f: ["grade", str(f["subs"]), "--solutions", str(f["solutions"]), "--out", str(o),
                         "--sandbox", "plain"], True, "gradebook.csv"),
    Writer("suite_time", ["-m", "helpers.tools.suite_time"], lambda o, f: [str(time.time() - 60), str(o)], False,
           "suite_time.json"),
    Writer("fresh_clone", _tool("fresh_clone"), lambda o, f: [str(o)], False, "fresh_clone.json"),
    Writer("deploy-export", ["-m", "helpers.deploy"],
           lambda o, f: ["export", str(f["tiny.pt"]), str(o), "--shape", "4"], False, "model.onnx"),
    Writer("deploy-build", ["-m", "helpers.deploy"], lambda o, f: ["build", str(f["m.onnx"]), "--out", str(o)], False,
           "m_int8.onnx"),
]
BY_NAME = {w.name: w for w in WRITERS}
CASES = ["user-folder", "git-repo", "course", "course-solutions"]
EXTRA = {"report": ["tarball-beside"], "release": ["tarball-beside"], "grade": ["solutions-given"]}
REFUSALS = [(w.name, case) for w in WRITERS for case in CASES + EXTRA.get(w.name, [])]


def run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python ARGS` from the course folder, as a user runs it."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every file (bytes), link (target) and folder under `folder`, .git included."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        out[rel] = ("link:" + os.readlink(p)) if p.is_symlink() else p.read_bytes() if p.is_file() else "folder"
    return out


def _git_repo(path: Path) -> Path:
    """A user's repository with one committed file."""
    path.mkdir(parents=True)
    (path / "thesis.tex").write_text("years of work\n")
    git = ["git", "-C", str(path), "-c", "user.name=u", "-c", "user.email=u@example.org"]
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "mine"]):
        subprocess.run(git + cmd, check=True, capture_output=True)
    return path


def _target(w: Writer, case: str, base: Path, fx: dict) -> tuple[Path, Path]:
    """(the output to pass, the folder that must survive) for one refusal case; sets the case up."""
    ext = Path(w.user_file).suffix
    if case == "user-folder":
        base.mkdir(parents=True)
        (base / w.user_file).write_text("a user's own file\n")
        (base / "notes.txt").write_text("more of the user's work\n")
        return (base if w.folder else base / w.user_file), base
    if case == "git-repo":
        repo = _git_repo(base)
        return (repo if w.folder else repo / f"out{ext}"), repo
    if case == "tarball-beside":
        base.mkdir(parents=True)
        (base / "out.tar.gz").write_bytes(b"a user's archive")
        return base / "out", base
    if case == "solutions-given":
        return fx["solutions"], fx["solutions"]
    place = ROOT if case == "course" else ROOT / "solutions"
    return (place if w.folder else place / f"contract-probe{ext}"), place


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every case of every command, run once (several at a time): results, snapshots before and after."""
    import torch

    tmp = tmp_path_factory.mktemp("contract")
    fx = {"tiny.pt": tmp / "tiny.pt", "solutions": tmp / "solutions", "subs": tmp / "subs"}
    torch.save(torch.nn.Sequential(torch.nn.Linear(4, 3)), fx["tiny.pt"])
    write_solution(fx["solutions"])
    fx["subs"].mkdir()
    (fx["subs"] / "lab97_nothing__alice.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, '
                                                           '"nbformat_minor": 5}')
    export = BY_NAME["deploy-export"]
    fx["m.onnx"] = tmp / "deploy-export-happy" / "out.onnx"  # the export's happy path makes build's model
    first = run(export.program + export.argv(fx["m.onnx"], fx))
    assert first.returncode == 0, first.stderr[-800:]
    jobs: dict[tuple[str, str], Callable[[], dict]] = {}
    for name, case in REFUSALS:
        w = BY_NAME[name]
        target, keep = _target(w, case, tmp / f"{name}-{case}", fx)
        before = snapshot(keep) if keep not in (ROOT, ROOT / "solutions") else None
        jobs[(name, case)] = lambda w=w, target=target, keep=keep, before=before: {
            "result": run(w.program + w.argv(target, fx)), "target": target, "keep": keep, "before": before}
    for w in WRITERS:
        def happy(w: Writer = w) -> dict:
            out = tmp / f"{w.name}-happy" / ("out" if w.folder else f"out{Path(w.user_file).suffix}")
            runs = [first] if w is export else []
            return {"target": out, "runs": runs + [run(w.program + w.argv(out, fx)) for _ in range(2 - len(runs))]}
        jobs[(w.name, "happy")] = happy
    jobs[("deploy-build", "force")] = lambda: _force_chain(tmp / "force", fx)
    jobs[("generate", "bogus")] = lambda: _labs_after(["-m", "instructors.batch", "generate", "--bogus"])
    jobs[("batch", "bad-verb")] = lambda: _labs_after(["-m", "instructors.batch", "regenerate"])
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {key: pool.submit(job) for key, job in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


def _force_chain(folder: Path, fx: dict) -> dict:
    """deploy build beside a user's m_int8.onnx: without --force, then with it."""
    folder.mkdir()
    model = shutil.copy(fx["m.onnx"], folder / "m.onnx")
    mine = folder / "m_int8.onnx"
    mine.write_bytes(b"a user's own INT8 model")
    mine.chmod(0o640)
    refused = run(["-m", "helpers.deploy", "build", str(model)])
    kept = mine.read_bytes()
    forced = run(["-m", "helpers.deploy", "build", str(model), "--force"])
    return {"refused": refused, "kept": kept, "forced": forced, "out": mine}


def _labs_after(args: list[str]) -> dict:
    """Run a command; the course's labs/ before and after."""
    before = snapshot(ROOT / "labs")
    return {"result": run(args), "same": snapshot(ROOT / "labs") == before}


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (asserted), exit status 2."""
    err = result.stderr.strip()
    assert result.returncode == 2, (result.returncode, result.stdout[-800:], err[-800:])
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("name, case", REFUSALS, ids=[f"{n}-{c}" for n, c in REFUSALS])
def test_a_place_that_is_not_its_own_is_refused_and_left_as_it_was(outcome: dict, name: str, case: str) -> None:
    got = outcome[(name, case)]
    err = _one_line_error(got["result"])
    assert "nothing was changed" in err and "Pass " in err, err
    shown = got["target"].parent if case == "tarball-beside" else got["target"]
    assert str(shown) in err, err
    if got["before"] is not None:
        assert snapshot(got["keep"]) == got["before"]  # the user's files and repository, byte for byte
    else:  # the course: nothing was written into it (a command's first write is its marker or its file)
        assert not (got["keep"] / cli.MARKER).exists() and not (
            not BY_NAME[name].folder and got["target"].exists())


@pytest.mark.parametrize("name", [w.name for w in WRITERS])
def test_a_new_folder_then_its_own_folder_again_work(outcome: dict, name: str) -> None:
    got, w = outcome[(name, "happy")], BY_NAME[name]
    for result in got["runs"]:
        assert result.returncode == 0, (result.stdout[-800:], result.stderr[-800:])
    out = got["target"]
    if w.folder:
        assert cli.read_marker(out)[f"python -m {_program(name)}"]["folder"]
    else:
        assert cli.owns_file(out, f"python -m {_program(name)}")
    if w.beside:
        assert (out.parent / "out.tar.gz").is_file()


def _program(name: str) -> str:
    """The command as its marker names it."""
    return {"report": "helpers.tools.report", "site": "helpers.tools.site", "fresh_clone": "helpers.tools.fresh_clone",
            "suite_time": "helpers.tools.suite_time", "release": "instructors.batch release",
            "grade": "instructors.batch grade", "deploy-export": "helpers.deploy export",
            "deploy-build": "helpers.deploy build"}[name]


def test_deploy_build_replaces_a_file_it_did_not_write_only_with_force(outcome: dict) -> None:
    got = outcome[("deploy-build", "force")]
    err = _one_line_error(got["refused"])
    assert "m_int8.onnx already exists" in err and "--force" in err, err
    assert got["kept"] == b"a user's own INT8 model"
    assert got["forced"].returncode == 0, got["forced"].stderr[-800:]
    assert got["out"].read_bytes() != got["kept"] and cli.owns_file(got["out"], "python -m helpers.deploy build")
    assert stat.S_IMODE(got["out"].stat().st_mode) == 0o640  # the user's mode is kept


@pytest.mark.parametrize("key, message", [(("generate", "bogus"), "unrecognized arguments: --bogus"),
                                          (("batch", "bad-verb"), "unknown command 'regenerate'")])
def test_an_unknown_option_or_command_is_an_error_that_writes_nothing(outcome: dict, key, message) -> None:
    got = outcome[key]
    assert message in _one_line_error(got["result"]) and got["same"]


def test_generate_writes_only_the_labs_of_its_solutions_keeping_their_mode(tmp_path: Path) -> None:
    solutions, labs = tmp_path / "solutions", tmp_path / "labs"
    write_solution(solutions)
    labs.mkdir()
    (labs / "my_own_lab.ipynb").write_text("a user's notebook")
    (labs / "lab98_fixture.ipynb").write_text("an older generated lab")
    (labs / "lab98_fixture.ipynb").chmod(0o640)
    with pytest.raises(InputError, match="changed since generate wrote it"):  # no record says generate wrote it
        generate(solutions, labs)
    assert (labs / "lab98_fixture.ipynb").read_text() == "an older generated lab"
    assert generate(solutions, labs, force=True) == [labs / "lab98_fixture.ipynb"]
    assert (labs / "my_own_lab.ipynb").read_text() == "a user's notebook"
    assert stat.S_IMODE((labs / "lab98_fixture.ipynb").stat().st_mode) == 0o640
    assert "Fixture lab" in (labs / "lab98_fixture.ipynb").read_text()
    assert sorted(p.name for p in labs.iterdir()) == [".generated.json", "lab98_fixture.ipynb", "my_own_lab.ipynb"]
