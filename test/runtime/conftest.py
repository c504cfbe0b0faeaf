"""Fixtures for the runtime tests: a tiny zoo of real (random) Llama models, built once.

The runtime's mechanics do not depend on model quality, so tiny models saved to a tmp dir and
loaded back through the same public loading code keep the whole suite to seconds of compute
(the machine has 2 cores). Torch runs single-threaded so the background loader has a core.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
from memspec_ros.runtime import Catalogue, DialogueTrace, record_dialogue
from memspec_ros.runtime.predictor import DraftPredictor
from memspec_ros.runtime.predictor_training import train_predictor

from .rt_tiny_zoo import DIALOGUE, build_tiny_zoo

torch.set_num_threads(1)


@dataclass
class TinyWorld:
    """Everything a runtime test needs."""

    root: Path
    dirs: dict[str, Path]
    engine: SpeculativeEngine
    catalogue: Catalogue
    trace: DialogueTrace
    predictor: DraftPredictor

    def fresh_catalogue(self, tmp: Path) -> tuple[Catalogue, dict[str, Path]]:
        """A private copy of the drafts (for tests that damage files)."""
        dirs = {}
        for name in self.catalogue.names:
            dirs[name] = tmp / name
            shutil.copytree(self.dirs[name], dirs[name])
        return Catalogue.from_dirs(dirs), dirs


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> TinyWorld:
    root = tmp_path_factory.mktemp("tiny_zoo")
    dirs = build_tiny_zoo(root)
    tok = load_tokenizer(dirs["target"])
    engine = SpeculativeEngine(load_causal_lm(dirs["target"]), tok)
    catalogue = Catalogue.from_dirs({n: p for n, p in dirs.items() if n.startswith("draft-")})
    drafts = {n: load_causal_lm(dirs[n]) for n in catalogue.names}
    trace = record_dialogue(engine, drafts, DIALOGUE, "tiny")
    predictor, _ = train_predictor([trace], catalogue.names, engine.target.config.hidden_size, epochs=60)
    return TinyWorld(root=root, dirs=dirs, engine=engine, catalogue=catalogue, trace=trace, predictor=predictor)


@pytest.fixture(scope="session")
def reference_outputs(world: TinyWorld) -> list[list[int]]:
    """Target-only greedy output of every turn of :data:`DIALOGUE` (one conversation)."""
    session = None
    outs = []
    for turn in DIALOGUE:
        session = world.engine.run_turn(session, turn.prompt, turn.max_new_tokens)
        outs.append(list(session.output_ids))
    return outs
