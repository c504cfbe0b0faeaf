"""A catalogue's models loaded for recording exact dialogue traces (predictor training).

Recording runs the target greedily over dialogues and teacher-forces every draft over the
result (:func:`~memspec_ros.runtime.traces.record_dialogue`); each turn's own-domain draft is
used as a speculative helper, which makes the greedy run faster without changing its output.
``memspec_build predictor`` (which also builds the bundled zoo's predictor) needs exactly this.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.token_map import load_token_map

from .catalogue import Catalogue
from .catalogue_file import CatalogueFile
from .traces import Turn


@dataclass
class RecordingModels:
    """The target engine and every draft of a catalogue, as models and as proposers."""

    engine: SpeculativeEngine
    catalogue: Catalogue
    drafts: dict[str, nn.Module]
    proposers: dict[str, DraftProposer]

    def helper(self, turn: Turn) -> DraftProposer | None:
        """The turn's own-domain draft (speeds the greedy run up; the output is the target's)."""
        spec = self.catalogue.by_domain(turn.domain) if turn.domain else None
        return self.proposers[spec.name] if spec else None


def load_recording_models(models: CatalogueFile) -> RecordingModels:
    """Load the target and every draft of ``models`` (float32, on the CPU)."""
    catalogue = Catalogue.from_file(models)
    engine = SpeculativeEngine(load_causal_lm(models.target), load_tokenizer(models.target))
    drafts = {s.name: load_causal_lm(s.path) for s in catalogue}
    proposers = {s.name: DraftProposer(drafts[s.name], s.name, load_token_map(s.path)) for s in catalogue}
    return RecordingModels(engine, catalogue, drafts, proposers)
