"""A stop cut inside a token keeps exactly the text the client saw, whatever the tokenizer's habits.

Metaspace tokenizers (Llama-2, Mistral, Gemma) encode a word-initial piece with a leading "▁":
re-encoding the part of a cut token before the stop could then add a space nobody received.
Byte-fallback tokenizers show an unfinished character as one replacement character per byte,
which shrinks when it completes: a stop-string scan must not skip past it.
"""

from __future__ import annotations

from conftest import TEXT, tiny_llama
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.runtime.stop_strings import StopStrings


def _metaspace_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                  show_progress=False)
    tok.train_from_iterator([TEXT], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", clean_up_tokenization_spaces=False)


def test_every_cut_keeps_exactly_the_text_before_it_with_a_metaspace_tokenizer() -> None:
    tokenizer = _metaspace_tokenizer()
    engine = SpeculativeEngine(tiny_llama(len(tokenizer), 32, 1, seed=5, eos=None), tokenizer)
    prompt = "the robot"
    text = engine.generate(prompt, None, max_new_tokens=16).text()
    assert len(text) > 8
    for chars in range(len(text) + 1):
        state = engine.generate(prompt, None, max_new_tokens=16)
        state.stop_at(chars)
        assert state.text() == text[:chars], (chars, state.text(), text[:chars])
        assert len(state.token_ids) == state.scorer.cache_length + 1, "the cache covers all but the last token"


def test_a_stop_string_completed_by_a_later_byte_is_still_found() -> None:
    stops = StopStrings(["\U0001f600"])
    assert stops.find("ab\ufffd\ufffd\ufffd") is None  # byte fallback: one replacement per pending byte
    assert stops.find("ab\U0001f600 and more") == 2
