"""helpers.cli's output contract, function by function: a command writes only into what is new, empty or
its own (the marker's files, unchanged), never into the course, an input or a repository, and replaces a
file only by writing beside and renaming it, with the old file's mode kept."""

from __future__ import annotations

import argparse
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from helpers import cli
from helpers.errors import InputError

CMD, OTHER = "python -m tool", "python -m other"


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (its marker included), by relative path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(out: Path, files: dict[str, str], **claim) -> Path:
    """One complete run of CMD into `out` that writes `files`."""
    with cli.output_dir(out, CMD, **claim) as folder:
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
    return out


def test_a_new_folder_is_created_marked_and_sealed_with_what_was_written(tmp_path):
    out = _run(tmp_path / "new" / "out", {"a.txt": "1", "sub/b.txt": "2"})
    section = cli.read_marker(out)[CMD]
    assert section["sealed"] and set(section["files"]) == {"a.txt", "sub/b.txt"} and section["dirs"] == ["sub"]
    assert section["files"]["a.txt"] == cli.digest(out / "a.txt")


def test_a_rerun_clears_only_its_own_files(tmp_path):
    out = _run(tmp_path / "out", {"a.txt": "1", "sub/b.txt": "2"})
    (out / "empty").mkdir()  # a folder holding nothing is nobody's loss, and it stays
    _run(out, {"c.txt": "3"})
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [cli.MARKER, "c.txt", "empty"]


@pytest.mark.parametrize("change", ["added", "edited", "symlink"])
def test_a_file_the_command_did_not_write_is_refused_and_kept(tmp_path, change):
    out = _run(tmp_path / "out", {"a.txt": "1"})
    if change == "added":
        (out / "notes.txt").write_text("mine")
    elif change == "edited":
        (out / "a.txt").write_text("my edit")
    else:
        (out / "link").symlink_to(tmp_path)
    before = _tree(out)
    with pytest.raises(InputError, match="did not write") as err:
        _run(out, {"a.txt": "new"})
    assert str(out) in str(err.value) and "Pass a new or empty folder" in str(err.value)
    assert _tree(out) == before


def test_an_unmarked_folder_with_files_is_refused_and_an_empty_one_is_taken(tmp_path):
    (tmp_path / "user" / "figures").mkdir(parents=True)
    (tmp_path / "user" / "figures" / "plot.png").write_bytes(b"png")
    with pytest.raises(InputError, match=r"did not write \(figures/plot.png\)"):
        cli.check_output_dir(tmp_path / "user", CMD)
    (tmp_path / "empty" / "nested").mkdir(parents=True)
    assert cli.check_output_dir(tmp_path / "empty", CMD) is None


def test_another_commands_folder_is_refused_naming_its_owner(tmp_path):
    with cli.output_dir(tmp_path / "out", OTHER) as out:
        (out / "index.html").write_text("x")
    with pytest.raises(InputError, match=f"it is the output of {OTHER}"):
        cli.check_output_dir(out, CMD)


def test_an_unfinished_run_is_refused_unless_the_command_keeps_adding(tmp_path):
    out = cli.claim_output_dir(tmp_path / "out", CMD)  # killed before sealing: its files are unlisted
    (out / "half.txt").write_text("x")
    with pytest.raises(InputError, match="did not record what it wrote"):
        cli.check_output_dir(out, CMD)
    assert cli.claim_output_dir(out, CMD, keep=True) == out and (out / "half.txt").read_text() == "x"


def test_an_interrupted_run_is_still_sealed(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with cli.output_dir(tmp_path / "out", CMD) as out:
            (out / "a.txt").write_text("1")
            raise KeyboardInterrupt
    assert set(cli.read_marker(out)[CMD]["files"]) == {"a.txt"}
    _run(out, {"b.txt": "2"})
    assert not (out / "a.txt").exists()


def test_the_first_versions_one_line_marker_is_not_trusted(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / cli.MARKER).write_text(f"Written by {CMD}; it may clear this folder on its next run.\n")
    (out / "summary.md").write_text("whose?")
    with pytest.raises(InputError, match="cannot be told from files of yours"):
        cli.check_output_dir(out, CMD)


@pytest.mark.parametrize("where", ["", "solutions", "labs", "notebooks", "reference", "helpers", ".git",
                                   "helpers/grading", "instructors/keys", "solutions/new"])
def test_the_course_and_its_folders_are_refused(where):
    target = cli.COURSE / where if where else cli.COURSE
    with pytest.raises(InputError, match="commands never write there"):
        cli.check_output_dir(target, CMD)
    with pytest.raises(InputError, match="commands never write there"):
        cli.check_output_file(target / "x.json", CMD)


def test_a_new_folder_inside_the_course_but_outside_its_folders_is_allowed():
    assert cli.course_place(cli.COURSE / "artifacts" / "report") is None
    assert cli.course_place(cli.COURSE / "solutions" / "x") == "inside the course's solutions/ folder"


def test_a_repository_and_an_input_are_refused(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    with pytest.raises(InputError, match="holds a .git"):
        cli.check_output_dir(tmp_path / "repo", CMD)
    with pytest.raises(InputError, match="holds a .git"):
        cli.check_output_file(tmp_path / "repo" / "m.onnx", CMD)
    (tmp_path / "subs").mkdir()
    with pytest.raises(InputError, match="an input of this command"):
        cli.check_output_dir(tmp_path / "subs" / "grades", CMD, inputs=[tmp_path / "subs"])
    (tmp_path / "m.onnx").write_bytes(b"model")
    with pytest.raises(InputError, match="an input of this command"):
        cli.check_output_file(tmp_path / "m.onnx", CMD, force=True, inputs=[tmp_path / "m.onnx"])


def test_a_symlink_to_the_course_is_seen_through(tmp_path):
    (tmp_path / "course").symlink_to(cli.COURSE)
    with pytest.raises(InputError, match="is the course folder"):
        cli.check_output_dir(tmp_path / "course", CMD)


def test_a_file_where_the_folder_should_be_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        cli.check_output_dir(tmp_path / "notes.txt", CMD)


def test_the_tarball_beside_must_be_new_or_its_own(tmp_path):
    user_tar = tmp_path / "out.tar.gz"
    user_tar.write_bytes(b"user's archive")
    with pytest.raises(InputError, match="out.tar.gz already exists"):
        cli.check_output_dir(tmp_path / "out", CMD, beside=[user_tar])
    user_tar.unlink()
    with cli.output_dir(tmp_path / "out", CMD, beside=[user_tar]) as out:
        (out / "a.txt").write_text("1")
        assert cli.tar_beside(out, CMD) == user_tar
    with tarfile.open(user_tar) as tar:
        assert sorted(tar.getnames()) == ["out", "out/a.txt"]  # the marker stays out of the archive
    cli.check_output_dir(out, CMD, beside=[user_tar])  # its own archive: may be replaced
    user_tar.write_bytes(b"edited")
    with pytest.raises(InputError, match="did not write it"):
        cli.check_output_dir(out, CMD, beside=[user_tar])


def test_an_output_file_replaces_only_its_own_file_unless_forced(tmp_path):
    target = tmp_path / "m_int8.onnx"
    target.write_bytes(b"user's model")
    with pytest.raises(InputError, match="did not write it.*--force to replace it on purpose"):
        cli.check_output_file(target, CMD)
    with pytest.raises(InputError, match="or move that file away"):
        cli.check_output_file(target, CMD, force_flag=None)
    assert target.read_bytes() == b"user's model"
    with cli.replacing(target, CMD, force=True) as tmp:
        tmp.write_bytes(b"ours")
    assert cli.owns_file(target, CMD) and cli.check_output_file(target, CMD) == target
    assert not cli.owns_file(target, OTHER)
    target.write_bytes(b"edited by hand")
    with pytest.raises(InputError, match="did not write it"):
        cli.check_output_file(target, CMD)


def test_replacing_keeps_the_mode_and_leaves_nothing_behind_on_failure(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o640)
    with pytest.raises(RuntimeError):
        with cli.replacing(target, CMD, force=True) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    with cli.replacing(target, CMD, force=True) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [cli.MARKER, "out.json"]


def test_a_new_file_gets_the_usual_mode(tmp_path):
    with cli.write_beside(tmp_path / "new.txt") as tmp:
        tmp.write_text("x")
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o666 & ~mask


def test_the_marker_keeps_every_commands_part(tmp_path):
    for command, name in ((CMD, "a.onnx"), (OTHER, "b.onnx")):
        with cli.replacing(tmp_path / name, command) as tmp:
            tmp.write_text(name)
    data = json.loads((tmp_path / cli.MARKER).read_text())["commands"]
    assert set(data[CMD]["files"]) == {"a.onnx"} and set(data[OTHER]["files"]) == {"b.onnx"}


@pytest.mark.parametrize("minimum, text, problem", [(1, "0", "must be at least 1, got 0"),
                                                     (0, "-1", "must be at least 0, got -1"),
                                                     (1, "2.5", "expected a whole number >= 1, got '2.5'")])
def test_a_whole_number_below_its_minimum_or_not_whole_is_refused(minimum, text, problem):
    with pytest.raises(argparse.ArgumentTypeError, match=problem):
        cli.whole_number(minimum)(text)


def test_a_whole_number_at_its_minimum_is_taken_and_positive_int_starts_at_one():
    assert cli.whole_number(0)("0") == 0 and cli.positive_int("1") == 1
    with pytest.raises(argparse.ArgumentTypeError):
        cli.positive_int("0")
