"""Incremental detokenisation for streaming text.

Byte-level BPE tokens do not align with characters: a multi-byte UTF-8 character can be
split across tokens, and decoding a partial sequence then yields U+FFFD. Decoding each new
token on its own is therefore wrong, and re-decoding everything every round is wasteful.
We keep two offsets into the token list (the approach vLLM uses): text is emitted only when
the decoded tail no longer ends in a replacement character, and only the part beyond what
was already emitted. On the final call the remainder is flushed, so the concatenation of
all deltas equals ``tokenizer.decode(all_ids)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

_REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Turns a growing list of token ids into text deltas."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, *, skip_special_tokens: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip_special = skip_special_tokens
        self._prefix_offset = 0
        self._read_offset = 0

    def reset(self) -> None:
        """Start over for a new token list."""
        self._prefix_offset = 0
        self._read_offset = 0

    def truncate(self, n_tokens: int) -> None:
        """The token list was cut to ``n_tokens``: later deltas continue from there.

        Text already returned is not taken back (a stream cannot be); a caller that cuts a
        turn (a stop string) holds back what it may cut before streaming it.
        """
        self._prefix_offset = min(self._prefix_offset, n_tokens)
        self._read_offset = min(self._read_offset, n_tokens)

    def _decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(
            list(ids), skip_special_tokens=self._skip_special, clean_up_tokenization_spaces=False
        )

    def delta(self, token_ids: Sequence[int], *, final: bool = False) -> str:
        """Return the text that ``token_ids`` adds beyond what earlier calls returned.

        ``token_ids`` must extend the list passed previously. With ``final=True`` any held-back
        incomplete character is flushed (as U+FFFD, exactly as a full decode would show it).
        """
        prefix_text = self._decode(token_ids[self._prefix_offset : self._read_offset])
        full_text = self._decode(token_ids[self._prefix_offset :])
        if len(full_text) > len(prefix_text) and (final or not full_text.endswith(_REPLACEMENT)):
            self._prefix_offset = self._read_offset
            self._read_offset = len(token_ids)
            return full_text[len(prefix_text) :]
        return ""
