"""The hub's file handling without a hub: release, collect and return between homes and the grader's folders.

Homes here are temporary folders of the user running the tests; each refusal is one line, and nothing a
student wrote (or pointed a link at) is ever overwritten, followed or collected.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from helpers.errors import InputError
from instructors.batch import hub, hub_files, release
from instructors.batch.__main__ import main

LAB = "lab00_warmup_quantize"


@pytest.fixture
def homes(tmp_path: Path) -> list[hub_files.Account]:
    """Two students whose homes are temporary folders owned by this user."""
    out = []
    for name in ("ann", "ben"):
        home = tmp_path / "home" / name
        home.mkdir(parents=True)
        out.append(hub_files.Account(name, home, os.getuid(), os.getgid()))
    return out


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A released lab notebook."""
    path = tmp_path / "course" / f"{LAB}.ipynb"
    path.parent.mkdir()
    path.write_text('{"cells": []}')
    return path


def test_release_writes_each_home_once_and_never_over_a_students_file(homes, lab, tmp_path: Path) -> None:
    state = tmp_path / "state"
    report = hub_files.release(lab, homes, state)
    assert all(line.startswith("wrote") for line in report), report
    ann, ben = (h.home / "labs" / lab.name for h in homes)
    assert ann.read_text() == lab.read_text()
    assert stat.S_IMODE(ann.stat().st_mode) == 0o600 and stat.S_IMODE(ann.parent.stat().st_mode) == 0o700
    assert hub_files.release(lab, homes, state) == [f"unchanged {ann}", f"unchanged {ben}"]
    ann.write_text('{"cells": ["my work"]}')  # Ann saved her work
    lab.write_text('{"cells": ["fixed"]}')  # the instructor fixed the lab and releases it again
    report = hub_files.release(lab, homes, state)
    assert report[0].startswith("kept") and "student's own" in report[0] and report[1] == f"replaced {ben}"
    assert "my work" in ann.read_text() and "fixed" in ben.read_text()


def test_links_in_a_home_are_never_followed(homes, lab, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (homes[0].home / "labs").symlink_to(elsewhere)  # ~/labs -> a folder the student may not write
    secret = tmp_path / "secret.ipynb"
    secret.write_text("secret")
    (homes[1].home / "labs").mkdir()
    (homes[1].home / "labs" / lab.name).symlink_to(secret)  # ~/labs/LAB.ipynb -> someone else's file
    report = hub_files.release(lab, homes[:1], tmp_path / "state")
    assert report[0].startswith("skipped ann") and "is not a folder" in report[0], report
    assert list(elsewhere.iterdir()) == []
    assert hub_files.release(lab, homes[1:], tmp_path / "state")[0].startswith("kept")
    assert secret.read_text() == "secret"
    report = hub_files.collect(LAB, homes, tmp_path / "out")
    assert report[0].startswith("not collected") and report[1].startswith("not collected"), report
    assert not (tmp_path / "out").exists()


def test_collect_uses_the_graders_folder_layout(homes, lab, tmp_path: Path) -> None:
    hub_files.release(lab, homes[:1], tmp_path / "state")
    out = tmp_path / "out"
    report = hub_files.collect(LAB, homes, out)
    assert report[0].startswith("collected") and report[1].startswith("nothing to collect for ben"), report
    assert (out / "ann" / f"{LAB}.ipynb").read_text() == lab.read_text()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == ["ann", f"ann/{LAB}.ipynb"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_someone_else_owns_is_not_collected(homes, lab, tmp_path: Path) -> None:
    hub_files.release(lab, homes[:1], tmp_path / "state")
    os.chown(homes[0].home / "labs" / lab.name, 4242, 4242)
    assert "does not belong to ann" in hub_files.collect(LAB, homes[:1], tmp_path / "out")[0]


def test_return_gives_each_student_their_own_feedback(homes, lab, tmp_path: Path) -> None:
    grades, state = tmp_path / "grades", tmp_path / "state"
    with pytest.raises(InputError, match="no gradebook.csv"):
        hub_files.give_back(LAB, homes, grades, state)
    (grades / "feedback").mkdir(parents=True)
    (grades / "gradebook.csv").write_text("student,lab\n")
    hub_files.feedback_file(grades, "ann", LAB).write_text("ann: 4 / 4")
    report = hub_files.give_back(LAB, homes, grades, state)
    assert report[0].startswith("wrote") and report[1].startswith("no feedback for ben"), report
    mine = homes[0].home / "feedback" / f"{LAB}.md"
    assert mine.read_text() == "ann: 4 / 4" and not (homes[1].home / "feedback").exists()
    mine.write_text("ann's notes")  # Ann wrote into it: a second return keeps it
    hub_files.feedback_file(grades, "ann", LAB).write_text("ann: 5 / 5")
    assert hub_files.give_back(LAB, homes[:1], grades, state)[0].startswith("kept")
    assert mine.read_text() == "ann's notes"


@pytest.mark.parametrize("argv, says", [
    (["hub", "dance"], "unknown hub command 'dance'"),
    (["hub", "release", "lab99_nothing", "--students", "ann"], "unknown lab 'lab99_nothing'"),
    (["hub", "release", LAB, "--students", "Robert'); DROP"], "not a plain system user name"),
    (["hub", "release", LAB], "no students given"),
    (["hub", "release", LAB, "--students", "gich_nobody_here"], "no system user 'gich_nobody_here'"),
    (["hub", "return", LAB, "--students", "root", "--grades", "x"], "'root' is root, not a student"),
])
def test_bad_input_is_one_line(argv: list[str], says: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_collect_refuses_a_folder_it_did_not_write(tmp_path: Path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["hub", "collect", LAB, "--students", "ann", "--out", str(tmp_path)]) == 2
    assert (tmp_path / "notes.txt").read_text() == "mine"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path) in err and "no system user" not in err, err


def test_setup_copies_the_release_without_keys_and_protect_closes_the_checkout(tmp_path: Path) -> None:
    course = hub.setup(tmp_path / "hub", cache=None)
    assert (course / "helpers" / "__init__.py").is_file() and (course / "labs" / f"{LAB}.ipynb").is_file()
    assert release.problems(course) == [] and not (course / "solutions").exists()
    assert stat.S_IMODE((tmp_path / "hub" / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE((course / "helpers" / "__init__.py").stat().st_mode) == 0o644
    checkout = tmp_path / "checkout"
    (checkout / "solutions").mkdir(parents=True)
    (checkout / "README.md").write_text("x")
    os.chmod(checkout / "README.md", 0o644)
    changed = hub.protect(checkout)
    assert sorted(p.name for p, _ in changed) == ["README.md", "solutions"]
    assert stat.S_IMODE((checkout / "solutions").stat().st_mode) == 0o700
    assert stat.S_IMODE((checkout / "README.md").stat().st_mode) == 0o600
    assert hub.protect(checkout) == []


def test_serve_refuses_without_root_and_with_open_homes(homes, monkeypatch, capsys) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["hub", "serve", "--students", "ann"]) == 2
    assert "needs root" in capsys.readouterr().err
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(hub_files, "accounts", lambda names: homes)
    os.chmod(homes[0].home, 0o755)
    assert main(["hub", "serve", "--students", "ann,ben"]) == 2
    assert f"chmod 700 {homes[0].home}" in capsys.readouterr().err


def test_a_closed_folder_above_pythons_path_is_named(tmp_path: Path) -> None:
    inner = tmp_path / "closed" / "venv" / "bin"
    inner.mkdir(parents=True)
    os.chmod(tmp_path / "closed", 0o700)
    first = hub.closed_folder(inner / "python")  # the closed one, or a closed folder above tmp_path
    assert first == tmp_path / "closed" or first in tmp_path.parents
    os.chmod(tmp_path / "closed", 0o711)
    assert hub.closed_folder(inner / "python") != tmp_path / "closed"


def test_setup_refuses_a_folder_that_is_not_a_hubs(tmp_path: Path) -> None:
    (tmp_path / "photos").mkdir()
    os.chmod(tmp_path, 0o700)
    with pytest.raises(InputError, match="holds other things"):
        hub.setup(tmp_path)
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700
