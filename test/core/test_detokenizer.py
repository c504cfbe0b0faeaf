"""Incremental detokenisation is exact across byte-level BPE / UTF-8 boundaries."""

from __future__ import annotations

from memspec_ros.core.detokenizer import IncrementalDetokenizer

TEXT = "Café 東京 🤖 naïve — ok\n  indented"


def _stream(tokenizer, ids, chunk):
    detok = IncrementalDetokenizer(tokenizer)
    pieces = []
    for end in range(chunk, len(ids) + chunk, chunk):
        part = ids[: min(end, len(ids))]
        pieces.append(detok.delta(part, final=len(part) == len(ids)))
    return pieces


def test_deltas_concatenate_to_full_decode(tiny_zoo):
    tokenizer = tiny_zoo.engine.tokenizer
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert len(ids) > len(TEXT) // 3  # multi-byte characters split into several tokens
    for chunk in (1, 2, 3, 5):
        pieces = _stream(tokenizer, ids, chunk)
        assert "".join(pieces) == TEXT
        assert not any("\ufffd" in p for p in pieces), "never emit half a character"


def test_invalid_utf8_flushes_like_full_decode(tiny_zoo):
    tokenizer = tiny_zoo.engine.tokenizer
    ids = tokenizer("東", add_special_tokens=False)["input_ids"]
    prefix = tokenizer("ab", add_special_tokens=False)["input_ids"]
    broken = prefix + ids[:-1] if len(ids) > 1 else prefix + ids
    pieces = _stream(tokenizer, broken, 1)
    assert "".join(pieces) == tokenizer.decode(broken)


def test_special_tokens_are_skipped(tiny_zoo):
    tokenizer = tiny_zoo.engine.tokenizer
    ids = tokenizer("ok", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert "".join(_stream(tokenizer, ids, 1)) == "ok"
