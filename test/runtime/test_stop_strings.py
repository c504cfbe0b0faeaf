"""Stop strings as text: where a turn ends, and what a stream holds back (no models, milliseconds)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from memspec_ros.runtime.round_execution import RoundOutcome
from memspec_ros.runtime.stop_strings import MAX_STOP_CHARS, MAX_STOP_STRINGS, StopStrings, stop_problem
from memspec_ros.runtime.turn_progress import TextStream


def test_the_first_stop_string_wins_wherever_it_starts() -> None:
    stops = StopStrings(["\nUSER:", "[cmd]"])
    assert stops.find("Okay.\n[cmd] go\nUSER: hi") == 6
    assert StopStrings(["\nUSER:"]).find("no stop here") is None
    assert not StopStrings([]) and StopStrings([]).find("anything") is None


def test_a_stop_string_split_across_rounds_is_found() -> None:
    stops = StopStrings(["\nUSER:"])
    text = ""
    for piece in ("Okay. Moving", " forward.\nU", "SE", "R: next"):
        text += piece
        at = stops.find(text)
        if at is not None:
            break
    assert at == len("Okay. Moving forward.")


@pytest.mark.parametrize(("text", "held"), [
    ("Okay.\nUS", 3),      # could become "\nUSER:"
    ("Okay.\n", 1),
    ("Okay.", 0),
    ("Okay.\nUX", 0),      # no longer a prefix
    ("a [cm", 3),          # the other stop string
    ("\nUSER", 5),         # longest proper prefix; the whole string would be found, not held
])
def test_a_tail_that_may_begin_a_stop_string_is_held_back(text: str, held: int) -> None:
    assert StopStrings(["\nUSER:", "[cmd]"]).held_back(text) == held


@pytest.mark.parametrize(("stops", "needle"), [
    ([""], "empty"),
    (["x" * (MAX_STOP_CHARS + 1)], "characters"),
    (["a"] * (MAX_STOP_STRINGS + 1), "more than"),
    (["bad \ufffd"], "UTF-8"),
])
def test_unusable_stop_strings_are_refused_with_a_reason(stops, needle) -> None:
    problem = stop_problem(stops)
    assert problem is not None and needle in problem
    with pytest.raises(ValueError, match=needle):
        StopStrings(stops)


@dataclass
class FakeTurn:
    """What TextStream reads of a decoding state: the turn's text so far and its tokens."""

    text_so_far: str = ""
    output_ids: list[int] = field(default_factory=list)
    done: bool = False

    def text(self) -> str:
        return self.text_so_far


def _outcome() -> RoundOutcome:
    return RoundOutcome(draft=None, proposed=0, accepted=0, emitted_ids=[1], hidden=None, draft_s=0.0, verify_s=0.0)


def test_deltas_hold_back_a_possible_stop_and_an_incomplete_character() -> None:
    deltas: list[str] = []
    stream = TextStream(lambda p: deltas.append(p.delta), stops=StopStrings(["\nUSER:"]))
    turn = FakeTurn()
    for text in ("Okay", "Okay.\nUS", "Okay.\nUSB cable\ufffd", "Okay.\nUSB cable\u00e9"):
        turn.text_so_far = text
        stream.round(_outcome(), turn)
    assert deltas == ["Okay", ".", "\nUSB cable", "\u00e9"]
    turn.text_so_far += "\nUS"  # the turn ended here (length): what was held back is sent
    turn.done = True
    stream.close(turn)
    assert "".join(deltas) == turn.text_so_far


def test_a_cut_turn_streams_nothing_past_its_stop() -> None:
    """The engine cuts the text before the stream sees it; held-back text that was not the stop is sent."""
    deltas: list[str] = []
    stream = TextStream(lambda p: deltas.append(p.delta), stops=StopStrings(["\nUSER:"]))
    turn = FakeTurn("Done.\n")
    stream.round(_outcome(), turn)
    assert deltas == ["Done."]
    turn.text_so_far, turn.done = "Done.", True  # the next round found "\nUSER:" and cut the turn
    stream.round(_outcome(), turn)
    stream.close(turn)
    assert "".join(deltas) == "Done."
