"""Offline training of the draft-need predictor from exact traces.

Examples are made by replaying each recorded session through a :class:`ContextTracker` exactly as
the runtime feeds it (a new prompt, then the tokens and hidden states of every emitted token),
so the features at training time are the features the runtime computes. At a position ``p`` of
a turn the label for draft ``d`` is the acceptance rate ``d`` would achieve over the next
``horizon`` tokens if it ran every round from ``p`` (from the trace's match vector, with the
engine's round rules). Only positions a real tick can see are used (after the turn's first
round).

The model is fitted with full-batch Adam on a cross-entropy loss with soft labels and L2, in
numpy (no torch needed to train or to run it). Which prompts the traces come from is the
caller's business: ``memspec_build predictor`` uses *training* documents only and never the
held-out evaluation prompts (see ``docs/build.md`` and ``docs/runtime.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memspec_ros.core.greedy_match import greedy_rounds

from .context import ContextTracker
from .predictor import TOKEN_BUCKETS, DraftPredictor, feature_vector
from .traces import DialogueTrace


def segment_rate(match: np.ndarray, pos: int, k: int, horizon: int, max_new: int) -> float:
    """Acceptance rate of greedy rounds from ``pos`` over the next ``horizon`` tokens."""
    acc, prop, _ = greedy_rounds(match, k, start=pos, end=min(len(match), pos + horizon), limit=max_new)
    return acc / prop if prop else 0.0


def examples_from_trace(trace: DialogueTrace, draft_names: Sequence[str], hidden_size: int, *, k: int = 4,
                        horizon: int = 24, stride: int = 2, min_left: int = 6,
                        buckets: int = TOKEN_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """Feature matrix ``[N, D]`` and label matrix ``[N, M]`` from one session."""
    tracker = ContextTracker()
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for turn in trace.turns:
        tracker.new_turn(turn.prompt_ids)
        n = len(turn.output_ids)
        for j in range(n):
            h = None if turn.hidden is None else turn.hidden[j: j + 1].astype(np.float32)
            tracker.push(turn.output_ids[j: j + 1], h)
            p = j + 1  # tokens emitted so far in the turn; a tick now forecasts from p
            if (p - 1) % stride or n - p < min_left:
                continue
            xs.append(feature_vector(tracker.features(), hidden_size, buckets))
            ys.append(np.array([segment_rate(turn.match[d], p, k, horizon, turn.max_new_tokens)
                                for d in draft_names], dtype=np.float32))
    if not xs:
        d = 2 * hidden_size + buckets
        return np.zeros((0, d), np.float32), np.zeros((0, len(draft_names)), np.float32)
    return np.stack(xs), np.stack(ys)


@dataclass(frozen=True)
class FitMetrics:
    """Quality of a predictor on a set of examples."""

    examples: int
    top1: float
    """Fraction of examples where the predicted best draft is the truly best one."""
    regret: float
    """Mean acceptance lost by running the predicted best draft instead of the best one."""
    mae: float
    """Mean absolute error of the predicted acceptance rates."""
    best_single_regret: float
    """Regret of the best *fixed* draft over the same examples (the baseline to beat)."""
    best_single_draft: str = ""
    """That draft (the one with the highest mean acceptance over the examples)."""


def fit_linear(x: np.ndarray, y: np.ndarray, *, l2: float = 1e-3, epochs: int = 400, lr: float = 0.02,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fit ``sigmoid(standardise(x) @ W + b) ~ y``; return ``(W, b, mean, std)``."""
    rng = np.random.default_rng(seed)
    mean = np.nanmean(x, axis=0).astype(np.float32)
    std = np.nanstd(x, axis=0).astype(np.float32)
    std = np.where(std < 1e-3, 1.0, std).astype(np.float32)
    z = np.nan_to_num((x - mean) / std).astype(np.float32)
    n, d = z.shape
    m = y.shape[1]
    w = (rng.standard_normal((d, m)) * 0.01).astype(np.float32)
    ybar = np.clip(y.mean(axis=0), 1e-3, 1 - 1e-3)
    b = np.log(ybar / (1 - ybar)).astype(np.float32)
    mw, vw, mb, vb = (np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b))
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, epochs + 1):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w + b, -30, 30)))
        g = (p - y) / n  # d(BCE)/d(logit), soft labels
        gw = z.T @ g + l2 * w
        gb = g.sum(axis=0)
        for param, grad, mom, vel in ((w, gw, mw, vw), (b, gb, mb, vb)):
            mom *= beta1
            mom += (1 - beta1) * grad
            vel *= beta2
            vel += (1 - beta2) * grad * grad
            param -= lr * (mom / (1 - beta1 ** step)) / (np.sqrt(vel / (1 - beta2 ** step)) + eps)
    return w, b, mean, std


def evaluate(predictor: DraftPredictor, x: np.ndarray, y: np.ndarray) -> FitMetrics:
    """Top-1 accuracy, regret and error of ``predictor`` on examples (no online adaptation)."""
    if len(x) == 0:
        return FitMetrics(0, 0.0, 0.0, 0.0, 0.0)
    z = np.nan_to_num((x - predictor.mean) / predictor.std)
    p = 1.0 / (1.0 + np.exp(-(z @ predictor.weight + predictor.bias)))
    pick = p.argmax(axis=1)
    best = y.max(axis=1)
    got = y[np.arange(len(y)), pick]
    fixed = y.mean(axis=0).argmax()
    return FitMetrics(examples=len(x), top1=float((got >= best - 1e-9).mean()), regret=float((best - got).mean()),
                      mae=float(np.abs(p - y).mean()), best_single_regret=float((best - y[:, fixed]).mean()),
                      best_single_draft=predictor.draft_names[int(fixed)])


def train_predictor(train: Sequence[DialogueTrace], draft_names: Sequence[str], hidden_size: int, *,
                    validation: Sequence[DialogueTrace] = (), k: int = 4, horizon: int = 24, stride: int = 2,
                    l2: float = 1e-2, epochs: int = 300, seed: int = 0,
                    meta: dict | None = None) -> tuple[DraftPredictor, dict[str, FitMetrics]]:
    """Fit a predictor on ``train`` traces; report metrics on train and ``validation``."""
    parts = [examples_from_trace(t, draft_names, hidden_size, k=k, horizon=horizon, stride=stride) for t in train]
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    if len(x) == 0:
        raise ValueError("no training examples: traces too short")
    w, b, mean, std = fit_linear(x, y, l2=l2, epochs=epochs, seed=seed)
    info = {"k": k, "horizon": horizon, "stride": stride, "l2": l2, "epochs": epochs, "examples": len(x),
            "train_sessions": [t.name for t in train], **(meta or {})}
    pred = DraftPredictor(list(draft_names), hidden_size, w, b, mean, std, meta=info)
    metrics = {"train": evaluate(pred, x, y)}
    if validation:
        vparts = [examples_from_trace(t, draft_names, hidden_size, k=k, horizon=horizon, stride=stride)
                  for t in validation]
        metrics["validation"] = evaluate(pred, np.concatenate([p[0] for p in vparts]),
                                         np.concatenate([p[1] for p in vparts]))
    return pred, metrics
