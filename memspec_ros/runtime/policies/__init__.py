"""Draft-scheduling policies behind one interface, and a factory by name."""

from __future__ import annotations

from pathlib import Path

from ..predictor import DraftPredictor
from .bandits import EXP3Policy, UCBPolicy
from .base import Decision, Policy, PolicyView, RoundFeedback, SchedulePlan
from .hedge import HedgePolicy
from .memspec import MemSpecManageOnlyPolicy, MemSpecPolicy, MemSpecPredictOnlyPolicy
from .oracle import AcceptanceOracle, OraclePolicy
from .reactive import ReactivePolicy
from .static import StaticPolicy

POLICY_NAMES: tuple[str, ...] = ("static", "reactive", "ucb", "exp3", "hedge", "memspec",
                                 "memspec-predict-only", "memspec-manage-only", "oracle")
"""Every policy the runtime offers, in the order reports list them."""

ADAPTIVE_BASELINES: tuple[str, ...] = ("reactive", "ucb", "exp3", "hedge")
"""The adaptive baselines MemSpec must beat."""


def make_policy(name: str, *, predictor: DraftPredictor | Path | str | None = None,
                oracle: AcceptanceOracle | None = None, draft_names: list[str] | None = None,
                static_draft: str | None = None, seed: int = 0) -> Policy:
    """Build a policy by name.

    ``predictor`` (an instance or a path to ``predictor.safetensors``) is required by the
    predictor-driven policies, ``oracle`` (an exact trace of the session) by ``oracle``.
    ``draft_names`` restricts a loaded predictor to the catalogue's drafts.
    """
    if isinstance(predictor, (str, Path)):
        predictor = DraftPredictor.load(predictor, draft_names)
    if name == "static":
        return StaticPolicy(static_draft)
    if name == "reactive":
        return ReactivePolicy()
    if name == "ucb":
        return UCBPolicy()
    if name == "exp3":
        return EXP3Policy(seed=seed)
    if name == "hedge":
        return HedgePolicy()
    if name in ("memspec", "memspec-predict-only"):
        if predictor is None:
            raise ValueError(f"policy {name!r} needs a predictor (train one with scripts/train_predictor.py)")
        return MemSpecPolicy(predictor) if name == "memspec" else MemSpecPredictOnlyPolicy(predictor)
    if name == "memspec-manage-only":
        return MemSpecManageOnlyPolicy()
    if name == "oracle":
        if oracle is None:
            raise ValueError("policy 'oracle' needs the session's exact trace (oracle=...)")
        return OraclePolicy(oracle)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")


__all__ = ["ADAPTIVE_BASELINES", "POLICY_NAMES", "AcceptanceOracle", "Decision", "EXP3Policy", "HedgePolicy",
           "MemSpecManageOnlyPolicy", "MemSpecPolicy", "MemSpecPredictOnlyPolicy", "OraclePolicy", "Policy",
           "PolicyView", "ReactivePolicy", "RoundFeedback", "SchedulePlan", "StaticPolicy", "UCBPolicy",
           "make_policy"]
