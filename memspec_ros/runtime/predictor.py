"""The draft-need predictor: which drafts will the next segment want?

Design, and why:

* **Features** are things the decoder already has. The target's final hidden state (computed by
  every verification; it is what the target "thinks" the text is about) - the latest one and
  the mean of the last few, since a single token is a noisy topic signal - plus a hashed
  bag of the most recent token ids (cheap, and it reacts to a new prompt before any hidden
  state of it exists). Features are standardised with statistics saved at training time.
* **Model**: one linear layer and a sigmoid per draft, predicting the acceptance rate the draft
  would achieve over the next segment (a number the runtime can check against what it then
  observes, unlike an opaque class score). Inference is a ~1k x 6 matrix-vector product:
  microseconds, far under the 2% budget; :attr:`DraftPredictor.seconds` measures it.
* **Online adaptation**: the observed acceptance of the draft that ran is compared with its
  forecast and a per-draft correction (probability units) absorbs the residual; corrections of
  drafts not observed decay, so a stale one cannot outlive a topic shift. Recent acceptance
  enters here rather than as an input feature because it exists only for drafts that ran.
* **Domain hint**: an external prior (a goal's ``domain_hint``, a planner's topic) is blended
  into that domain's draft's forecast (``p + w(1 - p)``, ``w`` = 0.6 at first), fading over a few
  checks unless renewed, so evidence wins over a stale hint.

Trained offline by :mod:`memspec_ros.runtime.predictor_training` from recorded traces of
training prompts only; saved as ``predictor.safetensors`` next to the zoo.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .context import ContextFeatures

TOKEN_BUCKETS = 64
"""Hash buckets of the recent-token bag-of-ids feature."""
_HASH_MULT = 2654435761


def token_bag(tokens: Sequence[int], buckets: int = TOKEN_BUCKETS) -> np.ndarray:
    """Normalised histogram of token ids hashed into ``buckets`` bins."""
    out = np.zeros(buckets, dtype=np.float32)
    if tokens:
        idx = (np.asarray(tokens, dtype=np.int64) * _HASH_MULT) % buckets
        np.add.at(out, idx, 1.0)
        out /= len(tokens)
    return out


def feature_vector(ctx: ContextFeatures, hidden_size: int, buckets: int = TOKEN_BUCKETS) -> np.ndarray:
    """The predictor's raw input: ``[hidden_last, hidden_mean, token_bag]``.

    Without hidden states yet (a session's very first check) those parts are NaN and get
    replaced by the training mean during standardisation, i.e. they contribute nothing.
    """
    if ctx.hidden_last is None or ctx.hidden_mean is None:
        hidden = np.full(2 * hidden_size, np.nan, dtype=np.float32)
    else:
        hidden = np.concatenate([ctx.hidden_last, ctx.hidden_mean]).astype(np.float32)
    return np.concatenate([hidden, token_bag(ctx.tokens, buckets)])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))


class DraftPredictor:
    """Linear-sigmoid forecast of each draft's next-segment acceptance, with online correction."""

    def __init__(
        self,
        draft_names: Sequence[str],
        hidden_size: int,
        weight: np.ndarray,
        bias: np.ndarray,
        mean: np.ndarray,
        std: np.ndarray,
        *,
        buckets: int = TOKEN_BUCKETS,
        meta: Mapping[str, object] | None = None,
        adapt_rate: float = 0.5,
        adapt_decay: float = 0.7,
        hint_weight: float = 0.6,
        hint_decay: float = 0.7,
    ) -> None:
        self.draft_names = list(draft_names)
        self.hidden_size = int(hidden_size)
        self.buckets = int(buckets)
        self.weight = np.asarray(weight, dtype=np.float32)  # [D, M]
        self.bias = np.asarray(bias, dtype=np.float32)  # [M]
        self.mean = np.asarray(mean, dtype=np.float32)
        self.std = np.asarray(std, dtype=np.float32)
        d = 2 * self.hidden_size + self.buckets
        if self.weight.shape != (d, len(self.draft_names)) or self.mean.shape != (d,) or self.std.shape != (d,):
            raise ValueError(f"predictor shapes do not match: weight {self.weight.shape}, expected "
                             f"({d}, {len(self.draft_names)})")
        self.meta = dict(meta or {})
        self.adapt_rate = adapt_rate
        self.adapt_decay = adapt_decay
        self.hint_weight = hint_weight
        self.hint_decay = hint_decay
        self._correction = np.zeros(len(self.draft_names), dtype=np.float32)
        self._model_probs: np.ndarray | None = None
        self._hint: str | None = None
        self._hint_strength = 0.0
        self.last_prediction: dict[str, float] = {}
        self.seconds = 0.0
        """Wall time spent in :meth:`predict` and :meth:`adapt` (the cost to report)."""
        self.calls = 0

    # ------------------------------------------------------------------ inference
    def raw_logits(self, ctx: ContextFeatures) -> np.ndarray:
        """Model logits before online correction and hint."""
        x = feature_vector(ctx, self.hidden_size, self.buckets)
        z = (x - self.mean) / self.std
        z = np.where(np.isfinite(z), z, 0.0).astype(np.float32)
        return z @ self.weight + self.bias

    def predict(self, ctx: ContextFeatures, hint: str | None = None) -> dict[str, float]:
        """Expected acceptance of every draft over the next segment, in [0, 1].

        ``hint`` is a draft name (already mapped from a domain); a *new* hint starts at full
        strength, then fades by ``hint_decay`` per call.
        """
        t0 = time.perf_counter()
        if hint != self._hint:
            self._hint = hint
            self._hint_strength = 1.0 if hint is not None else 0.0
        self._model_probs = _sigmoid(self.raw_logits(ctx))
        probs = np.clip(self._model_probs + self._correction, 0.0, 1.0)
        if self._hint is not None and self._hint in self.draft_names and self._hint_strength > 0.01:
            # A prior blended in probability space, so it counts even against a confident model.
            i = self.draft_names.index(self._hint)
            w = self.hint_weight * self._hint_strength
            probs[i] = probs[i] + w * (1.0 - probs[i])
            self._hint_strength *= self.hint_decay
        self.last_prediction = {n: float(p) for n, p in zip(self.draft_names, probs, strict=True)}
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return dict(self.last_prediction)

    def adapt(self, observed: Mapping[str, float]) -> None:
        """Online correction from the acceptance rates observed for drafts that ran.

        A per-draft residual (probability units) moves a fraction ``adapt_rate`` of the way to
        the observed error of the corrected forecast; residuals of drafts not observed decay
        toward 0, so a correction learned on one topic does not outlive it.
        """
        t0 = time.perf_counter()
        if self._model_probs is not None:
            for i, name in enumerate(self.draft_names):
                if name in observed:
                    current = min(max(self._model_probs[i] + self._correction[i], 0.0), 1.0)
                    self._correction[i] += self.adapt_rate * (observed[name] - current)
                else:
                    self._correction[i] *= self.adapt_decay
        self.seconds += time.perf_counter() - t0

    def reset_online(self) -> None:
        """Forget online corrections and hints (a new, unrelated session)."""
        self._correction[:] = 0.0
        self._hint = None
        self._hint_strength = 0.0

    def restricted_to(self, names: Sequence[str]) -> DraftPredictor:
        """A predictor over a subset of its drafts (catalogue may omit some)."""
        idx = [self.draft_names.index(n) for n in names]
        return DraftPredictor(list(names), self.hidden_size, self.weight[:, idx], self.bias[idx], self.mean,
                              self.std, buckets=self.buckets, meta=self.meta, adapt_rate=self.adapt_rate,
                              adapt_decay=self.adapt_decay, hint_weight=self.hint_weight,
                              hint_decay=self.hint_decay)

    # ------------------------------------------------------------------ persistence
    def save(self, path: Path | str) -> None:
        """Write a small safetensors file (tensors + JSON metadata; no pickle)."""
        from safetensors.numpy import save_file

        meta = {"draft_names": json.dumps(self.draft_names), "hidden_size": str(self.hidden_size),
                "buckets": str(self.buckets), "meta": json.dumps(self.meta), "format": "memspec-predictor-1"}
        save_file({"weight": self.weight, "bias": self.bias, "mean": self.mean, "std": self.std}, str(path),
                  metadata=meta)

    @classmethod
    def load(cls, path: Path | str, draft_names: Sequence[str] | None = None, **kwargs: float) -> DraftPredictor:
        """Read a file written by :meth:`save`; optionally restrict to ``draft_names``."""
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as fh:
            meta = fh.metadata() or {}
            if meta.get("format") != "memspec-predictor-1":
                raise ValueError(f"{path} is not a memspec predictor file")
            t = {k: fh.get_tensor(k) for k in ("weight", "bias", "mean", "std")}
        pred = cls(json.loads(meta["draft_names"]), int(meta["hidden_size"]), t["weight"], t["bias"], t["mean"],
                   t["std"], buckets=int(meta["buckets"]), meta=json.loads(meta.get("meta", "{}")), **kwargs)
        if draft_names is not None:
            missing = [n for n in draft_names if n not in pred.draft_names]
            if missing:
                raise ValueError(f"predictor {path} knows nothing about drafts {missing}; retrain it")
            pred = pred.restricted_to(draft_names)
        return pred
