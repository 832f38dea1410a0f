# Two entry points for a fresh machine: `make train` and `make test`.
# Both create .venv themselves. torch is pinned here (CPU build) only for this install path;
# the package itself asks for a range so GPU users keep their own build.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0
RUN_DIR ?= runs/quick

.PHONY: train test lint venv dev clean-venv bench

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_PIN)"
	$(BIN)/python -m pip install --quiet -e ".[dev,export,render,ray]"
	touch $@

venv: $(BIN)/.installed

train: venv
	$(BIN)/speedflip train --preset quick --run-dir $(RUN_DIR)

test: venv
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -m "not slow or ci"

bench: venv
	$(BIN)/speedflip bench --json bench.json

clean-venv:
	rm -rf $(VENV)

# The rlgym-learn peer for `speedflip bench --peer rlgym-learn`: its own venv, not a speedflip dependency.
# rlgym-learn 2.0.0 + algos 0.4.2 stall in their shared-memory IPC on a 2-core machine; these versions run.
PEER_VENV ?= benchmarks/.peer-venv
PEER_PKGS ?= rlgym-learn==1.0.5 rlgym-learn-algos==0.2.6 "rlgym[rl-sim]" wandb

.PHONY: peer-venv

$(PEER_VENV)/.installed:
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEER_VENV)/bin/python -m pip install --quiet "$(TORCH_PIN)"
	$(PEER_VENV)/bin/python -m pip install --quiet $(PEER_PKGS)
	touch $@

peer-venv: $(PEER_VENV)/.installed
