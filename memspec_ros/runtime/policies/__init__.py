"""Draft-scheduling policies behind one interface, and a factory by name."""

from __future__ import annotations

from pathlib import Path

from ..predictor import DraftPredictor
from .bandits import EXP3Policy, UCBPolicy, UCBResidentPolicy
from .base import Decision, Policy, PolicyView, RoundFeedback, SchedulePlan
from .hedge import HedgePolicy
from .memspec import MemSpecManageOnlyPolicy, MemSpecPolicy, MemSpecPredictOnlyPolicy
from .oracle import AcceptanceOracle, OraclePolicy
from .reactive import ReactivePolicy
from .static import StaticPolicy

_CLASSES: tuple[type[Policy], ...] = (StaticPolicy, ReactivePolicy, UCBPolicy, EXP3Policy, HedgePolicy,
                                      UCBResidentPolicy, MemSpecPolicy, MemSpecPredictOnlyPolicy,
                                      MemSpecManageOnlyPolicy, OraclePolicy)
POLICY_NAMES: tuple[str, ...] = tuple(c.name for c in _CLASSES)
"""Every policy the runtime offers, in the order reports list them."""


def policy_class(name: str) -> type[Policy]:
    """The class of the policy called ``name`` (for its flags, e.g. ``needs_predictor``)."""
    for cls in _CLASSES:
        if cls.name == name:
            return cls
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")

ADAPTIVE_BASELINES: tuple[str, ...] = ("reactive", "ucb", "exp3", "hedge", "ucb-resident")
"""The adaptive baselines MemSpec must beat."""


def make_policy(name: str, *, predictor: DraftPredictor | Path | str | None = None,
                oracle: AcceptanceOracle | None = None, draft_names: list[str] | None = None,
                static_draft: str | None = None, seed: int = 0) -> Policy:
    """Build a policy by name.

    ``predictor`` (an instance or a path to ``predictor.safetensors``) is required by the
    predictor-driven policies, ``oracle`` (an exact trace of the session) by ``oracle``.
    ``draft_names`` restricts a loaded predictor to the catalogue's drafts.
    """
    cls = policy_class(name)
    if not cls.needs_predictor:
        predictor = None  # never read a predictor file a policy would not use
    elif predictor is None:
        raise ValueError(f"policy {name!r} needs a predictor (train one with `memspec_build predictor`)")
    elif isinstance(predictor, (str, Path)):
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
    if name == "ucb-resident":
        return UCBResidentPolicy()
    if name == "memspec":
        return MemSpecPolicy(predictor)
    if name == "memspec-predict-only":
        return MemSpecPredictOnlyPolicy(predictor)
    if name == "memspec-manage-only":
        return MemSpecManageOnlyPolicy()
    if name == "oracle":
        if oracle is None:
            raise ValueError("policy 'oracle' needs the session's exact trace (oracle=...)")
        return OraclePolicy(oracle)
    raise AssertionError(f"policy {name!r} has a class but no construction in make_policy")


__all__ = ["ADAPTIVE_BASELINES", "POLICY_NAMES", "AcceptanceOracle", "Decision", "EXP3Policy", "HedgePolicy",
           "MemSpecManageOnlyPolicy", "MemSpecPolicy", "MemSpecPredictOnlyPolicy", "OraclePolicy", "Policy",
           "PolicyView", "ReactivePolicy", "RoundFeedback", "SchedulePlan", "StaticPolicy", "UCBPolicy",
           "make_policy", "policy_class"]
