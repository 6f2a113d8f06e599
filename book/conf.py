"""Sphinx configuration of the workbook as a book (``make book``).

The sources are written by ``scripts/nbtool.py book``: the executed notebooks
and a front page with the workbook map. Nothing here needs the internet to
build: the theme's assets ship with ``sphinx-book-theme``, the notebooks are
not executed again (``nb_execution_mode = "off"``), and search is Sphinx's own
offline index.
"""

import tomllib
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
with open(_ROOT / "pyproject.toml", "rb") as f:
    _REPOSITORY = tomllib.load(f)["project"]["urls"]["Repository"]

project = "distsim workbook"
author = "the distsim team"
html_title = "distsim: learn tf.distribute by predicting, running and comparing"
extensions = ["myst_nb"]
myst_enable_extensions = ["dollarmath", "amsmath"]
nb_execution_mode = "off"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_theme = "sphinx_book_theme"
html_theme_options = {
    "repository_url": _REPOSITORY,
    "path_to_docs": "notebooks",
    "use_repository_button": True,
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "show_toc_level": 2,
}
# A figure's PNG is already in the notebook; no math from a CDN is needed to read the pages' text.
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]
