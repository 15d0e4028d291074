"""The course site builds offline from the committed notebooks: an index linking every chapter
and lab, and one page per notebook ending with its stored reference results."""

from __future__ import annotations

import re

import pytest

from helpers.tools import site
from helpers.errors import InputError
from helpers.reference import ROOT


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The site, built once into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    expected = {(nb.parent.name, nb.stem) for f in ("notebooks", "labs")
                for nb in (ROOT / f).glob("*.ipynb")}
    return out, site.build(out), expected


def test_every_chapter_and_lab_has_a_page(built):
    out, written, expected = built
    assert expected, "no notebooks found"
    for folder, stem in sorted(expected):
        page = out / folder / f"{stem}.html"
        assert page in written and page.stat().st_size > 1000, f"no page for {folder}/{stem}"


def test_index_links_every_page_with_its_title(built):
    out, written, _ = built
    index = (out / "index.html").read_text(encoding="utf-8")
    links = set(re.findall(r'href="([^"]+)"', index))
    assert links == {p.relative_to(out).as_posix() for p in written[1:]}
    assert site.notebook_title(ROOT / "notebooks" / "05b_quantization_explorer.ipynb") in index


def test_pages_carry_code_and_the_stored_results_section(built):
    out, _, _ = built
    page = (out / "notebooks" / "05b_quantization_explorer.html").read_text(encoding="utf-8")
    assert "quantization_explorer" in page
    assert "Stored reference results" in page


def test_results_html_says_when_nothing_is_stored():
    assert "No stored reference results" in site.results_html("no_such_notebook")


def test_empty_tree_is_refused(tmp_path):
    with pytest.raises(InputError, match="no notebooks"):
        site.build(tmp_path / "out", root=tmp_path)
