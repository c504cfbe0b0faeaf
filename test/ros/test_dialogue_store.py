"""Session ownership, count and byte budgets, idle timeout: the store on real conversations, no node."""

from __future__ import annotations

import pytest

from memspec_ros.ros.dialogue_store import DialogueStore


class _Clock:
    """A settable time source for the idle timeout (the store takes its clock as a parameter)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _talk(store: DialogueStore, sid: str, engine, token: str = "") -> str:
    """Claim ``sid``, run one real turn in it, release it; return its token."""
    claim = store.claim(sid, token)
    assert claim.problem is None, claim.problem
    conv = store.get(sid).conversation
    if conv.state is None:
        conv.state = engine.start("USER: hello robot\nROBOT:", 4)
    else:
        conv.state.continue_with("\nUSER: and then?\nROBOT:", 4)
    while not conv.state.done:
        conv.state.step(None)
    conv.turns += 1
    store.release(sid)
    return claim.token


def test_a_session_belongs_to_the_client_holding_its_token(zoo_engine) -> None:
    store = DialogueStore(4)
    token = _talk(store, "kitchen", zoo_engine)
    assert len(token) >= 32
    stranger = store.claim("kitchen", "")
    assert stranger.problem and "belongs to another client" in stranger.problem
    assert store.claim("kitchen", token[:-1] + ("x" if token[-1] != "x" else "y")).problem
    assert _talk(store, "kitchen", zoo_engine, token) == token  # the owner continues
    assert store.get("kitchen").conversation.turns == 2
    assert _talk(store, "other", zoo_engine) != token


def test_count_and_byte_budgets_drop_least_recently_used_idle_sessions(zoo_engine) -> None:
    dropped: list[tuple[str, str]] = []
    store = DialogueStore(2, on_drop=lambda sid, why: dropped.append((sid, why)))
    for sid in ("a", "b", "c"):
        _talk(store, sid, zoo_engine)
    assert "a" not in store and "b" in store and "c" in store and "max_sessions" in dropped[0][1]

    one = store.get("b").conversation.kv_bytes
    assert one > 0
    budget = DialogueStore(10, budget_bytes=int(one * 3.5), on_drop=lambda sid, why: dropped.append((sid, why)))
    tokens = {sid: _talk(budget, sid, zoo_engine) for sid in ("x", "y")}
    _talk(budget, "x", zoo_engine, tokens["x"])  # x becomes most recently used and grows
    _talk(budget, "z", zoo_engine)
    assert "y" not in budget and "x" in budget and "z" in budget
    assert "session_budget_bytes" in dropped[-1][1]
    assert budget.kv_bytes() <= int(one * 3.5)


def test_a_pinned_session_is_never_dropped(zoo_engine) -> None:
    store = DialogueStore(1)
    token = _talk(store, "held", zoo_engine)
    assert store.claim("held", token).problem is None  # a goal holds it now
    _talk(store, "newer", zoo_engine)
    assert "held" in store
    store.release("held")
    _talk(store, "newest", zoo_engine)
    assert "held" not in store


@pytest.mark.parametrize("timeout", [0.0, 60.0])
def test_idle_sessions_expire(zoo_engine, timeout) -> None:
    clock = _Clock()
    store = DialogueStore(10, idle_timeout_s=timeout, clock=clock)
    _talk(store, "quiet", zoo_engine)
    clock.now = 61.0
    store.expire()
    assert ("quiet" in store) == (timeout == 0.0)


def test_a_session_is_a_prompt_or_a_chat_session_from_its_first_goal() -> None:
    """The first goal fixes the kind; the other kind is refused at goal time with the way out."""
    store = DialogueStore(4)
    chat = store.claim("chat", "", chat=True)
    assert chat.problem is None and store.get("chat").conversation.is_chat
    refused = store.claim("chat", chat.token)
    assert refused.problem is not None and "opened with messages" in refused.problem
    prompt = store.claim("text", "")
    assert "opened with prompt" in store.claim("text", prompt.token, chat=True).problem
    assert store.claim("chat", chat.token, chat=True).problem is None
