"""Fresh policy objects by name, each with its own predictor state.

Policies learn online (bandit statistics, the predictor's per-draft corrections), so every
session of every experiment gets a new policy object: runs never share what another run
learned. The predictor file is read once and copied, which keeps the many simulator runs of the
sweeps cheap.
"""

from __future__ import annotations

import copy
from pathlib import Path

from memspec_ros.runtime import DraftPredictor, Policy, make_policy
from memspec_ros.runtime.policies import AcceptanceOracle, policy_class


class PolicyFactory:
    """``factory(name, oracle)`` -> a new policy; ``oracle`` (hindsight of the session) feeds the oracle only."""

    def __init__(self, predictor_path: Path, draft_names: list[str], seed: int = 0) -> None:
        self._predictor = DraftPredictor.load(predictor_path, draft_names)
        self.seed = seed

    def __call__(self, name: str, oracle: AcceptanceOracle | None = None) -> Policy:
        predictor = copy.deepcopy(self._predictor) if policy_class(name).needs_predictor else None
        return make_policy(name, predictor=predictor, oracle=oracle if name == "oracle" else None, seed=self.seed)
