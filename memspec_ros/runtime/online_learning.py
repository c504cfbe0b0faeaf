"""A predictor that keeps learning on the robot, from the turns it serves.

The predictor ships trained on dialogues ``memspec_build predictor`` synthesised from the corpora.
A robot's real mix of topics differs and drifts, and every served turn is a free label: run a
resident draft teacher-forced over the turn's tokens (one forward pass, in idle time) and its
argmax at each position says whether it would have been accepted there. Those labels, paired
with the features the runtime saw (the target's hidden states and the recent tokens, exactly as
:func:`~memspec_ros.runtime.predictor_training.examples_from_trace` builds them offline), are
training examples of the same kind the shipped predictor was fitted on.

:class:`OnlineLearner` takes them turn by turn:

* **Prequential guard.** A turn's examples are scored by the learned *and* the shipped weights
  before the learned ones train on them, so every score is on data neither has seen. Over a
  window of recent examples the learner compares the two by regret (acceptance lost by picking
  the forecast-best draft among those labelled).
* **Served only once better.** The learned weights are a challenger: the policy forecasts with
  them only while their window regret is below the shipped weights' by ``promote_margin``, and
  with the shipped weights otherwise. Where the robot's mix is the one the predictor was built
  for, the two are level and the shipped weights keep serving (learning cannot make that case
  worse); where the mix has shifted, the learned weights pull ahead within a few turns and take
  over. When they fall behind by ``fallback_margin`` they are reset to the shipped weights (said
  in :attr:`LearnReport.fell_back`; the node logs it) and learning starts afresh.
* **Only what was seen.** A draft that was not in memory has no label: its column is masked out
  of the loss, so the learner never pushes a forecast toward a guess.
* **Bounded and close to the shipped model.** A few Adam steps per turn on that turn's examples
  plus a bounded replay buffer, with an L2 pull toward the shipped weights: one odd turn moves
  the forecast a little, a consistent new mix moves it all the way.
* **State** is the learned weights and the guard's window; :meth:`state` and :meth:`restore`
  carry it through a file (:mod:`.online_state`) so a restarted node continues.

The predictor object the policy holds is updated in place (its ``weight`` and ``bias`` become
the served weights), under the policy's lock, so a learning step never races a forecast.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .predictor import DraftPredictor


@dataclass(frozen=True)
class LearnReport:
    """What one turn taught the predictor."""

    examples: int
    """Examples the turn gave (positions a check would forecast from, with at least one label)."""
    learned_regret: float | None
    """Regret of the learned weights on those examples, before training on them."""
    shipped_regret: float | None
    """The same for the shipped weights."""
    fell_back: bool = False
    """The learned weights fell behind the shipped ones over the guard's window and were reset."""
    serving_learned: bool = False
    """Whether the policy now forecasts with the learned weights (they beat the shipped ones)."""
    window_learned_regret: float | None = None
    window_shipped_regret: float | None = None
    seconds: float = 0.0
    """Wall time of the whole step (labels included when the runtime measured them)."""
    cancelled: bool = False
    """A goal arrived before the step finished: nothing was learned from this turn."""

    def describe(self) -> str:
        """One line for the log."""
        if self.cancelled:
            return "online learning: cancelled by a goal"
        window = ""
        if self.window_learned_regret is not None and self.window_shipped_regret is not None:
            window = (f"; recent regret learned {self.window_learned_regret:.3f} vs shipped "
                      f"{self.window_shipped_regret:.3f}")
        head = "online learning fell back to the shipped predictor" if self.fell_back else "online learning"
        serving = "learned" if self.serving_learned else "shipped"
        return f"{head}: {self.examples} examples in {self.seconds * 1e3:.0f} ms{window}; serving the {serving} weights"


def masked_regret(probs: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per example: best labelled acceptance minus the labelled acceptance of the forecast-best draft.

    Only labelled drafts (``mask``) compete: a draft that was not in memory has no label.
    """
    neg = np.where(mask, probs, -np.inf)
    pick = neg.argmax(axis=1)
    best = np.where(mask, labels, -np.inf).max(axis=1)
    return best - labels[np.arange(len(labels)), pick]


class OnlineLearner:
    """Trains ``predictor`` (in place) from served turns, guarded against the shipped weights.

    Args:
        predictor: the policy's predictor; its weights at construction are the *shipped* ones.
        lock: taken around every change of the predictor's weights (the policy's lock).
        lr: Adam step size; ``steps`` per turn; ``l2``: pull toward the shipped weights. At 0.03 the
            learned forecasts moved enough to churn the working set on the zoo's own mix (47% more
            loads, 7% slower in simulation); at 0.01 they stayed level with the shipped weights there
            and still followed a shifted mix (``bench.learning_shift``).
        replay: examples kept to train on again (bounded memory).
        window: examples the guard compares regret over; ``min_window`` before it may act.
        fallback_margin: how much worse (regret, acceptance units) the learned weights may be
            before they are reset.
        promote_margin: how much better they must be to serve (see the module doc).
    """

    def __init__(self, predictor: DraftPredictor, *, lock: threading.RLock | None = None, lr: float = 0.01,
                 steps: int = 8, l2: float = 1e-2, replay: int = 512, window: int = 256, min_window: int = 64,
                 fallback_margin: float = 0.01, promote_margin: float = 0.01) -> None:
        self.predictor = predictor
        self._lock = lock or threading.RLock()
        self._step_lock = threading.Lock()
        """Held through :meth:`learn`, :meth:`reset` and :meth:`restore`: a reset from a service thread
        cannot interleave with a step on the learning thread (whose weights would then overwrite it)."""
        self.shipped_weight = predictor.weight.copy()
        self.shipped_bias = predictor.bias.copy()
        self.learned_weight = self.shipped_weight.copy()
        self.learned_bias = self.shipped_bias.copy()
        """The challenger: trained every turn, served only while it beats the shipped weights."""
        self.lr, self.steps, self.l2 = lr, steps, l2
        self.settings = {"lr": lr, "steps": steps, "l2": l2, "replay": replay, "window": window,
                         "min_window": min_window, "fallback_margin": fallback_margin,
                         "promote_margin": promote_margin}
        """The constructor's settings (a learner rebuilt for another policy's predictor keeps them)."""
        self.fallback_margin = fallback_margin
        self.promote_margin = promote_margin
        self.min_window = min_window
        self._replay: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque(maxlen=replay)
        self._regrets: deque[tuple[float, float]] = deque(maxlen=window)
        self._adam = self._fresh_adam()
        self._t = 0
        self._serving_learned = False
        self.examples_seen = 0
        self.fallbacks = 0

    # ------------------------------------------------------------------ learning
    def learn(self, x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> LearnReport:
        """One turn's examples: features ``[N, D]`` (raw, as :func:`feature_vector` gives them),
        labels ``[N, M]`` in the predictor's draft order, ``mask`` ``[N, M]`` (True: labelled)."""
        with self._step_lock:
            return self._learn(x, y, mask)

    def _learn(self, x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> LearnReport:
        keep = mask.any(axis=1)
        x, y, mask = x[keep], y[keep].astype(np.float32), mask[keep]
        if len(x) == 0:
            return LearnReport(0, None, None)
        z = self._standardise(x)
        learned = masked_regret(_sigmoid(z @ self.learned_weight + self.learned_bias), y, mask)
        shipped = masked_regret(_sigmoid(z @ self.shipped_weight + self.shipped_bias), y, mask)
        self._regrets.extend(zip(learned.tolist(), shipped.tolist(), strict=True))
        window_l, window_s = self._window()
        fell_back = len(self._regrets) >= self.min_window and window_l > window_s + self.fallback_margin
        if fell_back:
            self._reset()
            self.fallbacks += 1
        for row in zip(z, y, mask, strict=True):
            self._replay.append(row)
        self._train()
        self._serve()
        self.examples_seen += len(x)
        return LearnReport(len(x), float(learned.mean()), float(shipped.mean()), fell_back=fell_back,
                           window_learned_regret=window_l, window_shipped_regret=window_s,
                           serving_learned=self.serving_learned)

    def _window(self) -> tuple[float, float]:
        """Mean regret of the learned and the shipped weights over the guard's window."""
        if not self._regrets:
            return 0.0, 0.0
        regrets = np.asarray(self._regrets, dtype=np.float64)
        return float(regrets[:, 0].mean()), float(regrets[:, 1].mean())

    @property
    def serving_learned(self) -> bool:
        """Whether the policy forecasts with the learned weights (safe to read from any thread)."""
        return self._serving_learned

    def _serve(self) -> None:
        """Serve the learned weights if they have earned it (a full enough window in which their regret
        is below the shipped weights' by ``promote_margin``), else the shipped ones: one assignment
        into the policy's predictor, under its lock."""
        window_l, window_s = self._window()
        learned = len(self._regrets) >= self.min_window and window_l < window_s - self.promote_margin
        self._serving_learned = learned
        w = self.learned_weight if learned else self.shipped_weight
        b = self.learned_bias if learned else self.shipped_bias
        with self._lock:
            self.predictor.weight, self.predictor.bias = w.copy(), b.copy()

    def reset(self, *, forget_counters: bool = False) -> None:
        """Back to the shipped weights; forget the replay buffer and the guard's window (and, with
        ``forget_counters``, the examples seen and fallbacks: a reset asked for by a user)."""
        with self._step_lock:
            self._reset()
            if forget_counters:
                self.examples_seen = self.fallbacks = 0

    def _reset(self) -> None:
        self.learned_weight = self.shipped_weight.copy()
        self.learned_bias = self.shipped_bias.copy()
        self._serving_learned = False
        with self._lock:
            self.predictor.weight = self.shipped_weight.copy()
            self.predictor.bias = self.shipped_bias.copy()
        self._replay.clear()
        self._regrets.clear()
        self._adam = self._fresh_adam()
        self._t = 0

    @property
    def is_shipped(self) -> bool:
        """Whether nothing has been learned (the learned weights are the shipped ones)."""
        return bool(np.array_equal(self.learned_weight, self.shipped_weight)
                    and np.array_equal(self.learned_bias, self.shipped_bias))

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        p = self.predictor
        return np.nan_to_num((x - p.mean) / p.std).astype(np.float32)

    def _fresh_adam(self) -> list[np.ndarray]:
        return [np.zeros_like(self.shipped_weight), np.zeros_like(self.shipped_weight),
                np.zeros_like(self.shipped_bias), np.zeros_like(self.shipped_bias)]

    def _train(self) -> None:
        """``steps`` Adam steps of masked soft-label cross-entropy on the replay buffer, with L2
        toward the shipped weights; the new weights replace the old in one assignment."""
        z = np.stack([r[0] for r in self._replay])
        y = np.stack([r[1] for r in self._replay])
        m = np.stack([r[2] for r in self._replay]).astype(np.float32)
        w, b = self.learned_weight.copy(), self.learned_bias.copy()
        mw, vw, mb, vb = self._adam
        beta1, beta2, eps = 0.9, 0.999, 1e-8
        count = np.maximum(m.sum(axis=0), 1.0)
        for _ in range(self.steps):
            self._t += 1
            p = _sigmoid(z @ w + b)
            g = (p - y) * m / count  # each draft's loss averaged over its own labelled examples
            gw = z.T @ g + self.l2 * (w - self.shipped_weight)
            gb = g.sum(axis=0) + self.l2 * (b - self.shipped_bias)
            for param, grad, mom, vel in ((w, gw, mw, vw), (b, gb, mb, vb)):
                mom *= beta1
                mom += (1 - beta1) * grad
                vel *= beta2
                vel += (1 - beta2) * grad * grad
                param -= self.lr * (mom / (1 - beta1 ** self._t)) / (np.sqrt(vel / (1 - beta2 ** self._t)) + eps)
        self.learned_weight, self.learned_bias = w.astype(np.float32), b.astype(np.float32)

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, np.ndarray]:
        """What a restarted node needs to continue: the learned weights (served or not) and the guard's window."""
        with self._step_lock:
            w, b = self.learned_weight.copy(), self.learned_bias.copy()
            regrets = np.array(list(self._regrets), dtype=np.float32).reshape(-1, 2)
        return {"weight": w, "bias": b, "regrets": regrets,
                "counters": np.array([self.examples_seen, self.fallbacks], dtype=np.int64)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Continue from :meth:`state` (shapes are checked by the caller, :mod:`.online_state`); the
        window decides again which weights serve."""
        with self._step_lock:
            self.learned_weight = state["weight"].astype(np.float32).copy()
            self.learned_bias = state["bias"].astype(np.float32).copy()
            self._regrets.clear()
            self._regrets.extend((float(a), float(b)) for a, b in state["regrets"])
            self.examples_seen, self.fallbacks = (int(v) for v in state["counters"][:2])
            self._serve()


def examples_from_turn(prompt_ids: Sequence[int], output_ids: Sequence[int], hidden: np.ndarray | None,
                       match: dict[str, np.ndarray], draft_names: Sequence[str], hidden_size: int, *,
                       k: int, max_new_tokens: int, horizon: int = 24, stride: int = 2,
                       min_left: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, mask)`` of one served turn, built as the offline training builds them.

    ``match[d]`` is ``bool[len(output_ids)]`` for each draft that was scored (teacher-forced);
    the others are masked out.
    """
    from .predictor_training import examples_from_trace
    from .traces import DialogueTrace, TurnTrace

    full = {d: match.get(d, np.zeros(len(output_ids), dtype=bool)) for d in draft_names}
    turn = TurnTrace(prompt="", domain=None, max_new_tokens=max_new_tokens, prompt_ids=list(prompt_ids),
                     output_ids=list(output_ids), finish_reason="", match=full, hidden=hidden)
    x, y = examples_from_trace(DialogueTrace("turn", [turn]), draft_names, hidden_size, k=k, horizon=horizon,
                               stride=stride, min_left=min_left)
    mask = np.tile(np.array([d in match for d in draft_names]), (len(x), 1))
    return x, y, mask


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))
