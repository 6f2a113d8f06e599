"""Maintenance for the workbook's notebooks (not used by the notebooks themselves).

    .venv/bin/python scripts/nbtool.py run notebooks/00_start_here.ipynb [...]
        Execute each notebook in quick mode, store the outputs of the cells marked
        ``# NBVAL_CHECK_OUTPUT`` (nbval compares exactly those) and drop all other
        outputs, so the committed files stay small. Prints the time per notebook.

    .venv/bin/python scripts/nbtool.py execute --out build/notebooks notebooks/*.ipynb
        Execute each notebook in full mode (no DISTSIM_QUICK) and write it, with
        every output, to --out; the committed notebooks are not touched. Prints
        the time per notebook and in all (``make notebooks-full``).

    .venv/bin/python scripts/nbtool.py setup notebooks/*.ipynb
        Write the canonical setup cell and Colab badge into each notebook. The
        repository URL in both comes from one place: ``[project.urls]
        Repository`` in pyproject.toml.

    .venv/bin/python scripts/nbtool.py check notebooks/*.ipynb
        Check the house rules (see RULES and WORKBOOK_RULES below).

    .venv/bin/python scripts/nbtool.py book --executed build/notebooks --out build/book-src notebooks/*.ipynb
        Write the book's sources for Sphinx (``make book``): the executed notebooks and
        index.md, the workbook map (every notebook's title, first sentence and goals).

    .venv/bin/python scripts/nbtool.py stats notebooks/*.ipynb
        Markdown size and the code cells longer than 15 lines, per notebook.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import tomllib
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"
EXERCISE_MARK = "# YOUR TENSORFLOW CODE"
LONG_CELL_LINES = 15

#: Notebooks about a strategy: each needs an exercise in which the learner writes TensorFlow.
STRATEGY_NOTEBOOKS = ("02_", "04_", "05_", "06_", "07_", "08_", "09_")


def repository_url() -> str:
    """The one place the repository URL is named: ``[project.urls] Repository`` in pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"]


#: Notebooks that use a TPU when the runtime has one: only their setup cell installs TensorFlow's TPU build.
TPU_NOTEBOOKS = ("07_",)


def uses_tpu(name: str) -> bool:
    return name.startswith(TPU_NOTEBOOKS)


def setup_cell_source(url: str, tpu: bool = False) -> str:
    return f'''# Setup: run this cell first (the same cell opens every notebook). Locally it only sets switches;
# in Colab it fetches the workbook and installs what the runtime lacks.
import os
import subprocess
import sys

REPO_URL = os.environ.get("DISTSIM_REPO_URL", "{url}")
WORKBOOK = os.environ.get("DISTSIM_WORKBOOK_DIR", "/content/distsim-workbook")  # where Colab keeps the clone
IN_COLAB = "google.colab" in sys.modules
if IN_COLAB and not (os.path.isdir(WORKBOOK)
                     or subprocess.run(["git", "clone", "-q", "--depth=1", REPO_URL, WORKBOOK]).returncode == 0):
    print(f"Could not clone {{REPO_URL}}: set os.environ['DISTSIM_REPO_URL'] to the workbook's git URL and rerun "
          f"this cell, or upload the repository as a zip and unzip it to {{WORKBOOK}}.")
elif IN_COLAB:
    os.chdir(os.path.join(WORKBOOK, "notebooks"))
    sys.path.insert(0, os.getcwd())
    import colab_runtime
    print(*colab_runtime.install_missing(tpu={tpu}), sep="\\n")  # TensorFlow and tf_keras pinned as the workbook's
REPO = os.path.dirname(os.getcwd())  # the workbook repository (notebooks run from notebooks/)
sys.path.insert(0, REPO)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))  # for subprocesses
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf_keras (Keras 2), before TensorFlow starts: see notebook 00
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # hide TensorFlow's C++ log lines
QUICK = os.environ.get("DISTSIM_QUICK") == "1"  # small data and few steps (set by `make test`)'''


def badge(url: str, notebook: str) -> str:
    colab = url.replace("https://github.com/", "https://colab.research.google.com/github/")
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab}/blob/main/notebooks/{notebook})")


BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")


def setup_index(nb) -> int | None:
    return next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "IN_COLAB" in c.source), None)


def write_setup(path: Path) -> bool:
    """Put the canonical setup cell and badge into ``path``; returns whether anything changed."""
    nb = nbformat.read(path, as_version=4)
    url = repository_url()
    before = nbformat.writes(nb)
    i = setup_index(nb)
    if i is None:
        raise ValueError(f"{path.name}: no setup cell (a code cell mentioning IN_COLAB) to replace")
    nb.cells[i].source = setup_cell_source(url, uses_tpu(path.name))
    title = nb.cells[0]
    title.source = BADGE_RE.sub(badge(url, path.name), title.source)
    if nbformat.writes(nb) == before:
        return False
    nbformat.write(nb, path)
    return True


# ---- executing -------------------------------------------------------------------------------------
def execute(nb, path: Path, timeout_s: int) -> float:
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout_s, resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def run(path: Path, timeout_s: int) -> float:
    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("DISTSIM_QUICK", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    elapsed = execute(nb, path, timeout_s)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        if CHECK_MARK not in cell.source:
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("widgets", None)  # saved widget state: large (PNG frames) and different every run
    nbformat.write(nb, path)
    return elapsed


def execute_full(path: Path, out_dir: Path, timeout_s: int, quick: bool = False) -> float:
    """Execute ``path`` (full mode unless ``quick``) and write it, outputs and all, into ``out_dir``."""
    nb = nbformat.read(path, as_version=4)
    if quick:
        os.environ["DISTSIM_QUICK"] = "1"
    else:
        os.environ.pop("DISTSIM_QUICK", None)
    os.environ.setdefault("MPLBACKEND", "Agg")
    elapsed = execute(nb, path, timeout_s)
    nb.metadata["distsim"] = {"executed_seconds": round(elapsed, 1), "mode": "quick" if quick else "full"}
    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / path.name)
    return elapsed


# ---- house rules -----------------------------------------------------------------------------------
def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _markdown(nb):
    return [c for c in nb.cells if c.cell_type == "markdown"]


#: Prose that states what one machine measured or how long it took: such numbers must come from a cell.
MACHINE_SPECIFIC = [
    (re.compile(r"\b\d+(\.\d+)?\s*(ms|µs|us|s)\s*(/|per)\s*(step|update|epoch)\b", re.I), "a time per step"),
    (re.compile(r"\b\d+(\.\d+)?\s*(updates|samples|images|steps)/s\b", re.I), "a rate"),
    (re.compile(r"\b(2|two)[- ](physical )?cores?\b|\b\d+-core\b", re.I), "this machine's core count"),
    (re.compile(r"\b\d+\.\d+\s*[×x](?![\w(])"), "a measured speedup or ratio"),
    (re.compile(r"\b(takes?|took|about|under|over)\s+(a|an|one|two|three|four|five|\d+(\.\d+)?)\s*"
                r"(minutes?|min|seconds?)\b", re.I), "a run time"),
]


def machine_specific_numbers(nb) -> list[str]:
    found = []
    for cell in _markdown(nb):
        text = re.sub(r"`[^`]*`", "", cell.source)  # code spans are code, not claims
        for pattern, what in MACHINE_SPECIFIC:
            for match in pattern.finditer(text):
                found.append(f"{what} in markdown: {match.group(0)!r}")
    return found


def writes_tensorflow(nb) -> bool:
    """An exercise cell marked for the learner's TensorFlow code, followed by a checked cell that runs it."""
    cells = _code(nb)
    for cell, check in zip(cells, cells[1:]):
        if not (cell.source.startswith(EXERCISE_MARK) and CHECK_MARK in check.source):
            continue
        defined = re.findall(r"^(?:def\s+(\w+)|(\w+)\s*=)", cell.source, re.M)
        names = {a or b for a, b in defined}
        runs_tensorflow = "tensorflow" in cell.source or "tf." in cell.source or any(k in check.source for k in ("tf.", "launch(", "run(", ".fit("))
        if runs_tensorflow and any(re.search(rf"\b{name}\b", check.source) for name in names):
            return True
    return False


def first_contact_index(nb) -> int | None:
    """The first short cell that trains MNIST with MirroredStrategy and model.fit, before any cluster code."""
    later = re.compile(r"strategy\.run\(|MultiWorkerMirrored|TF_CONFIG|ParameterServer|custom training loop")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and later.search(cell.source):
            return None
        lines = [ln for ln in cell.source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        if (cell.cell_type == "code" and "MirroredStrategy(" in cell.source and ".fit(" in cell.source
                and "mnist" in cell.source.lower() and len(lines) <= 12):
            return i
    return None


def setup_ok(nb, name: str) -> bool:
    """The first code cell is the canonical setup cell, and no other cell defines the switches."""
    defining = [c for c in _code(nb) if "IN_COLAB =" in c.source]
    return (len(defining) == 1 and defining[0] is _code(nb)[0]
            and defining[0].source == setup_cell_source(repository_url(), uses_tpu(name)))


def url_only_in_setup(nb, name: str) -> bool:
    url = repository_url()
    colab = url.replace("https://github.com/", "colab.research.google.com/github/")
    for i, cell in enumerate(nb.cells):
        text = cell.source
        if i == setup_index(nb):
            text = text.replace(f'"{url}"', "", 1)
        if i == 0:
            text = text.replace(badge(url, name), "", 1)
        if url in text or colab in text:
            return False
    return True


RULES = {
    "a title": lambda nb, name: nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "),
    "learning goals": lambda nb, name: "learn" in nb.cells[0].source.lower(),
    "its Open in Colab badge": lambda nb, name: badge(repository_url(), name) in nb.cells[0].source,
    "the canonical setup cell (nbtool setup writes it)": lambda nb, name: setup_ok(nb, name),
    "the repository URL only in the setup cell and badge": url_only_in_setup,
    "two exercises": lambda nb, name: sum("## Exercise" in c.source for c in _markdown(nb)) >= 2,
    "a common errors section": lambda nb, name: any("## Common errors" in c.source for c in _markdown(nb)),
    "next steps": lambda nb, name: any("Next steps" in c.source for c in _markdown(nb)),
    "a code-writing exercise checked by TensorFlow": lambda nb, name: (
        not name.startswith(STRATEGY_NOTEBOOKS) or writes_tensorflow(nb)),
}


def check(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    problems = [f"{path.name}: missing {rule}" for rule, ok in RULES.items() if not ok(nb, path.name)]
    problems += [f"{path.name}: {p}" for p in machine_specific_numbers(nb)]
    problems += [f"{path.name}: {p}" for p in markdown_over_budget(nb) + unchecked_check_cells(nb)]
    problems += [f"{path.name}: {p}" for p in links_out_of_the_book(nb)]
    return problems


def check_workbook(paths: list[Path]) -> list[str]:
    """Rules about the whole workbook, checked when notebooks 00 and 01 are among ``paths``."""
    by_prefix = {p.name[:2]: p for p in paths}
    if not {"00", "01"} <= set(by_prefix):
        return []
    first = {k: nbformat.read(by_prefix[k], as_version=4) for k in ("00", "01")}
    problems = []
    if all(first_contact_index(nb) is None for nb in first.values()):
        problems.append("workbook: no first-contact cell (at most 12 lines of MirroredStrategy + model.fit on "
                        "MNIST) in 00 or 01 before any cluster, strategy.run or custom-loop code")
    if not any(CHECK_MARK in c.source for c in _markdown(first["00"])):
        problems.append(f"workbook: notebook 00 never says what {CHECK_MARK} means")
    return problems


GOALS_LEAD = "In this notebook you will learn to:"


def notebook_map_entry(nb, name: str) -> str:
    """One notebook on the front page: its title (linked), the first sentence of its introduction, its goals."""
    parts = nb.cells[0].source.split("\n\n")
    title = parts[0].lstrip("# ").strip()
    prose = [part for part in parts[1:] if not BADGE_RE.search(part) and not part.startswith(GOALS_LEAD)]
    first = re.split(r"(?<=\.)\s", " ".join(prose[0].split()), maxsplit=1)[0] if prose else ""
    lead = next((i for i, part in enumerate(parts) if part.startswith(GOALS_LEAD)), None)
    goals = "" if lead is None else "\n".join(parts[lead].splitlines()[1:]) or parts[lead + 1]
    return f"### [{title}]({name}.ipynb)\n\n{first}\n\n{goals}\n"


def write_book_sources(paths: list[Path], executed_dir: Path, out_dir: Path) -> Path:
    """The book's sources in ``out_dir`` (``make book`` renders them with ``book/conf.py``): each notebook
    (the executed copy from ``executed_dir`` where there is one, else the committed file) and ``index.md``,
    the workbook map: every notebook's title, first sentence and learning goals, in order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for path in paths:
        source = executed_dir / path.name if (executed_dir / path.name).exists() else path
        nb = nbformat.read(source, as_version=4)
        nbformat.write(nb, out_dir / path.name)
        entries.append(notebook_map_entry(nb, path.stem))
    toctree = "\n".join(path.stem for path in paths)
    page = ("# distsim: learn distributed training by predicting, running and comparing\n\n"
            "Each notebook first **predicts** with the `distsim` simulator, then **runs** the same MNIST experiment "
            "on real `tf.distribute`, then puts the two **side by side**. Read them in order, or jump to the "
            "strategy you need.\n\n## The workbook map\n\n" + "\n".join(entries)
            + f"\n```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{toctree}\n```\n")
    (out_dir / "index.md").write_text(page)
    return out_dir / "index.md"


def stats(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    md = markdown_chars(nb)
    long = [len(c.source.splitlines()) for c in _code(nb) if len(c.source.splitlines()) > LONG_CELL_LINES
            and c is not nb.cells[setup_index(nb) or 0]]
    return f"{path.name:<48} markdown {md:>6} chars, code cells over {LONG_CELL_LINES} lines: {long}"


# ---- house rules of issue 23 (notebooks 00/01/08/09 helper): the markdown budget, checked cells nbval skips ----
#: Issue 23, section 3: at most this many characters of markdown per notebook (prose beyond it moves to
#: data/measurements/README.md or an appendix).
MARKDOWN_BUDGET_CHARS = 10_000


def markdown_chars(nb) -> int:
    return sum(len(c.source) for c in _markdown(nb))


def markdown_over_budget(nb) -> list[str]:
    chars = markdown_chars(nb)
    if chars <= MARKDOWN_BUDGET_CHARS:
        return []
    return [f"markdown is {chars:,} characters, over the budget of {MARKDOWN_BUDGET_CHARS:,}"]


#: A markdown link whose target climbs out of notebooks/ (``](../``): the book holds only the notebooks, so
#: Sphinx -W fails on it (myst.xref_missing); name the repository file in backticks instead.
_LINK_OUT = re.compile(r"\]\(\.\./[^)]*\)")


def links_out_of_the_book(nb) -> list[str]:
    return [f"cell {i} links {m.group(0)[2:-1]}, outside notebooks/ (the book cannot follow it): name the file in backticks"
            for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown" for m in _LINK_OUT.finditer(cell.source)]


def unchecked_check_cells(nb) -> list[str]:
    """Cells marked ``# NBVAL_CHECK_OUTPUT`` that check nothing: nbval 0.11 compares a cell's outputs only when
    the stored cell has an execution count (``nbval/plugin.py`` 760-771, ``unrun``), and skips it silently
    otherwise; a cell with no stored outputs has nothing to compare (``nbtool run`` stores both)."""
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or CHECK_MARK not in cell.source:
            continue
        if cell.get("execution_count") is None:
            problems.append(f"cell {i} is marked {CHECK_MARK} but has no execution count (nbval skips it)")
        elif not cell.get("outputs"):
            problems.append(f"cell {i} is marked {CHECK_MARK} but has no stored outputs")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["run", "execute", "setup", "check", "stats", "book"])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "notebooks", help="execute: output folder")
    parser.add_argument("--executed", type=Path, default=ROOT / "build" / "notebooks",
                        help="book: where the executed notebooks are (committed ones stand in for missing ones)")
    parser.add_argument("--quick", action="store_true", help="execute: in quick mode (for looking at the outputs)")
    args = parser.parse_args()
    problems: list[str] = []
    total = 0.0
    if args.action == "book":
        print(write_book_sources(args.notebooks, args.executed, args.out))
        return 0
    for path in args.notebooks:
        if args.action == "run":
            print(f"{path.name}: {run(path, args.timeout):.1f} s", flush=True)
        elif args.action == "execute":
            seconds = execute_full(path, args.out, args.timeout, args.quick)
            total += seconds
            print(f"{path.name}: {seconds:.1f} s", flush=True)
        elif args.action == "setup":
            print(f"{path.name}: {'updated' if write_setup(path) else 'unchanged'}")
        elif args.action == "stats":
            print(stats(path))
        else:
            problems += check(path)
    if args.action == "execute":
        print(f"all {len(args.notebooks)} notebooks: {total:.1f} s ({total / 60:.1f} min)")
    if args.action == "check":
        problems += check_workbook(args.notebooks)
        print("\n".join(problems) or "all notebooks follow the house rules")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
