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

.PHONY: setup demo test lint node bench bench-quick bench-do-no-harm bench-learning soak zoo smollm2 llama-cpp clean help

help:
	@echo "make demo        set up, start the node with the bundled models, run a dialogue through it"
	@echo "make test        set up and run the test suite (what CI runs)"
	@echo "make node        run memspec_node in the foreground (AUTOSTART=1 to configure+activate)"
	@echo "make bench       full evaluation (every policy, plots, report, then the online-learning experiments of"
	@echo "                 bench-learning); make bench-quick for a short one (policies only);"
	@echo "                 CATALOGUE=path/to/catalogue.yaml (or its folder) measures your own model set"
	@echo "make bench-do-no-harm  the two do-no-harm cases: a deliberately weak model set (drafts trained for one"
	@echo "                 minute) and the default set beside two CPU-bound neighbours (bench-quick each)"
	@echo "make bench-learning  online learning alone: a shifted mix of topics and a cold start (simulated on exact"
	@echo "                 traces and real), and what a learning step costs a goal (CATALOGUE as for bench)"
	@echo "make soak        node soak: SOAK_MINUTES (30) of back-to-back goals, then 20 lifecycle cycles; flat RSS"
	@echo "make zoo         rebuild the model zoo from offline corpora: the target (training/), then its drafts and"
	@echo "                 predictor with memspec_build, as for your own models (hours; the zoo is committed)"
	@echo "make smollm2     rebuild the default model set's drafts and predictor: the target's own answers to robot"
	@echo "                 users' questions (training/smollm2), then memspec_build (about 2 hours; committed)"
	@echo "make llama-cpp   install the optional llama.cpp peer of the benchmark (builds from source, ~15 min)"

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

# The full evaluation: every policy side by side (python -m bench), then the online-learning
# experiments (a shifted mix and a cold start, simulated on exact traces and real) and what a
# learning step costs a goal: the same as make bench-learning.
bench: setup
	@$(ENV) python -m bench $(BENCH_MODELS)
	@$(ENV) python -m bench.learning_shift --real $(BENCH_MODELS)
	@$(ENV) python -m bench.learning_cost $(BENCH_MODELS)

bench-quick: setup
	@$(ENV) python -m bench --quick $(BENCH_MODELS)

bench-learning: setup
	@$(ENV) python -m bench.learning_shift --real $(BENCH_MODELS)
	@$(ENV) python -m bench.learning_cost $(BENCH_MODELS)

# Do no harm: memspec must never be slower than target-only. Case 1: drafts trained for one minute
# (built once into .cache/weak_smollm2 with memspec_build, from the default set's corpora); case 2: the
# default set while two CPU-bound processes keep the cores busy (a robot computer's other nodes).
WEAK_SET := .cache/weak_smollm2

bench-do-no-harm: setup
	@if [ ! -d $(SMOLLM2_CORPORA) ]; then $(ENV) python -m training.smollm2.answers \
		--target models/smollm2/target --out $(SMOLLM2_CORPORA) $(SMOLLM2_ANSWERS); fi
	@$(ENV) memspec_build drafts --target models/smollm2/target --corpora $(SMOLLM2_CORPORA) --out $(WEAK_SET) \
		--draft-vocab 8192 --time-budget-s 60 --draft-shape 320x2
	@$(ENV) memspec_build predictor --out $(WEAK_SET) --time-budget-s 240 --sessions 8
	@$(ENV) python -m bench --quick --catalogue $(WEAK_SET)
	@$(ENV) python -m bench --quick --cpu-neighbours 2

# The bundled zoo: corpora and target here, then the drafts, predictor and evaluation by the
# same tool a user runs on their own target (docs/build.md), with the zoo's recipe: drafts of
# five sizes trained from scratch and a small, briefly trained general draft (docs/zoo.md).
ZOO_DRAFT_SHAPES := robot=96x2 math=128x2 legal=144x2 code=176x2 prose=192x2 general=80x2

zoo: setup
	@$(ENV) python -m training.build_zoo
	@$(ENV) memspec_build drafts --target models/zoo/target --corpora .cache/zoo/corpora/all --out models/zoo \
		--time-budget-s 2400 --specialists-from scratch --general-share 0.1 \
		$(foreach s,$(ZOO_DRAFT_SHAPES),--draft-shape $(s))
	@$(ENV) memspec_build predictor --out models/zoo
	@$(ENV) memspec_build evaluate --out models/zoo

# The default model set: SmolLM2-135M-Instruct (fetched by setup) answers robot users' questions in
# five domains (its answers are the corpora), then the drafts, predictor and evaluation by memspec_build.
# The evaluation scores every draft on 60 fresh questions a domain (training/smollm2/heldout.py), none
# of them in the corpora: memspec_build's own held-out split is 5% of the documents, 15 a domain here.
SMOLLM2_CORPORA := .cache/smollm2/corpora
# Conversations per domain (`--count DOMAIN=N` changes one domain's; models/smollm2/reports/build.md
# records two builds with more, 600 for two domains and 400 for all, that led the general draft by less).
SMOLLM2_ANSWERS := --per-domain 300 --general 300
# The general draft's own text: questions outside the five domains (training/smollm2/prompts.py, general),
# answered by the target; written beside the corpora folder, where memspec_build would take it for a domain.
SMOLLM2_GENERAL := .cache/smollm2/general.jsonl
SMOLLM2_QUESTIONS := models/smollm2/heldout/questions.jsonl
SMOLLM2_DRAFTS := --draft-vocab 8192 --time-budget-s 3600 --specialists-from scratch --general-share 0.5 \
	--draft-shape 320x2 --draft-shape general=160x2 --save-dtype bfloat16 --general-corpus $(SMOLLM2_GENERAL)

smollm2: setup
	@$(ENV) python -m training.smollm2.answers --target models/smollm2/target --out $(SMOLLM2_CORPORA) \
		--general-out $(SMOLLM2_GENERAL) $(SMOLLM2_ANSWERS)
	@$(ENV) memspec_build drafts --target models/smollm2/target --corpora $(SMOLLM2_CORPORA) --out models/smollm2 \
		$(SMOLLM2_DRAFTS)
	@$(ENV) memspec_build predictor --out models/smollm2
	@$(ENV) python -m training.smollm2.heldout --per-domain 60 --exclude-up-to 300 --out $(SMOLLM2_QUESTIONS)
	@$(ENV) memspec_build evaluate --out models/smollm2 --prompts $(SMOLLM2_QUESTIONS) --prompts-per-domain 60 \
		--time-budget-s 1500

# llama-cpp-python has no binary wheel for every platform: pip builds it (cmake, a C++ compiler).
llama-cpp: setup
	@$(ENV) CMAKE_BUILD_PARALLEL_LEVEL=2 nice -n 19 pip install --disable-pip-version-check llama-cpp-python==0.3.36

clean:
	rm -rf build install log .pytest_cache .ruff_cache
