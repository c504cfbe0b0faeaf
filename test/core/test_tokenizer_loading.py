"""A user's own tokenizer is served exactly as its ``tokenizer.json`` says, whatever the family.

transformers 5's ``AutoTokenizer`` maps a folder whose ``tokenizer_config.json`` names the
generic class to the model family's own class (``Qwen2Tokenizer`` for ``model_type: qwen2``),
which rebuilds normaliser, pre-tokeniser and decoder over the file's vocabulary. A target
trained on its own tokenizer would then be fed text cut differently from its training text.
"""

from __future__ import annotations

import json

import pytest
from conftest import train_tokenizer
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from memspec_ros.core.model_loading import load_tokenizer

TEXTS = ["my $self = shift;\n    return 12345;", "USER: bring the red cup from the kitchen\nROBOT: Fetching it.",
         "Ünïcödé — “quotes” 3.14159", "  leading spaces\n\n\ttabs"]


def unigram_tokenizer() -> PreTrainedTokenizerFast:
    """SentencePiece-style: NFKC, ``▁`` word boundaries, a ``<s>`` the tokenizer adds itself."""
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(TEXTS * 20, trainers.UnigramTrainer(
        vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>", show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


@pytest.mark.parametrize("model_type", ["qwen2", "llama", "gpt2", "gemma2"])
@pytest.mark.parametrize("kind", ["unigram", "byte-level BPE"])
def test_own_tokenizer_encodes_and_decodes_as_its_file_says(tmp_path, model_type, kind) -> None:
    tokenizer = unigram_tokenizer() if kind == "unigram" else train_tokenizer(300, " ".join(TEXTS * 20))
    tokenizer.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    as_saved = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    loaded = load_tokenizer(tmp_path)
    for text in TEXTS:
        ids = loaded(text)["input_ids"]
        assert ids == as_saved.encode(text).ids, (model_type, kind, text)
        assert loaded.decode(ids, skip_special_tokens=True) == as_saved.decode(ids), (model_type, kind, text)
    assert (loaded.bos_token, loaded.eos_token) == (tokenizer.bos_token, tokenizer.eos_token)


def test_a_named_tokenizer_class_is_still_honoured(tmp_path) -> None:
    """A checkpoint that names its own class (as the Hub's Qwen2 and Gemma ones do) gets that class."""
    train_tokenizer(300, " ".join(TEXTS * 20)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "GPT2Tokenizer"}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert type(load_tokenizer(tmp_path)).__name__ == "GPT2Tokenizer"


def test_a_sentencepiece_only_tokenizer_is_converted_and_agrees_with_sentencepiece(tmp_path) -> None:
    """OpenLLaMA and many Llama 2 fine-tunes ship ``tokenizer.model`` and no ``tokenizer.json``:
    loading converts it (sentencepiece and protobuf are in requirements.txt); without them the
    load failed with transformers' last fallback's complaint, "tiktoken is required"."""
    import sentencepiece as spm

    text = tmp_path / "text.txt"
    text.write_text("\n".join(TEXTS * 30))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "m"), vocab_size=400,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0, pad_id=0,
                                   unk_id=1, bos_id=2, eos_id=3, minloglevel=2)
    folder = tmp_path / "target"
    folder.mkdir()
    (tmp_path / "m.model").rename(folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    tokenizer = load_tokenizer(folder)
    reference = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    sentence = "USER: bring the red cup from the kitchen"
    assert tokenizer(sentence, add_special_tokens=False)["input_ids"] == reference.encode(sentence)
    assert tokenizer.decode(tokenizer(sentence)["input_ids"], skip_special_tokens=True) == sentence
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (2, 3)
