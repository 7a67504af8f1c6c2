# Two commands on a fresh machine: `make train ENV=CartPole-v1` and `make test` create .venv when missing and
# install into it what they need, again when setup.cfg / pyproject.toml / constraints.txt changed. Each install
# set has its own stamp, .venv/.installed-<set>: for train and evaluate the `analysis` extra (for `a3c runs` and
# `a3c plot`) and the env's (pip install -e '.[analysis,<extra>]', the core included); `dev` (every extra and
# the test tools) for test, lint and bench. A fresh dev stamp stands for every set: train then installs nothing.
# torch goes in first: the CUDA build where an NVIDIA driver is found, else the CPU one; TORCH=cpu|cuda chooses.
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
	bench-ray bench-gpu

# Everything (dev), as CI installs it.
install: $(DEV_STAMP)

# Which torch build the install sets get (docs/install.md, "Which torch you get"). On Linux x86_64 PyPI's
# torch is the CUDA build (with several GB of nvidia-* packages, of no use without an NVIDIA GPU); PyTorch's
# CPU index has the same version as <version>+cpu. TORCH=cpu or TORCH=cuda chooses, and replaces a torch of the
# other build; without it a venv keeps the build it has (the install line says so), and a new one gets the
# CUDA build where an NVIDIA driver is found, else the CPU build. The driver is looked for without starting a
# process (make reads these names at every call): /proc/driver/nvidia/version (its kernel module is loaded: a
# Linux host, or a container given a GPU), WSL2's /usr/lib/wsl/lib/nvidia-smi (the driver is Windows', with no
# /proc entry) or an nvidia-smi on PATH. Elsewhere (macOS: CPU and MPS; Linux aarch64) PyPI's torch is the only
# build make installs; TORCH= is not looked at.
TORCH ?=
ifneq ($(TORCH),$(filter cpu cuda,$(firstword $(TORCH))))
$(error TORCH=$(TORCH): no such torch build; TORCH=cpu (the CPU-only wheel) or TORCH=cuda (the CUDA build), \
	or no TORCH= (CUDA where an NVIDIA driver is found, else CPU))
endif
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
NVIDIA_DRIVER_MARKERS = /proc/driver/nvidia/version /usr/lib/wsl/lib/nvidia-smi \
	$(addsuffix /nvidia-smi,$(subst :, ,$(PATH)))
nvidia_driver = $(firstword $(wildcard $(NVIDIA_DRIVER_MARKERS)))
# uname runs once, at the first use (made simple then): a plain recursive variable ran it at each of its
# dozen uses in one call of make.
UNAME = $(eval UNAME := $$(shell uname -sm))$(UNAME)
linux_x86_64 = $(filter Linux x86_64,$(word 1,$(UNAME)) $(word 2,$(UNAME)))
# The build of the venv's torch, from its dist-info folder's name: cpu (2.13.0+cpu), cuda (no local label:
# PyPI's; or +cu<version>: PyTorch's CUDA indexes), another label as it is (rocm6.2), nothing when there is
# none or the venv is made again.
torch_dist = $(basename $(notdir $(firstword $(wildcard $(VENV)/lib/python3*/site-packages/torch-*.dist-info))))
torch_label = $(word 2,$(subst +, ,$(torch_dist)))
TORCH_INSTALLED = $(if $(VENV_REMAKE),,$(if $(torch_dist),$(patsubst cu%,cuda,$(or $(torch_label),cu))))
TORCH_BUILD = $(if $(linux_x86_64),$(or $(TORCH),$(TORCH_INSTALLED),$(if $(nvidia_driver),cuda,cpu)),pypi)
# FORCE when TORCH= names another build than the venv's torch: the set a goal needs is installed again.
torch_other_installed = $(if $(TORCH_INSTALLED),$(filter-out $(TORCH),$(TORCH_INSTALLED)))
TORCH_SWITCH = $(if $(TORCH),$(if $(torch_other_installed),$(if $(linux_x86_64),FORCE)))
# The version constraints.txt pins. cpu: exactly <version>+cpu, from the CPU index, asked about torch alone
# (--no-deps: the project's install then brings torch's dependencies from the usual indexes) and retried once
# where it cannot be reached (pip's default: five retries of each package). cuda: <version> of any build but
# +cpu (a +cpu wheel in a local wheel folder would win, its local label sorting higher).
torch_version = $(or $(shell sed -n 's/^torch==\([^ ;#]*\).*/\1/p' constraints.txt),$(error constraints.txt: \
	no torch==<version> line; the Makefile installs the torch it pins))
torch_cpu = 'torch==$(torch_version)+cpu' --retries 1 --extra-index-url $(TORCH_CPU_INDEX)
torch_cuda = 'torch==$(torch_version),!=$(torch_version)+cpu'
# pypi (and a build make has no name for): nothing of its own, the project's install brings torch.
torch_pip_args = $(torch_$(TORCH_BUILD))
# The line the install prints, e.g. "torch: CPU build (no NVIDIA driver found; TORCH=cuda for the CUDA build)".
name_cpu := CPU
name_cuda := CUDA
build_name = $(or $(name_$(1)),$(1))
other_build = $(if $(filter cpu,$(TORCH_BUILD)),cuda,cpu)
torch_found = $(if $(nvidia_driver),NVIDIA driver found: $(nvidia_driver),no NVIDIA driver found)
torch_other = TORCH=$(other_build) for the $(call build_name,$(other_build)) build
torch_why = $(if $(TORCH),(TORCH=$(TORCH)),($(torch_found); $(torch_other)))
torch_kept = $(if $(TORCH),,$(if $(TORCH_INSTALLED),$(comma) as installed))
torch_line = torch: $(if $(filter pypi,$(TORCH_BUILD)),PyPI's build for $(UNAME) (TORCH= chooses CPU or CUDA \
	on Linux x86_64 only),$(call build_name,$(TORCH_BUILD)) build$(torch_kept) $(torch_why))

# One install set: `core` is the project alone, any other name the extra(s) of setup.cfg with it; torch first,
# of the build TORCH_BUILD names (above), one line saying which. FORCE: the venv is made again (VENV_REMAKE),
# and every set with it, or TORCH= asks for another build than the venv has (TORCH_SWITCH).
$(VENV)/.installed-%: $(INPUTS) $(VENV_REMAKE) $(TORCH_SWITCH) | $(BIN)/python
	@echo "$(torch_line)"
	$(if $(torch_pip_args),$(BIN)/python -m pip install --quiet --no-deps $(torch_pip_args))
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

# The device check (a3c bench --gpu; docs/performance.md, "The GPU check"), about 7 minutes: with CUDA, the
# CUDA tests (pytest -m cuda), one Pong run on the GPU (15 workers: steps/s, the GPU's memory per process, a
# short learning check), Pong's steps/s on the CPU with 15, 1, 2, 4 and 8 workers, then CartPole's MLP on
# GPU and CPU; without CUDA Pong's CPU runs only, and one line says what was skipped. JSON under RESULTS.
# WHEELS=.whl: on a machine without network and .venv, whose python3 has torch (a lent GPU machine):
# bench/gpu/run.sh installs the wheels that bench/gpu/prepare.sh put there and runs with that python3.
# The device command (the run tool, carry [".whl"], timeout_s 540), after bench/gpu/prepare.sh here:
#   bash bench/gpu/run.sh $OUT      (the same as make bench-gpu WHEELS=.whl RESULTS=$OUT, without make)
WHEELS ?=
RESULTS ?= bench/results
bench-gpu: $(if $(WHEELS),,$(DEV_STAMP))
	$(if $(WHEELS),WHEELS=$(WHEELS) PYTHON=$(PYTHON) bash bench/gpu/run.sh $(RESULTS), \
		$(BIN)/a3c bench --gpu --out $(RESULTS)) $(ARGS)

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
