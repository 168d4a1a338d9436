# Two commands matter (see README): `make serve` runs the main job, `make test` the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
VERSIONS ?= 3.8 3.9 3.10 3.11 3.12 3.13

.PHONY: serve test test-all interop bench bench-venv bench-node wire-doc clean

serve:
	$(PYTHON) -m ide_protocol serve $(FOLDER)

# Installs pytest into a local virtual environment when it is missing, then runs the suite.
$(PY):
	$(PYTHON) -m venv $(VENV)

test: $(PY)
	@$(PY) -c "import pytest" 2>/dev/null || $(PY) -m pip install --quiet pytest
	$(PY) -m pytest $(PYTEST_ARGS)

# The suite under every CPython 3.8-3.13 that pyenv (or PATH) provides.
test-all:
	PYTHON_VERSIONS="$(VERSIONS)" bash tools/test_all.sh $(PYTEST_ARGS)

interop:
	bash tests/interop/run.sh

# Development only: the benchmark's baselines (the MCP Python SDK in .bench-venv/, the
# VS Code stack's Node.js packages in .bench-node/), never a requirement of the library.
bench-venv: bench-node
	bash tools/bench_venv.sh

bench-node:
	bash tools/bench_node/install.sh

bench:
	$(PYTHON) tools/bench.py

wire-doc:
	$(PYTHON) tools/make_wire_doc.py

clean:
	rm -rf $(VENV) .venv-* .pytest_cache build *.egg-info
