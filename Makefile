# The course's commands. `make book` and `make test` do all their own set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The book's root folder (with _config.yml and _toc.yml); tests point it at throwaway copies.
BOOK ?= .
HTML := $(abspath $(BOOK))/_build/html

.PHONY: book test bench exercises catalogs lab system system-test assets venv lock clean

## book: set up everything, then build both editions of the HTML book (warnings are errors):
## English into _build/html, 中文 into _build/html/zh (the chapters execute once, for both)
book: venv assets system
	$(PY) scripts/build_book.py $(BOOK)
	@echo
	@echo "The book is built. Open file://$(HTML)/index.html (English) or file://$(HTML)/zh/index.html (中文)"
	@echo "or serve it compressed, as a reader's server should: $(PY) scripts/serve_book.py $(HTML) --port 8000  (then http://127.0.0.1:8000/)"

## catalogs: after editing a chapter (or a figure's or widget's text), update the translation catalogs
## (book/locale, attention_course/locale); then translate what is new or marked fuzzy there
catalogs: venv assets system
	$(PY) scripts/update_catalogs.py $(BOOK)

## lab: the chapters as notebooks (what each chapter page offers for download) in JupyterLab, in the
## course's environment: written into _build/notebooks/EDITION (en, or EDITION=zh_CN for 中文) and opened
## there; trained models come from the book's model cache (_build/.model_cache) when it has them.
## LAB_FLAGS: JupyterLab's own options (--no-browser, --port 8889); as root (a container) it adds --allow-root
EDITION ?= en
lab: venv
	$(PY) scripts/write_notebooks.py $(BOOK) --edition $(EDITION) --out $(abspath $(BOOK))/_build/notebooks/$(EDITION)
	ATTENTION_COURSE_MODEL_CACHE=$(abspath $(BOOK))/_build/.model_cache $(VENV)/bin/jupyter lab $(LAB_FLAGS) \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(abspath $(BOOK))/_build/notebooks/$(EDITION)

## test: the whole test suite (builds the book first if it is not up to date), in TEST_WORKERS processes
## (pytest-xdist; each test file runs whole in one of them, so a module's fixtures are built once). Three on
## two cores: with two, `make test` kept one core busy on average (time -v: 93 % CPU), its workers waiting on
## sandboxes, browsers and servers; the expensive fixtures (the released course, the widget book) are shared.
TEST_WORKERS ?= 3
test: book system-test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

## bench: build times (clean, unchanged, chapters' own execution); results in bench/results/
bench: venv assets system
	$(PY) bench/build_times.py

## exercises: regenerate exercises/ from solutions/ with nbgrader, and prove every solution scores full marks
exercises: venv system-test
	$(VENV)/bin/attention-course release --course _build/course --exercises exercises

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, this is {sys.version.split()[0]}"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=23"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

assets: web/node_modules/.installed
web/node_modules/.installed: web/package-lock.json web/package.json
	scripts/system-packages.sh npm
	cd web && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

system:
	scripts/system-packages.sh book

system-test:
	scripts/system-packages.sh test

## lock: re-pin requirements.txt from a fresh environment built from pyproject.toml
lock:
	rm -rf _build/lock-venv && $(PYTHON) -m venv _build/lock-venv
	_build/lock-venv/bin/pip install --quiet ".[book,test]"
	scripts/write-lock.sh _build/lock-venv > requirements.txt
	scripts/write-environment-yml.sh requirements.txt > environment.yml

clean:
	rm -rf _build
