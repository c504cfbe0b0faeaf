"""Bad requests fail early with InvalidRequestError and a message that says what is wrong."""

from __future__ import annotations

import pytest

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.errors import InvalidRequestError
from memspec_ros.core.sampling import SamplingParams


@pytest.mark.parametrize("prompt", ["", []])
def test_empty_prompt(tiny_zoo, prompt):
    with pytest.raises(InvalidRequestError, match="empty"):
        tiny_zoo.engine.start(prompt, 4)


@pytest.mark.parametrize("n", [0, -3, 2.5, True])
def test_bad_max_new_tokens(tiny_zoo, n):
    with pytest.raises(InvalidRequestError, match="max_new_tokens"):
        tiny_zoo.engine.start("hello", n)


def test_prompt_past_the_context_window(tiny_zoo):
    engine = tiny_zoo.engine
    limit = engine.max_context
    with pytest.raises(InvalidRequestError, match="context window"):
        engine.start([5] * (limit - 3), 4)
    engine.start([5] * (limit - 4), 4)  # exactly fits
    with pytest.raises(InvalidRequestError, match="context window"):
        engine.target_greedy([5] * limit, 1)


def test_token_ids_outside_vocabulary(tiny_zoo):
    with pytest.raises(InvalidRequestError, match="outside"):
        tiny_zoo.engine.start([1, tiny_zoo.vocab], 4)


@pytest.mark.parametrize("k", [0, -1, 65, 2.0, None])
def test_bad_k(tiny_zoo, k):
    session = tiny_zoo.engine.start("hello", 4)
    with pytest.raises(InvalidRequestError, match="k must be"):
        session.step(tiny_zoo.fresh_draft("noisy"), k)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_sampling_params(kwargs, match):
    with pytest.raises(InvalidRequestError, match=match):
        SamplingParams(**kwargs)


def test_session_lifecycle_errors(tiny_zoo):
    engine = tiny_zoo.engine
    session = engine.start("hello", 2)
    with pytest.raises(InvalidRequestError, match="still running"):
        session.continue_with(" more", 2)
    while not session.done:
        session.step(None)
    with pytest.raises(InvalidRequestError, match="finished"):
        session.step(None)
    with pytest.raises(InvalidRequestError, match="context window"):
        session.continue_with([5], engine.max_context)


def test_max_context_cannot_exceed_the_model(tiny_zoo):
    engine = tiny_zoo.engine
    with pytest.raises(InvalidRequestError, match="position limit"):
        SpeculativeEngine(engine.target, engine.tokenizer, max_context=engine.max_context + 1)
    small = SpeculativeEngine(engine.target, engine.tokenizer, max_context=16)
    with pytest.raises(InvalidRequestError, match="context window is 16"):
        small.start([5] * 10, 7)
