"""Fresh policy objects by name, each with its own predictor state.

Policies learn online (bandit statistics, the predictor's per-draft corrections), so every
session of every experiment gets a new policy object: runs never share what another run
learned. The predictor file is read once and copied, which keeps the many simulator runs of the
sweeps cheap.
"""

from __future__ import annotations

import copy
from pathlib import Path

from memspec_ros.core.ngram_proposer import NGRAM_NAME
from memspec_ros.runtime import POLICY_NAMES, DraftPredictor, Policy, make_policy
from memspec_ros.runtime.policies import AcceptanceOracle, MemSpecPolicy, StaticPolicy, policy_class

MEMSPEC_NO_NGRAM = "memspec-no-ngram"
"""memspec never running the n-gram member (model drafts only): what memspec was before it."""
NGRAM_ONLY = "ngram-only"
"""The n-gram member alone (``static`` with ``static_draft: ngram``): prompt lookup in our runtime."""
NGRAM_VARIANTS = (MEMSPEC_NO_NGRAM, NGRAM_ONLY)
BENCH_POLICIES = (*POLICY_NAMES, *NGRAM_VARIANTS)
"""Every configuration the bench runs through the runtime: the policies, and the n-gram member's
two comparisons (the runtime has the member on in every run, as the node does by default)."""


def base_policy(name: str) -> str:
    """The runtime policy a bench configuration runs."""
    return {MEMSPEC_NO_NGRAM: "memspec", NGRAM_ONLY: "static"}.get(name, name)


class PolicyFactory:
    """``factory(name, oracle)`` -> a new policy; ``oracle`` (hindsight of the session) feeds the oracle only."""

    def __init__(self, predictor_path: Path, draft_names: list[str], seed: int = 0) -> None:
        self._predictor = DraftPredictor.load(predictor_path, draft_names)
        self.seed = seed

    def __call__(self, name: str, oracle: AcceptanceOracle | None = None) -> Policy:
        predictor = copy.deepcopy(self._predictor) if policy_class(base_policy(name)).needs_predictor else None
        if name == MEMSPEC_NO_NGRAM:
            return MemSpecPolicy(predictor, ngram=False)
        if name == NGRAM_ONLY:
            return StaticPolicy(NGRAM_NAME)
        return make_policy(name, predictor=predictor, oracle=oracle if name == "oracle" else None, seed=self.seed)
