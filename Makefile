# Two commands on a fresh machine: `make train ENV=CartPole-v1` and `make test` create .venv when missing
# (or when setup.cfg / pyproject.toml / constraints.txt changed) and install the project into it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

ENV ?= CartPole-v1
SEED ?= 0
WORKERS ?=
RUN ?=
ARGS ?=

.PHONY: train evaluate test test-fast test-learning lint clean install notebook bench bench-suite bench-atari

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]' -c constraints.txt
	@touch $(STAMP)

train: $(STAMP)
	$(BIN)/a3c train --env $(ENV) --seed $(SEED) $(if $(WORKERS),--workers $(WORKERS)) $(ARGS)

evaluate: $(STAMP)
	@test -n "$(RUN)" || { echo "error: RUN: missing; usage: make evaluate RUN=runs/<env>/<run> [ARGS=...]" >&2; exit 2; }
	$(BIN)/a3c evaluate $(RUN) $(ARGS)

# As CI runs it (.ci/run): every extra installed, so a test of one that is missing fails instead of skipping;
# TEST_WORKERS pytest processes side by side (pytest-xdist, a test module's tests in one of them); the 25
# slowest tests listed at the end.
TEST_WORKERS ?= 3
test: $(STAMP)
	A3C_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# Multi-process learning curves (Hogwild, Ray) against the clock, each over seeds, with a pass rate per check
# (docs/testing.md: when to run it). CI does not run it.
test-learning: $(STAMP)
	A3C_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest tests/learning --learning -p no:cacheprovider

# Ours vs Stable-Baselines3 A2C on CartPole-v1 (about 10 minutes on 2 cores): a markdown table on stdout,
# JSON under bench/results/. The dev install already holds the `bench` extra (stable-baselines3).
bench: $(STAMP)
	$(BIN)/a3c bench $(ARGS)

# Races (a3c bench --env/--suite): ours against SB3 A2C with the same wall-clock budget per run, 3 seeds.
# The suite: seven envs, ours without presets against SB3's defaults, 5 minutes a run (about 3.5 hours).
bench-suite: $(STAMP)
	$(BIN)/a3c bench --suite $(ARGS)

# Pong from pixels against SB3 A2C's zoo Atari settings, 30 minutes a run (3 hours).
bench-atari: $(STAMP)
	$(BIN)/a3c bench --env ALE/Pong-v5 --budget 1800 $(ARGS)

notebook: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[notebooks]' -c constraints.txt
	$(BIN)/jupyter lab notebooks/

# ruff (style, complexity, argument counts, docstrings) and the layer contract in .importlinter.
lint: $(STAMP)
	$(BIN)/ruff check a3c envs tests
	$(BIN)/ruff format --check a3c envs tests
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
