"""Stop strings: where a turn's text must end, and how much streamed text to hold back.

A client that sends ``stop=["\\nUSER:"]`` wants the answer to end right before the model
starts the next user turn. Two things make that more than ``text.find``:

* The text grows a round at a time, so a stop string can straddle two rounds: the scan of
  each round looks back ``longest - 1`` characters into text already scanned.
* Streaming: a delta ending in ``"\\nUS"`` may be the start of ``"\\nUSER:"``. Sending it
  and then cutting the answer would stream text the result does not contain, so the end of
  the text that is a proper prefix of some stop string is held back until the next round
  says whether the stop string follows (:meth:`StopStrings.held_back`).

Plain text logic, no tokens: cutting the tokens and the KV cache to match is the engine's
job (:meth:`~memspec_ros.core.engine.DecodeState.stop_at`).
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_STOP_STRINGS = 16
"""Most stop strings a request may carry (each is searched for after every round)."""
MAX_STOP_CHARS = 64
"""Longest stop string, in characters (the look-back of every scan and the most held back)."""


def stop_problem(stops: Iterable[str]) -> str | None:
    """Why ``stops`` cannot be used, or None (the reason never repeats their text)."""
    stops = list(stops)
    if len(stops) > MAX_STOP_STRINGS:
        return f"stop has {len(stops)} strings, more than {MAX_STOP_STRINGS}"
    for i, stop in enumerate(stops):
        if not stop:
            return f"stop[{i}] is empty: every stop string needs at least one character"
        if len(stop) > MAX_STOP_CHARS:
            return f"stop[{i}] has {len(stop)} characters, more than {MAX_STOP_CHARS}"
        if "\ufffd" in stop:
            return f"stop[{i}] contains invalid UTF-8 (replacement characters)"
    return None


class StopStrings:
    """A set of stop strings, searched for in a turn's growing text.

    Raises ``ValueError`` for a set :func:`stop_problem` refuses (callers check first).
    """

    def __init__(self, stops: Iterable[str]) -> None:
        stops = list(stops)
        problem = stop_problem(stops)
        if problem is not None:
            raise ValueError(problem)
        self.stops = tuple(dict.fromkeys(stops))  # deduplicated, order kept
        self.longest = max((len(s) for s in self.stops), default=0)
        self._scanned = 0

    def __bool__(self) -> bool:
        return bool(self.stops)

    def find(self, text: str) -> int | None:
        """Index in ``text`` where the first stop string begins, or None.

        ``text`` is the turn's whole text so far; each call scans only what is new since the
        previous call, plus the ``longest`` characters before it (a stop string split across
        rounds, and one more). Trailing replacement characters are not counted as scanned: an
        unfinished multi-byte character shows as one per pending byte with byte-fallback
        tokenizers and shrinks to one character when a later token completes it.
        """
        if not self.stops:
            return None
        start = max(0, self._scanned - self.longest)
        self._scanned = len(text.rstrip("\ufffd"))
        hits = [i for i in (text.find(s, start) for s in self.stops) if i >= 0]
        return min(hits) if hits else None

    def held_back(self, text: str) -> int:
        """Characters at the end of ``text`` that could be the beginning of a stop string.

        The longest proper prefix of any stop string that ``text`` ends with; a complete stop
        string is :meth:`find`'s business, and the text is cut before it is streamed.
        """
        held = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), held, -1):
                if text.endswith(stop[:n]):
                    held = n
                    break
        return held
