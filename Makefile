# Two commands on a fresh machine: `make train ENV=CartPole-v1` and `make test` create .venv when missing and
# install into it what they need, again when setup.cfg / pyproject.toml / constraints.txt changed. Each install
# set has its own stamp, .venv/.installed-<set>: for train and evaluate the `analysis` extra (for `a3c runs` and
# `a3c plot`) and the env's (pip install -e '.[analysis,<extra>]', the core included); `dev` (every extra and
# the test tools) for test, lint and bench. A fresh dev stamp stands for every set: train then installs nothing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INPUTS := setup.py setup.cfg pyproject.toml constraints.txt
DEV_STAMP := $(VENV)/.installed-dev

# Python >= 3.11 (setup.cfg's python_requires), checked before anything is made: one line naming the fix
# instead of pip's refusal after the venv exists. A .venv made by an older Python (a first try with the
# system's 3.10) or whose python no longer runs is made again, with $(PYTHON), from nothing (--clear).
# python_check: "True 3.11.7" (new enough, its version), "False 3.10.12", or nothing when it does not run.
python_check = $(shell $(1) -c 'import sys; print(sys.version_info >= (3, 11), "%d.%d.%d" % sys.version_info[:3])' \
	2>/dev/null)
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),install)),)
ifneq ($(firstword $(call python_check,$(BIN)/python)),True)
PYTHON_FOUND := $(call python_check,$(PYTHON))
ifneq ($(firstword $(PYTHON_FOUND)),True)
$(error $(PYTHON) $(if $(PYTHON_FOUND),is Python $(lastword $(PYTHON_FOUND)),does not run); this project needs \
	Python >= 3.11: run make again with PYTHON=python3.11 (or another python >= 3.11), e.g. \
	make $(firstword $(MAKECMDGOALS) train) PYTHON=python3.11)
endif
VENV_REMAKE := $(if $(wildcard $(VENV)),FORCE)
endif
endif

ENV ?= CartPole-v1
SEED ?= 0
WORKERS ?=
RUN ?=
ARGS ?=

# The extra of setup.cfg an env id needs, as envs/presets.py's env_extra says (tests/test_makefile.py checks
# that they agree): atari for ALE/<Game>-v5 and the legacy <Game>NoFrameskip-v4 / <Game>Deterministic-v4 ids;
# mujoco and box2d by the env's name, any version; nothing (the core only) for the rest.
MUJOCO_ENVS := Ant HalfCheetah Hopper Humanoid HumanoidStandup InvertedDoublePendulum InvertedPendulum Pusher \
	Reacher Swimmer Walker2d
BOX2D_ENVS := BipedalWalker BipedalWalkerHardcore CarRacing LunarLander LunarLanderContinuous
env_name = $(firstword $(subst -v, ,$(1)))
legacy_atari = $(if $(findstring /,$(1))$(findstring :,$(1)),,$(filter %NoFrameskip-v4 %Deterministic-v4,$(1)))
env_extra = $(strip $(if $(filter ALE/%,$(1))$(call legacy_atari,$(1)),atari, \
	$(if $(filter $(MUJOCO_ENVS),$(call env_name,$(1))),mujoco, \
	$(if $(filter $(BOX2D_ENVS),$(call env_name,$(1))),box2d))))

# evaluate takes the env from the run's config.json (RUN: a run dir or a checkpoint under it), unless ENV= is
# given; without either, the core. Read with the system python, only when evaluate is asked for. A missing RUN
# stops make before anything is installed.
ifneq ($(filter evaluate,$(MAKECMDGOALS)),)
$(if $(RUN),,$(error RUN: missing; usage: make evaluate RUN=runs/<env>/<run> [ARGS=...]))
ifeq ($(filter command line environment,$(origin ENV)),)
ENV := $(shell $(PYTHON) -c 'import json, pathlib, sys; p = pathlib.Path(sys.argv[1]).resolve(); \
	c = [d / "config.json" for d in (p, *p.parents)[:3] if (d / "config.json").is_file()]; \
	print(json.loads(c[0].read_text()).get("env_id", "") if c else "")' '$(RUN)' 2>/dev/null)
endif
endif

# EXTRA: what train and evaluate install besides the core and `analysis`; the env's extra unless given (e.g.
# EXTRA=atari,video for --video on Pong). `analysis` always: `a3c runs` and `a3c plot` are what a finished run
# says to try next. It costs 195 MB and 70 s beside the core's 973 MB (docs/install.md); in the core it would
# weigh on every pip install, Ray worker and export host that never plots.
EXTRA ?= $(call env_extra,$(ENV))
comma := ,
RUN_SET := $(subst $() ,$(comma),$(sort analysis $(subst $(comma), ,$(EXTRA))))
# The dev stamp when it is fresh (as make would judge it), else the stamp of the core plus RUN_SET.
DEV_FRESH := $(if $(VENV_REMAKE),,$(shell test -f $(DEV_STAMP) $(foreach f,$(INPUTS),&& ! test $(f) -nt \
	$(DEV_STAMP)) && echo yes))
RUN_STAMP := $(if $(DEV_FRESH),$(DEV_STAMP),$(VENV)/.installed-$(RUN_SET))

.PHONY: FORCE train evaluate test test-fast test-learning test-faults lint clean install notebook bench bench-suite bench-atari \
	bench-ray

# Everything (dev), as CI installs it.
install: $(DEV_STAMP)

# One install set: `core` is the project alone, any other name the extra(s) of setup.cfg with it. FORCE: the
# venv is made again (VENV_REMAKE), and every set with it.
$(VENV)/.installed-%: $(INPUTS) $(VENV_REMAKE) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.$(if $(filter core,$*),,[$*])' -c constraints.txt
	@touch $@

$(BIN)/python: $(VENV_REMAKE)
	$(PYTHON) -m venv --clear $(VENV)

FORCE:

# Train on ENV with the core and ENV's extra installed.
train: $(RUN_STAMP)
	$(BIN)/a3c train --env $(ENV) --seed $(SEED) $(if $(WORKERS),--workers $(WORKERS)) $(ARGS)

# Evaluate a run (RUN=) with the core and its env's extra installed (see above: config.json or ENV=).
evaluate: $(RUN_STAMP)
	$(BIN)/a3c evaluate $(RUN) $(ARGS)

# As CI runs it (.ci/run): every extra installed, so a test of one that is missing fails instead of skipping;
# TEST_WORKERS pytest processes side by side (pytest-xdist, a test module's tests in one of them); the 25
# slowest tests listed at the end. Bytecode is cached even where the environment says not to
# (PYTHONDONTWRITEBYTECODE, set on the dev machine): else every process the suite starts compiles a3c again.
TEST_WORKERS ?= 3
test: $(DEV_STAMP)
	PYTHONDONTWRITEBYTECODE= A3C_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile \
		--no-loadscope-reorder --durations=25

# The unit tests: two pytest processes, a test to whichever runs dry first (--dist worksteal: no module-scoped
# fixture here costs more than the imbalance of whole modules at the end).
test-fast: $(DEV_STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m "not slow" -n 2 --dist worksteal

# Multi-process learning curves (Hogwild, Ray) against the clock, each over seeds, with a pass rate per check
# (docs/testing.md: when to run it). CI does not run it.
test-learning: $(DEV_STAMP)
	A3C_REQUIRE_EXTRAS=1 $(BIN)/python -m pytest tests/learning --learning -p no:cacheprovider

# Fault injection: 40 rounds (two cycles of its 21 faults, in a random order) that kill, stop or hang up the
# trainer, a worker, the evaluator or the whole process group of a run, a resume or a tune study at a random
# moment, delete the lock file, fill the disk (a tmpfs run dir, as root), damage last.pt, kill a resume at
# its trim and a --force over an earlier run; then check the exit code, that the run dir loads, resumes and
# keeps its CSVs in order, and that nothing is left running (tests/support/fault_injection.py; about 8
# minutes on 2 quiet cores). It prints its seed first: FAULT_SEED=N replays one; FAULT_ARGS adds options
# (e.g. "--kinds group-stop,group-hup", or "--stages ray" for node mode, not in the default cycle). CI runs 4.
FAULT_ROUNDS ?= 40
FAULT_SEED ?=
FAULT_ARGS ?=
test-faults: $(DEV_STAMP)
	$(BIN)/python -m tests.support.fault_injection --rounds $(FAULT_ROUNDS) $(if $(FAULT_SEED),--seed $(FAULT_SEED)) \
		$(FAULT_ARGS) --out runs/faults/$$(date +%Y%m%d-%H%M%S)

# Ours vs Stable-Baselines3 A2C on CartPole-v1 (about 10 minutes on 2 cores): a markdown table on stdout,
# JSON under bench/results/. The dev install already holds the `bench` extra (stable-baselines3).
bench: $(DEV_STAMP)
	$(BIN)/a3c bench $(ARGS)

# Races (a3c bench --env/--suite): ours against SB3 A2C with the same wall-clock budget per run, 3 seeds.
# The suite: seven envs, ours without presets against SB3's defaults, 5 minutes a run (about 3.5 hours).
bench-suite: $(DEV_STAMP)
	$(BIN)/a3c bench --suite $(ARGS)

# Pong from pixels against SB3 A2C's zoo Atari settings, 30 minutes a run (3 hours).
bench-atari: $(DEV_STAMP)
	$(BIN)/a3c bench --env ALE/Pong-v5 --budget 1800 $(ARGS)

# The local and Ray (node mode) backends side by side on Pong's preset: 3 alternating pairs of 60 s.
bench-ray: $(DEV_STAMP)
	$(BIN)/a3c bench --backends ALE/Pong-v5 --seconds 60 --repeats 3 $(ARGS)

notebook: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[notebooks]' -c constraints.txt
	$(BIN)/jupyter lab notebooks/

# ruff (style, complexity, argument counts, docstrings) and the layer contract in .importlinter.
lint: $(DEV_STAMP)
	$(BIN)/ruff check a3c envs tests
	$(BIN)/ruff format --check a3c envs tests
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
