"""The predictor that keeps learning: guarded steps, masked labels, state on disk, served turns.

The learner's mechanics are checked on hand-made examples (milliseconds); one test runs it the way
the node does, on a real turn of the tiny zoo: teacher-forced labels from the resident drafts, a
learning step, and a cancel that leaves nothing learned.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig, make_policy
from memspec_ros.runtime.ngram_member import NgramSettings
from memspec_ros.runtime.online_learning import OnlineLearner, masked_regret
from memspec_ros.runtime.online_state import FILE_NAME, load_state, save_state

from .hand_built import HIDDEN, constant_predictor
from .rt_tiny_zoo import DIALOGUE

NAMES = ["a", "b", "c"]
D = 2 * HIDDEN + 64


def _turn(rng: np.random.Generator, n: int = 40, *, flip: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Examples where draft a is best when feature 0 is positive and b otherwise (``flip``: the reverse)."""
    x = rng.standard_normal((n, D)).astype(np.float32)
    first = (x[:, 0] > 0) != flip
    y = np.where(first[:, None], [0.8, 0.2, 0.1], [0.2, 0.7, 0.1]).astype(np.float32)
    return x, y


def _learner(**kw) -> OnlineLearner:
    # Shipped: a constant forecast that always prefers c, the worst draft on these examples.
    return OnlineLearner(constant_predictor({"a": 0.3, "b": 0.3, "c": 0.6}, NAMES), **kw)


def test_a_new_mix_is_learned_and_the_guard_keeps_it() -> None:
    rng = np.random.default_rng(0)
    learner = _learner()
    reports = [learner.learn(*_turn(rng), np.ones((40, 3), bool)) for _ in range(20)]
    assert reports[0].learned_regret == pytest.approx(reports[0].shipped_regret), "the first turn: nothing learned yet"
    assert reports[-1].learned_regret < 0.1 < 0.5 < reports[-1].shipped_regret
    assert not any(r.fell_back for r in reports) and not learner.is_shipped
    assert learner.examples_seen == 800
    assert not reports[0].serving_learned, "the learned weights serve only once they have proven better"
    assert learner.serving_learned and reports[-1].serving_learned and "serving the learned" in reports[-1].describe()
    assert np.array_equal(learner.predictor.weight, learner.learned_weight), "and then the policy forecasts with them"


def test_on_the_mix_it_was_built_for_the_shipped_predictor_keeps_serving() -> None:
    """Where the shipped weights are already right, learning cannot beat them by the margin: the policy
    keeps forecasting with the shipped weights, so learning costs that case nothing."""
    rng = np.random.default_rng(4)
    builder = _learner()  # ships a predictor fitted on the mix: a learner's weights after 40 turns of it
    for _ in range(40):
        builder.learn(*_turn(rng), np.ones((40, 3), bool))
    learner = _learner()
    learner.shipped_weight, learner.shipped_bias = builder.learned_weight.copy(), builder.learned_bias.copy()
    learner.reset()
    reports = [learner.learn(*_turn(rng), np.ones((40, 3), bool)) for _ in range(20)]
    assert not any(r.serving_learned for r in reports) and not learner.is_shipped, "it learns, but does not serve"
    assert np.array_equal(learner.predictor.weight, learner.shipped_weight)


def test_drafts_without_a_label_are_left_alone() -> None:
    rng = np.random.default_rng(1)
    learner = _learner()
    mask = np.zeros((40, 3), bool)
    mask[:, :2] = True  # c was not in memory
    for _ in range(5):
        learner.learn(*_turn(rng), mask)
    assert np.array_equal(learner.learned_weight[:, 2], learner.shipped_weight[:, 2])
    assert learner.learned_bias[2] == learner.shipped_bias[2]
    probs = np.array([[0.9, 0.1, 0.99]])
    assert masked_regret(probs, np.array([[0.5, 0.6, 0.0]]), np.array([[True, True, False]]))[0] == \
        pytest.approx(0.1), "an unlabelled draft cannot be picked"


def test_learning_that_falls_behind_the_shipped_weights_is_reset() -> None:
    rng = np.random.default_rng(2)
    # Shipped: already right about the mix (a when feature 0 > 0); the served turns then flip it
    # back and forth, so the learned weights chase each turn and lose to the shipped ones.
    learner = _learner(lr=0.5, steps=20, l2=0.0, replay=40, window=80, min_window=40)
    learner.shipped_weight[0, 0], learner.shipped_weight[0, 1] = 3.0, -3.0
    learner.reset()
    fell = []
    for i in range(30):
        report = learner.learn(*_turn(rng, flip=i % 2 == 0), np.ones((40, 3), bool))
        fell.append(report.fell_back)
        if report.fell_back:
            assert "fell back to the shipped predictor" in report.describe()
    assert any(fell) and learner.fallbacks == sum(fell)


def test_state_survives_a_restart_and_bad_files_are_skipped(tmp_path) -> None:
    rng = np.random.default_rng(3)
    learner = _learner()
    for _ in range(5):
        learner.learn(*_turn(rng), np.ones((40, 3), bool))
    path = tmp_path / "node" / FILE_NAME
    save_state(path, learner)
    assert path.stat().st_size < 64 * 1024 and not list(path.parent.glob(".tmp-*"))
    restarted = _learner()
    assert load_state(path, restarted) is None
    assert np.array_equal(restarted.learned_weight, learner.learned_weight)
    assert np.array_equal(restarted.predictor.weight, learner.predictor.weight), "the window decides alike"
    assert restarted.examples_seen == learner.examples_seen
    assert load_state(tmp_path / "absent" / FILE_NAME, _learner()) is None, "no file yet: nothing to say"

    foreign = OnlineLearner(constant_predictor({"a": 0.5, "b": 0.5, "c": 0.5}, NAMES))
    reason = load_state(path, foreign)
    assert reason is not None and "another predictor" in reason and foreign.is_shipped
    from safetensors.numpy import save_file

    from memspec_ros.runtime.online_state import FORMAT, shipped_digest

    odd = tmp_path / "odd.safetensors"
    bad = {**learner.state(), "counters": np.array(3, dtype=np.int64)}  # a 0-d counter
    save_file(bad, str(odd), metadata={"format": FORMAT, "shipped": shipped_digest(
        learner.predictor, learner.shipped_weight, learner.shipped_bias)})
    fresh = _learner()
    reason = load_state(odd, fresh)
    assert reason is not None and "damaged" in reason and fresh.is_shipped
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(path.read_bytes()[:100])
    fresh = _learner()
    reason = load_state(damaged, fresh)
    assert reason is not None and "not readable" in reason and fresh.is_shipped


def test_a_served_turn_is_learned_once_in_idle_time_and_a_goal_cancels_it(world) -> None:
    policy = make_policy("memspec", predictor=world.predictor.restricted_to(world.catalogue.names))
    config = RuntimeConfig(ngram=NgramSettings())
    with DraftRuntime(world.engine, world.catalogue, Budget.drafts(2), policy, config) as rt:
        learner = rt.enable_learning()
        rt.warm_up()
        assert rt.learn_from_last_turn() is None, "nothing served yet"
        conv = rt.new_conversation()
        rt.generate(DIALOGUE[0].prompt, DIALOGUE[0].max_new_tokens, conversation=conv)
        before = policy.ngram_value.replayed_turns
        report = rt.learn_from_last_turn()
        assert report is not None and report.examples > 0 and report.seconds > 0
        assert policy.ngram_value.replayed_turns == before + 1, "the n-gram lookups were replayed over the turn"
        assert not learner.is_shipped
        assert rt.learn_from_last_turn() is None, "a turn is learned once"
        # A run-time policy change keeps learning into the new policy's predictor.
        successor = make_policy("memspec", predictor=world.predictor.restricted_to(world.catalogue.names))
        rt.set_policy(successor)
        assert rt.learner is not None and rt.learner is not learner and rt.learner.predictor is successor.predictor
        assert np.array_equal(rt.learner.learned_weight, learner.learned_weight)
        assert np.array_equal(successor.predictor.weight, learner.predictor.weight)
        learner = rt.learner
        rt.generate(DIALOGUE[1].prompt, DIALOGUE[1].max_new_tokens, conversation=conv)
        weights = learner.learned_weight.copy()
        cancel = threading.Event()
        cancel.set()
        cancelled = rt.learn_from_last_turn(cancel)
        assert cancelled is not None and cancelled.cancelled and "cancelled" in cancelled.describe()
        assert np.array_equal(learner.learned_weight, weights), "a cancelled step learns nothing"
        rt.set_policy(make_policy("static"))
        assert rt.learner is None, "a policy without a predictor: nothing to learn"
