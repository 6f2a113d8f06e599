"""``scripts/nbtool.py check``: the house rules of issue 23, each broken by a small synthetic notebook.

The synthetic notebook is built here from the rules' own text (title, goals, badge, setup cell, exercises,
common errors, next steps), so a notebook that follows them passes and each one that breaks one rule fails with
a message naming it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = "99_synthetic.ipynb"   # not a strategy notebook, so no TensorFlow exercise is required


@pytest.fixture(scope="module")
def nbtool():
    spec = importlib.util.spec_from_file_location("nbtool", ROOT / "scripts" / "nbtool.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _notebook(nbtool, extra_markdown_chars: int = 0, checked_count: int | None = 1, checked_outputs=True):
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    checked = code("# NBVAL_CHECK_OUTPUT\nprint(1)", execution_count=checked_count)
    if checked_outputs:
        checked.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    cells = [
        md(f"# A synthetic notebook\n\n{nbtool.badge(nbtool.repository_url(), NAME)}\n\nIn this notebook you will learn."),
        code(nbtool.setup_cell_source(nbtool.repository_url())),
        checked,
        md("## Exercise 1: one"),
        md("## Exercise 2: two"),
        md("## Common errors\n\nNone."),
        md("## Next steps\n\n" + "x" * extra_markdown_chars),
    ]
    return nbformat.v4.new_notebook(cells=cells)


def _check(nbtool, nb, tmp_path) -> list[str]:
    path = tmp_path / NAME
    nbformat.write(nb, path)
    return nbtool.check(path)


def test_a_notebook_that_follows_the_rules_passes(nbtool, tmp_path):
    assert _check(nbtool, _notebook(nbtool), tmp_path) == []


def test_markdown_over_ten_thousand_characters_fails(nbtool, tmp_path):
    nb = _notebook(nbtool)
    room = 10_000 - sum(len(c.source) for c in nb.cells if c.cell_type == "markdown")   # counted by hand here
    assert _check(nbtool, _notebook(nbtool, extra_markdown_chars=room), tmp_path) == []   # exactly at the budget
    problems = _check(nbtool, _notebook(nbtool, extra_markdown_chars=room + 1), tmp_path)
    assert problems == [f"{NAME}: markdown is 10,001 characters, over the budget of 10,000"]


def test_a_checked_cell_without_execution_count_fails(nbtool, tmp_path):
    problems = _check(nbtool, _notebook(nbtool, checked_count=None), tmp_path)
    assert problems == [f"{NAME}: cell 2 is marked # NBVAL_CHECK_OUTPUT but has no execution count (nbval skips it)"]


def test_a_checked_cell_without_stored_outputs_fails(nbtool, tmp_path):
    problems = _check(nbtool, _notebook(nbtool, checked_outputs=False), tmp_path)
    assert problems == [f"{NAME}: cell 2 is marked # NBVAL_CHECK_OUTPUT but has no stored outputs"]


def test_a_link_out_of_the_notebooks_folder_fails(nbtool, tmp_path):
    nb = _notebook(nbtool)
    nb.cells[-1].source += "\n\nSee [the evidence](../data/measurements/README.md) and [04](04_mirrored_strategy.ipynb)."
    problems = _check(nbtool, nb, tmp_path)
    assert problems == [f"{NAME}: cell 6 links ../data/measurements/README.md, outside notebooks/ (the book cannot "
                        "follow it): name the file in backticks"]
