"""Core layer: model loading and the speculative decoding engine (torch + transformers, no ROS).

Pieces, one concept per module: ``model_loading`` (safe local loading), ``sampling``
(parameters and the logits transform), ``proposer`` (a draft proposes k tokens),
``scorer`` (the target verifies them in one pass), ``output_head`` (logits as the model's own
forward makes them), ``cache_rollback`` (taking back proposals from any cache layout),
``rejection_sampler`` (which to keep),
``engine`` (sessions that run rounds), ``stats`` (per-round figures), ``detokenizer``
(streaming text), ``errors``.
"""

from memspec_ros.core.engine import DecodeState, SpeculativeEngine
from memspec_ros.core.proposer import DraftProposer, Proposal
from memspec_ros.core.sampling import GREEDY, SamplingParams
from memspec_ros.core.stats import RoundStats

__all__ = [
    "GREEDY",
    "DecodeState",
    "DraftProposer",
    "Proposal",
    "RoundStats",
    "SamplingParams",
    "SpeculativeEngine",
]
