"""A static HTML site of the course, built offline from the committed notebooks and the stored
reference results (nothing is executed, nothing is downloaded).

    python -m helpers.tools.site [--out artifacts/site]

Each chapter page is the notebook rendered by nbconvert, followed by the stored reference results
that notebook recorded (reference/h200 and reference/cpu), labelled with device and date.
--out must be new, empty, or an earlier site holding only the files it wrote, unchanged (its marker
.workbook-output lists them): anything else is refused before any page is rendered, never overwritten.

Serves: tooling — `make site` (the static course site).
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from helpers import cli
from helpers.errors import InputError, require_package
from helpers.reference import ROOT, SOURCES, TARGETS_BY_NAME, load

SECTIONS = (("notebooks", "Chapters"), ("labs", "Labs"))
PROG = "python -m helpers.tools.site"
INSTEAD = "a new or empty folder, e.g. --out artifacts/site"  # what a refusal tells the user to pass
STYLE = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem}"
         ".missing{color:#777}")


@dataclass(frozen=True)
class Page:
    """One notebook and where its page goes."""

    source: Path
    section: str
    title: str

    @property
    def href(self) -> str:
        """The page's path relative to the site root."""
        return f"{self.section}/{self.source.stem}.html"


def notebook_title(path: Path) -> str:
    """The first markdown heading of a notebook, or its file name."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return path.stem


def pages(root: Path = ROOT) -> list[Page]:
    """Every chapter and lab notebook, in file-name order."""
    return [Page(p, folder, notebook_title(p))
            for folder, _ in SECTIONS for p in sorted((root / folder).glob("*.ipynb"))]


def results_html(notebook: str) -> str:
    """The stored records of one notebook as an HTML table (or a note that there are none yet)."""
    rows = []
    for source in SOURCES:
        for r in load(source):
            if r.notebook == notebook:
                t = TARGETS_BY_NAME.get(r.name)
                target = f"{t.op} {t.value:g}" if t and t.value is not None else ""
                rows.append(f"<tr><td>{html.escape(r.name)}</td><td>{r.value:.4g} "
                            f"{html.escape(r.unit)}</td><td>{html.escape(r.device)}, {r.date}</td>"
                            f"<td>{target}</td></tr>")
    if not rows:
        return ('<p class="missing">No stored reference results for this notebook yet '
                "(the GPU reference run writes them to reference/h200/results.json).</p>")
    head = "<tr><th>measurement</th><th>value</th><th>device, date</th><th>target</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def render(page: Page) -> str:
    """One notebook as a standalone HTML page with its stored results appended."""
    nbconvert = require_package("nbconvert", "pip install nbconvert", "it renders notebooks")
    nbformat = require_package("nbformat", "pip install nbformat")
    body, _ = nbconvert.HTMLExporter(template_name="lab").from_notebook_node(
        nbformat.read(page.source, as_version=4))
    extra = (f'<section style="max-width:60rem;margin:2rem auto;padding:0 1rem;'
             f'font-family:system-ui,sans-serif">'
             f"<h2>Stored reference results</h2>{results_html(page.source.stem)}"
             f'<p><a href="../index.html">← all chapters</a></p></section>')
    return body.replace("</body>", extra + "</body>", 1)


def index_html(all_pages: list[Page]) -> str:
    """The front page: chapters and labs, linked."""
    parts = [f"<!doctype html><meta charset='utf-8'><title>GPU inference and INT8 quantization"
             f"</title><style>{STYLE}</style><h1>GPU inference acceleration and INT8 "
             "quantization</h1><p>Rendered from the committed notebooks, without running them. "
             "Measured numbers are the stored reference results, labelled with device and date."
             "</p>"]
    for folder, heading in SECTIONS:
        items = [f'<li><a href="{p.href}">{html.escape(p.title)}</a></li>'
                 for p in all_pages if p.section == folder]
        parts.append(f"<h2>{heading}</h2><ul>{''.join(items)}</ul>")
    return "".join(parts)


def build(out: Path, root: Path = ROOT) -> list[Path]:
    """Write the site under `out`; return the written pages (index first)."""
    all_pages = pages(root)
    if not all_pages:
        raise InputError(f"no notebooks under {root}/notebooks or {root}/labs to build a site from. "
                         "Run it from a checkout of the course.")
    with cli.output_dir(out, PROG, instead=INSTEAD):
        written = [out / "index.html"]
        written[0].write_text(index_html(all_pages), encoding="utf-8")
        for page in all_pages:
            path = out / page.href
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(page), encoding="utf-8")
            written.append(path)
    return written


def _command(argv: list[str]) -> int:
    """Build the site."""
    parser = cli.Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "site")
    args = parser.parse_args(argv)
    written = build(args.out)
    print(f"wrote {len(written)} pages; open {written[0]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: build the site; bad input is one line on stderr and exit status 2."""
    return cli.run(_command, argv)


if __name__ == "__main__":
    sys.exit(main())
