"""Read a class roster: which names and LMS ids belong to which student.

A roster is a CSV file with a header row: one column of student ids (``student``, ``id``,
``student_id``, ``sis_id``) and one or more columns of names or ids that appear in submissions
(``alias``, ``name``, ``login``, ``email``, ``username``, ``lms_id``, ``canvas_id``, ``moodle_id``,
``from``). The separator (comma, semicolon or tab) is sniffed; the encoding is UTF-8, UTF-8 with a
byte-order mark, Windows-1252 (Excel's plain "CSV" on Windows: ``O’Brien``) or Latin-1, told apart by the bytes. A roster that is not
exactly that (no header, an unterminated quote, one name given to two students, a student id that is
another student's name, an empty id) is refused with one line that names the line and the fix.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from helpers.errors import InputError

ID_COLUMNS = ("student", "id", "student_id", "sis_id", "to")
ALIAS_COLUMNS = ("alias", "name", "login", "email", "username", "user", "lms_id", "canvas_id", "moodle_id", "from")
DELIMITERS = ",;\t"


def decode(data: bytes, where: Path) -> tuple[str, str]:
    """(text, encoding name) of a roster's bytes: UTF-8 with BOM, UTF-8, Windows-1252, or Latin-1."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="strict"), "UTF-8 with BOM"
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError(f"roster {where} is UTF-16; save it as CSV UTF-8 (Excel: 'CSV UTF-8 (Comma delimited)').")
    try:
        return data.decode("utf-8"), "UTF-8"
    except UnicodeDecodeError:
        pass
    try:  # Excel's plain "CSV" on Windows: curly quotes and dashes (O’Brien) are bytes 0x80-0x9F there
        return data.decode("cp1252"), "Windows-1252"
    except UnicodeDecodeError:  # the five bytes Windows-1252 leaves undefined
        return data.decode("latin-1"), "Latin-1"


def _dialect(text: str, where: Path) -> type[csv.Dialect] | csv.Dialect:
    """The CSV dialect of the roster, sniffed from its first lines (comma, semicolon or tab)."""
    sample = "\n".join(text.splitlines()[:20])
    try:
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS)
    except csv.Error:
        raise InputError(f"roster {where}: cannot tell its columns apart; separate them with a comma, a semicolon "
                         f"or a tab, with a header row such as 'alias,student'.") from None


def _columns(header: list[str], where: Path) -> tuple[int, list[int]]:
    """(index of the student id column, indexes of the alias columns) from the header row."""
    names = [h.strip().lower() for h in header]
    ids = [i for i, n in enumerate(names) if n in ID_COLUMNS]
    aliases = [i for i, n in enumerate(names) if n in ALIAS_COLUMNS]
    if len(ids) != 1 or not aliases:
        raise InputError(f"roster {where}: its first row must be a header with one student id column "
                         f"({'/'.join(ID_COLUMNS[:4])}) and at least one name column ({'/'.join(ALIAS_COLUMNS[:5])} ...); "
                         f"got {', '.join(map(repr, header))}. Add a header row such as 'alias,student'.")
    return ids[0], aliases


def parse(text: str, where: Path) -> dict[str, str]:
    """alias (lower case) -> student id, validated (see the module docstring)."""
    if not text.strip():
        raise InputError(f"roster {where} is empty. Give a header row such as 'alias,student' and one row a name.")
    reader = csv.reader(io.StringIO(text, newline=""), _dialect(text, where), strict=True)
    try:
        rows = list(reader)
    except csv.Error as err:
        raise InputError(f"roster {where}, line {reader.line_num}: {err} (an unterminated quote?). Close the "
                         f"quote or remove it.") from None
    rows = [(n, r) for n, r in enumerate(rows, 1) if any(c.strip() for c in r)]
    if not rows:
        raise InputError(f"roster {where} is empty. Give a header row such as 'alias,student' and one row a name.")
    sid, aliases = _columns(rows[0][1], where)
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for n, row in rows[1:]:
        if any("\n" in c or "\r" in c for c in row):
            raise InputError(f"roster {where}, line {n}: a field holds a line break (a stray quote?). Fix that line.")
        student = row[sid].strip() if sid < len(row) else ""
        if not student:
            raise InputError(f"roster {where}, line {n}: no student id in column {sid + 1}. Fill it in or delete the row.")
        for a in aliases:
            alias = row[a].strip().lower() if a < len(row) else ""
            if not alias:
                continue
            if out.get(alias, student) != student:
                raise InputError(f"roster {where}, line {n}: {row[a].strip()!r} is given to two students, "
                                 f"{out[alias]!r} (line {first[alias]}) and {student!r}. Give each name one student.")
            out[alias], first[alias] = student, first.get(alias, n)
    ids = {s.strip().lower(): s for s in out.values()}
    for alias, student in out.items():
        if alias in ids and ids[alias] != student:
            raise InputError(f"roster {where}: {alias!r} is the id of student {ids[alias]!r} and a name of "
                             f"{student!r}. Give each name one student.")
    return out


def read_roster(path: str | Path | None) -> dict[str, str]:
    """alias (lower case) -> student from a roster file ({} when there is none)."""
    if path is None:
        return {}
    p = Path(path)
    if not p.is_file():
        raise InputError(f"roster {p} does not exist. Pass a CSV with a header row such as 'alias,student'.")
    text, _ = decode(p.read_bytes(), p)
    return parse(text, p)
