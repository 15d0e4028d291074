"""Which notebooks the reference run executes, and their measurement names against the stored references.

Serves: tooling — `make gpu-report` (the reference run) and `make test` (name check).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from helpers import bench
from helpers.reference import ROOT

FOLDERS = ("notebooks", "solutions")


def course_notebooks(pattern: str | None = None) -> list[Path]:
    """Notebooks in course order (notebooks/ then solutions/), optionally filtered by a glob."""
    found = [p for f in FOLDERS for p in sorted((ROOT / f).glob("*.ipynb"))]
    if pattern:
        found = [p for p in found if fnmatch.fnmatch(p.name, pattern)]
    return found


def check_names(records_file: Path, source: str = "cpu") -> list[str]:
    """Problems between the names a CPU run recorded and the stored reference of `source`."""
    from helpers.reference import load

    if not records_file.exists():
        return [f"no notebook recorded anything: {records_file} was not written (is WORKBOOK_RESULTS absolute?)"]
    ran = {r.name for r in bench.load_records(records_file)}
    held = load(source)
    if not held:
        return [f"reference/{source}/results.json holds no measurements"]
    # only notebooks' records: other commands (`make test`'s suite time, the fresh-clone timer) store their own
    notebooks = {p.stem for p in course_notebooks()}
    stored = {r.name for r in held if r.notebook in notebooks}
    problems = [f"recorded by a notebook but not in reference/{source}: {n}" for n in sorted(ran - stored)]
    problems += [f"in reference/{source} but no notebook recorded it: {n}" for n in sorted(stored - ran)]
    return problems


NAME_PREFIXES = ("ch0", "ch1", "copy.", "transpose.", "gemm.", "bert_base.", "resnet50.", "ort_cpu.", "ptq.", "qat.",
                 "suite.")
_NAME = re.compile(r"""(?<!name=)["']([a-z0-9_]+(?:\.[a-z0-9_]+)+)["']""")  # name=... is a figure's name
# Recorded only when it exists: the batch from which the GPU overtakes the CPU, if it does in the range.
OPTIONAL_NAMES = frozenset({"ch01.tiny_mlp.crossover_batch"})


def shown_names(path: Path) -> set[str]:
    """Measurement names written out as string literals in a notebook's code (shown, looked up or recorded)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    return {n for n in _NAME.findall(code) if n.startswith(NAME_PREFIXES)}


def claim_ids() -> set[str]:
    """Ids of the lecture-note claims every chapter registers (they look like measurement names, but are not)."""
    import importlib
    import pkgutil

    import helpers.chapters
    from helpers import claims

    for m in pkgutil.walk_packages(helpers.chapters.__path__, "helpers.chapters."):
        if m.name.rsplit(".", 1)[-1] in ("notes", "claims"):
            importlib.import_module(m.name)
    return {c.id for c in claims.registered()}


def check_shown_names(paths: list[Path] | None = None) -> list[str]:
    """Names (or name prefixes) a notebook spells out that no stored reference (a card's or the CPU's) holds."""
    from helpers.reference import SOURCES, load

    stored = {r.name for src in SOURCES for r in load(src)} | claim_ids()

    def held(n: str) -> bool:
        """A stored name, an optional one, or the prefix of stored names (record_curves adds `_label.x`)."""
        return n in stored or n in OPTIONAL_NAMES or any(s.startswith((n + ".", n + "_")) for s in stored)

    return [f"{p.relative_to(ROOT)} names {n}, which no stored reference holds"
            for p in (course_notebooks() if paths is None else paths) for n in sorted(shown_names(p)) if not held(n)]


# Declared names that no stored run holds yet, each with what stores it. An entry whose name a stored run now holds
# is itself a problem (remove it), so this list only shrinks as reference runs land.
AWAITING: dict[str, str] = {  # declared, not yet in a stored run: {name: what will store it}
}


def declared_names() -> dict[str, str]:
    """{name or name prefix: what declares it} for every Table the chapters declare and every headline Metric."""
    import importlib
    import pkgutil

    import helpers.chapters
    from helpers import experiment, metrics

    for m in pkgutil.walk_packages(helpers.chapters.__path__, "helpers.chapters."):
        importlib.import_module(m.name)
    out = {t.prefix: "table" for t in experiment.DECLARED if not t.prefix.startswith("test.")}
    out.update({m.name: "headline" for m in metrics.HEADLINES})
    return out


def check_declared_names(declared: dict[str, str] | None = None, awaiting: dict[str, str] | None = None) -> list[str]:
    """Declared Tables (by prefix) and headline Metrics that no stored reference holds and that AWAITING does not
    explain, and AWAITING entries a stored run now holds."""
    from helpers.reference import SOURCES, load

    declared = declared_names() if declared is None else declared
    awaiting = AWAITING if awaiting is None else awaiting
    stored = {r.name for src in SOURCES for r in load(src)}

    def held(name: str, kind: str) -> bool:
        return name in stored if kind == "headline" else any(s.startswith(name + ".") for s in stored)

    problems = [f"the {kind} {n} is declared but no stored reference holds it (run what measures it, or add it to "
                "report_names.AWAITING saying what will)" for n, kind in sorted(declared.items())
                if not held(n, kind) and n not in awaiting]
    problems += [f"report_names.AWAITING lists {n}, which a stored run now holds: remove it" for n in sorted(awaiting)
                 if n in declared and held(n, declared[n])]
    problems += [f"report_names.AWAITING lists {n}, which nothing declares" for n in sorted(awaiting)
                 if n not in declared]
    return problems
