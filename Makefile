# memspec_ros — every target sets the environment up first (idempotent, fast when done).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
ENV := source scripts/env.sh &&
AUTOSTART ?= 0
PARAMS ?= config/memspec.yaml
CATALOGUE ?=
BENCH_MODELS := $(if $(CATALOGUE),--catalogue $(CATALOGUE))

.PHONY: setup demo test lint node bench bench-quick soak zoo clean help

help:
	@echo "make demo        set up, start the node with the bundled models, run a dialogue through it"
	@echo "make test        set up and run the test suite (what CI runs)"
	@echo "make node        run memspec_node in the foreground (AUTOSTART=1 to configure+activate)"
	@echo "make bench       full evaluation (every policy, plots, report); make bench-quick for a short one;"
	@echo "                 CATALOGUE=path/to/catalogue.yaml (or its folder) measures your own model set"
	@echo "make soak        node soak: SOAK_MINUTES (30) of back-to-back goals, then 20 lifecycle cycles; flat RSS"
	@echo "make zoo         rebuild the model zoo from offline corpora (long; the zoo is committed)"

setup:
	@bash scripts/setup.sh

demo: setup
	@$(ENV) python -m memspec_ros.ros.demo --params-file $(PARAMS)

test: setup
	@$(ENV) ruff check .
	@$(ENV) python -m pytest -n 2 --dist loadfile

lint: setup
	@$(ENV) ruff check .

node: setup
	@$(ENV) .venv/lib/memspec_ros/memspec_node --ros-args --params-file $(PARAMS) -p autostart:=$(if $(filter 1 true yes,$(AUTOSTART)),true,false)

SOAK_MINUTES ?= 30

soak: setup
	@$(ENV) MEMSPEC_SOAK_S=$$(( $(SOAK_MINUTES) * 60 )) MEMSPEC_SOAK_CYCLES=20 python -m pytest -s test/ros/test_soak.py

bench: setup
	@$(ENV) python -m bench $(BENCH_MODELS)

bench-quick: setup
	@$(ENV) python -m bench --quick $(BENCH_MODELS)

zoo: setup
	@$(ENV) python -m training.build_zoo

clean:
	rm -rf build install log .pytest_cache .ruff_cache
