# Two commands matter (see README): `python3 -m ide_protocol serve` (or `make serve`) runs the
# main job, `make test` the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
VERSIONS ?= 3.8 3.9 3.10 3.11 3.12 3.13

.PHONY: serve test test-deps test-all test-windows typecheck interop interop-windows interop-matrix acp-agents interop-acp-agents dist dist-test distclean pyz bench bench-venv bench-node vscode-replica wire-doc clean vim-plugin vim-install vim-deps bench-vim emacs-package emacs-deps bench-emacs sshd-deps

serve:
	$(PYTHON) -m ide_protocol serve $(FOLDER)

# A local virtual environment; test-deps installs pytest into it (the major version pinned
# in tests/requirements.txt) when it is missing or of another major version; test runs the
# suite, and dist-test the unpacked sdist's suite, with it.
$(PY):
	$(PYTHON) -m venv $(VENV)

test-deps: $(PY)
	@$(PY) -c "import pytest, sys; sys.exit(pytest.__version__.split('.')[0] != '8')" 2>/dev/null \
	  || $(PY) -m pip install --quiet -r tests/requirements.txt

# The suite runs its test files in a few pytest processes at once (tools/run_tests.py:
# TEST_JOBS=N sets how many, TEST_JOBS=1 runs plain pytest; PYTEST_ARGS are pytest's).
TEST_JOBS ?=
test: test-deps
	TEST_JOBS="$(TEST_JOBS)" $(PY) tools/run_tests.py $(PYTEST_ARGS)

# Type checking (development only): mypy, pinned, in its own virtual environment, with the
# configuration of setup.cfg ([mypy]: ide_protocol and acp as Python 3.8 reads them).
# Installed on first use; later runs reuse it and mypy's cache (.mypy_cache), so they
# take seconds.
MYPY_VERSION ?= 1.14.1
TYPECHECK_VENV ?= .venv-typecheck
typecheck:
	@$(TYPECHECK_VENV)/bin/python -c "import mypy.version, sys; sys.exit(mypy.version.__version__ != '$(MYPY_VERSION)')" 2>/dev/null \
	  || { $(PYTHON) -m venv $(TYPECHECK_VENV) && $(TYPECHECK_VENV)/bin/python -m pip install --quiet "mypy==$(MYPY_VERSION)"; }
	$(TYPECHECK_VENV)/bin/mypy

# The suite under every CPython 3.8-3.13 that pyenv (or PATH) provides.
test-all:
	TEST_JOBS="$(TEST_JOBS)" PYTHON_VERSIONS="$(VERSIONS)" bash tools/test_all.sh $(PYTEST_ARGS)

# The suite under a Windows CPython 3.12 in Wine (docs/WINDOWS.md): installs what it
# needs when missing (Debian's wine, a prefix in .wine/, the CPython and pytest in
# .win-python/), then runs pytest there; WINDOWS_PYTEST_ARGS picks tests (default: all).
# Where Wine cannot be installed it says why and stops without failing.
WINDOWS_PYTEST_ARGS ?=
test-windows:
	@PYTHON=$(PYTHON) bash tools/windows/setup.sh; status=$$?; \
	if [ $$status = 3 ]; then echo "test-windows: SKIPPED (see the reason above)"; exit 0; fi; \
	[ $$status = 0 ] || exit $$status; \
	bash tools/windows/run_tests.sh $(WINDOWS_PYTEST_ARGS)

# The real Copilot CLI offline against this code: the newest listed version (the pin),
# or any published one with CLI_VERSION=X (installed into .interop/X/); interop-matrix
# runs every version of tests/interop/cli-versions.txt, one after the other.
CLI_VERSION ?=
interop:
	CLI_VERSION="$(CLI_VERSION)" bash tests/interop/run.sh $(PYTEST_ARGS)

interop-matrix:
	bash tests/interop/matrix.sh $(PYTEST_ARGS)

# The real Windows CLI (copilot.exe, pinned in tests/interop/cli-versions-windows.txt)
# under Debian 13's Wine 10 against `serve`, `doctor` and the ACP client under the Windows
# CPython, over a named pipe (docs/WINDOWS.md). As root: a Debian 13 root made by
# debootstrap, Wine, a prefix, the CLI and the CPython, all under .wine-cli/ (made when
# missing); elsewhere it says why and stops without failing.
interop-windows: test-deps
	PY=$(PY) bash tests/interop_windows/run.sh $(PYTEST_ARGS)

# ACP agents this project did not write (docs/ACP.md §10), each pinned in its own folder
# under .acp-agents/: the official Python SDK in its own venv (its top-level package is
# also called `acp`), the TypeScript SDK, and two that need a model, which the tests fake
# on 127.0.0.1: Claude Code's ACP adapter and Gemini CLI. interop-acp-agents runs
# tests/acp_agents against them (what cannot be installed, or is not the version the
# tests know, is reported skipped, with the reason).
acp-agents:
	bash tests/acp_agents/install.sh

interop-acp-agents: test-deps acp-agents
	timeout --kill-after=30 600 $(PY) -m pytest -p no:cacheprovider -m interop -ra tests/acp_agents $(PYTEST_ARGS)

# Development only: the benchmark's baselines (the MCP Python SDK in .bench-venv/, the
# VS Code stack's Node.js packages in .bench-node/), never a requirement of the library.
bench-venv: bench-node
	bash tools/bench_venv.sh

bench-node:
	bash tools/bench_node/install.sh

bench:
	$(PYTHON) -m tools.bench $(BENCH_ARGS)

# Development only: the packages VS Code's /ide server runs on, at VS Code's pins, for the
# replica of that server in the suite (tests/vscode_replica/, tests/test_vscode_replica.py),
# installed with npm into .vscode-replica/; without node and npm it says why and the
# tests report themselves skipped.
vscode-replica:
	@bash tests/vscode_replica/install.sh; status=$$?; \
	if [ $$status = 3 ]; then echo "vscode-replica: SKIPPED (see the reason above)"; exit 0; fi; exit $$status

wire-doc:
	$(PYTHON) tools/make_wire_doc.py

# The Vim plugin, ready to copy to ~/.vim/pack/copilot/start/: editors/vim with the
# library vendored inside (python3/copilot_ide_vim/ide_protocol) and its help tags.
VIM_PLUGIN_DIR ?= build/vim-plugin/copilot_ide
vim-plugin:
	rm -rf $(VIM_PLUGIN_DIR)
	mkdir -p $(VIM_PLUGIN_DIR)
	cp -R editors/vim/plugin editors/vim/autoload editors/vim/doc editors/vim/python3 $(VIM_PLUGIN_DIR)/
	cp -R ide_protocol $(VIM_PLUGIN_DIR)/python3/copilot_ide_vim/ide_protocol
	find $(VIM_PLUGIN_DIR) -name __pycache__ -prune -exec rm -rf {} +
	rm -f $(VIM_PLUGIN_DIR)/doc/tags
	vim -N -u NONE -i NONE -es -c 'helptags $(VIM_PLUGIN_DIR)/doc' -c 'qa!' || echo "no vim: run :helptags ALL in Vim"
	@echo "built $(VIM_PLUGIN_DIR); install it with: make vim-install"
	@echo "  (or: mkdir -p ~/.vim/pack/copilot/start && cp -R $(VIM_PLUGIN_DIR) ~/.vim/pack/copilot/start/)"

# The built plugin into Vim's package folder (created when missing); an earlier install
# of this plugin there (VIM_PACK/copilot_ide) is replaced, nothing else is touched.
VIM_PACK ?= $(HOME)/.vim/pack/copilot/start
vim-install: vim-plugin
	mkdir -p "$(VIM_PACK)"
	rm -rf "$(VIM_PACK)/copilot_ide"
	cp -R $(VIM_PLUGIN_DIR) "$(VIM_PACK)/copilot_ide"
	@echo "installed $(VIM_PACK)/copilot_ide: start Vim in a project, then copilot in a terminal there"

# What the Vim plugin's tests need (Debian's vim-nox, tmux), installed when missing;
# tests/vim runs the same script and skips, with the reason, where it cannot install.
vim-deps:
	bash tests/vim/install_deps.sh

bench-vim:
	$(PYTHON) tools/bench_vim.py

# The Emacs package, ready for `load-path` or use-package (docs/BRIDGE.md): copilot-ide.el,
# byte-compiled, its autoloads, and the library copied beside it (ide_protocol/), which
# the package then finds by itself.
EMACS ?= emacs
EMACS_PACKAGE_DIR ?= build/emacs/copilot-ide
emacs-package:
	rm -rf $(EMACS_PACKAGE_DIR)
	mkdir -p $(EMACS_PACKAGE_DIR)
	cp editors/emacs/copilot-ide.el $(EMACS_PACKAGE_DIR)/
	cp -R ide_protocol $(EMACS_PACKAGE_DIR)/ide_protocol
	find $(EMACS_PACKAGE_DIR) -name __pycache__ -prune -exec rm -rf {} +
	$(EMACS) -Q --batch --eval '(setq byte-compile-error-on-warn t)' -f batch-byte-compile $(EMACS_PACKAGE_DIR)/copilot-ide.el
	$(EMACS) -Q --batch --eval '(progn (require (quote autoload) nil t) (require (quote loaddefs-gen) nil t) (let ((dir (expand-file-name "$(EMACS_PACKAGE_DIR)")) (backup-inhibited t)) (if (fboundp (quote loaddefs-generate)) (loaddefs-generate dir (expand-file-name "copilot-ide-autoloads.el" dir)) (let ((generated-autoload-file (expand-file-name "copilot-ide-autoloads.el" dir))) (update-directory-autoloads dir)))))'
	@echo "built $(EMACS_PACKAGE_DIR): (add-to-list 'load-path \"$(abspath $(EMACS_PACKAGE_DIR))\") (require 'copilot-ide-autoloads)"

# What a selection push costs Emacs (tools/bench_emacs.el), the package byte-compiled.
bench-emacs:
	mkdir -p build/bench-emacs
	cp editors/emacs/copilot-ide.el build/bench-emacs/
	$(EMACS) -Q --batch -f batch-byte-compile build/bench-emacs/copilot-ide.el
	$(EMACS) -Q --batch -L build/bench-emacs --eval '(setq copilot-ide-library-path "$(CURDIR)")' -l tools/bench_emacs.el

# What the relay's halves hold in memory under a burst of large requests, the link up and
# stalled (tools/bench_relay.py; Linux).
.PHONY: bench-relay
bench-relay:
	$(PYTHON) tools/bench_relay.py $(BENCH_ARGS)

# What the Emacs package's tests need (Debian's emacs-nox, tmux), installed when missing;
# tests/emacs runs the same script and skips, with the reason, where it cannot install.
emacs-deps:
	bash tests/emacs/install_deps.sh

.PHONY: nvim-plugin nvim-install nvim-deps bench-nvim distclean-nvim

# The Neovim plugin (Lua, on `copilot-ide bridge`), ready to copy into a package folder:
# editors/nvim with the library copied beside it (python/ide_protocol) and its help tags.
NVIM ?= nvim
NVIM_PLUGIN_DIR ?= build/nvim-plugin/copilot_ide
nvim-plugin:
	rm -rf $(NVIM_PLUGIN_DIR)
	mkdir -p $(NVIM_PLUGIN_DIR)/python
	cp -R editors/nvim/plugin editors/nvim/lua editors/nvim/doc $(NVIM_PLUGIN_DIR)/
	cp -R ide_protocol $(NVIM_PLUGIN_DIR)/python/ide_protocol
	find $(NVIM_PLUGIN_DIR) -name __pycache__ -prune -exec rm -rf {} +
	rm -f $(NVIM_PLUGIN_DIR)/doc/tags
	$(NVIM) --headless -u NONE -i NONE -c 'helptags $(NVIM_PLUGIN_DIR)/doc' -c 'qa!' 2>/dev/null \
	  || echo "no nvim: run :helptags ALL in Neovim"
	@echo "built $(NVIM_PLUGIN_DIR); install it with: make nvim-install"

# The built plugin into Neovim's package folder, $$XDG_DATA_HOME (default ~/.local/share)
# /nvim/site/pack/copilot/start/copilot_ide; an earlier install there is replaced,
# nothing else is touched.
NVIM_PACK ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/nvim/site/pack/copilot/start
nvim-install: nvim-plugin
	mkdir -p "$(NVIM_PACK)"
	rm -rf "$(NVIM_PACK)/copilot_ide"
	cp -R $(NVIM_PLUGIN_DIR) "$(NVIM_PACK)/copilot_ide"
	@echo "installed $(NVIM_PACK)/copilot_ide: start nvim in a project, then copilot in a terminal there"

# What the plugin's tests need: Debian's neovim (0.7.2) and tmux, and a newer Neovim
# (0.11.4, pinned) in .nvim/; tests/nvim runs the same script and skips, with the
# reason, what cannot be installed.
nvim-deps:
	bash tests/nvim/install_deps.sh

# What the plugin adds to Neovim's start-up and to a cursor move (tools/bench_nvim.py).
bench-nvim:
	$(PYTHON) tools/bench_nvim.py $(BENCH_ARGS)

# distclean also removes the newer Neovim that nvim-deps installed.
distclean: distclean-nvim
distclean-nvim:
	rm -rf .nvim

# What the relay's SSH test needs (Debian's openssh-server), installed when missing;
# tests/test_relay_ssh.py runs the same script and skips, with the reason, where it
# cannot install. Nothing is started: the test runs its own sshd on 127.0.0.1.
sshd-deps:
	bash tests/install_sshd.sh

# One file to copy to a container or server with just Python 3.8+ (the relay's other half):
# build/copilot-ide.pyz, a zipapp of ide_protocol (stdlib only).
pyz:
	$(PYTHON) tools/build_pyz.py build/copilot-ide.pyz

# The sdist and the wheel into dist/ (the `build` front end in .venv-build/); dist-test
# unpacks the sdist into build/sdist-test/ and runs its own test suite there.
dist:
	[ -x .venv-build/bin/python ] || $(PYTHON) -m venv .venv-build
	.venv-build/bin/python -m pip install --quiet build
	rm -rf dist
	.venv-build/bin/python -m build --outdir dist .

dist-test: dist test-deps
	rm -rf build/sdist-test && mkdir -p build/sdist-test
	tar -xzf dist/*.tar.gz -C build/sdist-test
	cd build/sdist-test/* && $(abspath $(PY)) -m pytest -p no:cacheprovider -q $(PYTEST_ARGS)

# clean: what builds, tests and runs leave (build, dist, egg-info, caches, logs);
# distclean: that and every installed environment (virtual environments, the Copilot
# CLIs in .interop/, the benchmark baselines).
clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis .mypy_cache interop-logs bench-results.json
	find ide_protocol acp tests tools editors -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .venv-* .interop .bench-venv .bench-node .vscode-replica .acp-agents .wine .win-python .wine-cli
