"""A refusal decides before it reads: grade's --out (and every command's output folder) is refused on the
names of the files in it, without reading them (every file under a 7 GB home folder was read first, 58 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.grading import LAB, student_nb, write_nb, write_solution

from helpers import cli
from instructors.batch.grade import main


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file the output contract reads (its digest), recorded."""
    seen: list[Path] = []
    digest = cli.digest

    def counting(path: Path) -> str:
        seen.append(path)
        return digest(path)

    monkeypatch.setattr(cli, "digest", counting)
    return seen


def test_a_folder_of_yours_is_refused_without_reading_its_files(tmp_path: Path, read: list[Path], capsys) -> None:
    home = tmp_path / "home"
    for k in range(200):
        (home / f"d{k % 7}").mkdir(parents=True, exist_ok=True)
        (home / f"d{k % 7}" / f"photo{k}.raw").write_bytes(b"x" * 1000)
    sols = write_solution(tmp_path / "solutions").parent
    nb = write_nb(tmp_path / "subs" / f"{LAB}__a.ipynb", student_nb())
    (home / "manual.csv").write_text("submission,question,max_points,points\nx,y,1,lots\n", encoding="utf-8")
    assert main([str(nb), "--solutions", str(sols), "--out", str(home)]) == 2
    err = capsys.readouterr().err
    assert "holds files" in err and "line 2" not in err  # refused as a folder of yours: its manual.csv unread
    assert read == []


def test_a_sealed_folder_reads_only_its_own_files_before_refusing_a_foreign_one(tmp_path: Path,
                                                                                  read: list[Path]) -> None:
    out = tmp_path / "out"
    with cli.output_dir(out, "some command"):
        (out / "mine.txt").write_text("written by the command", encoding="utf-8")
    (out / "yours.txt").write_text("added by you", encoding="utf-8")
    read.clear()
    with pytest.raises(cli.InputError, match="yours.txt"):
        cli.check_output_dir(out, "some command")
    assert [p.name for p in read] in ([], ["mine.txt"])  # never the file it did not write
