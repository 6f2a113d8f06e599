"""``make book``: the front page maps every notebook, and no page shows TensorFlow's start-up noise.

The book is built here from the committed notebooks (``make book`` uses the fully
executed copies, which take ~10 minutes to make); the sources step, the Sphinx
configuration and the theme are the same.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from distsim.real.env import STARTUP_NOISE

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def _nbtool():
    spec = importlib.util.spec_from_file_location("nbtool", ROOT / "scripts" / "nbtool.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    src, out = tmp_path_factory.mktemp("book-src"), tmp_path_factory.mktemp("book")
    _nbtool().write_book_sources(NOTEBOOKS, src / "none-executed", src)
    done = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", "-c", str(ROOT / "book"),
                           str(src), str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_front_page_links_every_notebook_with_its_title_and_goals(book):
    page = (book / "index.html").read_text()
    for path in NOTEBOOKS:
        assert f'href="{path.stem}.html"' in page, path.name
        title = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0].lstrip("# ")
        first_word = re.sub(r"[*`_]", "", title).split()[0]
        assert first_word in page, (path.name, first_word)
    assert page.count("<ol") >= len(NOTEBOOKS), "each notebook's learning goals are a numbered list"


def test_the_book_has_search_and_navigation(book):
    assert (book / "search.html").exists() and (book / "searchindex.js").exists()
    page = (book / "04_mirrored_strategy.html").read_text()
    assert 'href="05_multi_worker_and_tf_config.html"' in page, "the sidebar links the other notebooks"


def test_no_page_shows_tensorflow_start_up_noise(book):
    pages = sorted(book.glob("*.html"))
    assert len(pages) > len(NOTEBOOKS)
    noisy = {p.name: m for p in pages for m in STARTUP_NOISE if m in p.read_text()}
    assert noisy == {}


def test_the_map_entry_is_the_title_first_sentence_and_goals():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "# Ten: a title\n\n[![Open In Colab](https://x/badge.svg)](https://x/nb)\n\n"
        "First sentence here. Second sentence.\n\nIn this notebook you will learn to:\n\n1. one;\n2. two.")])
    entry = _nbtool().notebook_map_entry(nb, "10_ten")
    assert entry == "### [Ten: a title](10_ten.ipynb)\n\nFirst sentence here.\n\n1. one;\n2. two.\n"
