"""Shared byte-level BPE tokenizer (4096 tokens) for the target and every draft.

Speculative decoding needs the draft and the target to agree on token ids, so there is
exactly one tokenizer, trained on an equal-size sample of every domain so that no domain is
starved of merges. Byte-level BPE round-trips any text exactly (newlines, indentation).
"""
from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from training.corpora.build import corpus_path
from training.corpora.split import read_jsonl
from training.paths import DOMAINS, TOKENIZER_DIR

VOCAB_SIZE = 4096
BOS, EOS, PAD = "<s>", "</s>", "<pad>"
SAMPLE_CHARS_PER_DOMAIN = 1_500_000
CHAT_TEMPLATE = (Path(__file__).with_name("chat_template.jinja")).read_text()
"""The chat template every zoo member's tokenizer carries: renders messages as the robot corpus
(``training/corpora/robot.py``) writes dialogues, "USER: ...\nROBOT: ...\n" lines."""


def _training_sample() -> list[str]:
    """Equal character budget per domain, from the training split only."""
    sample: list[str] = []
    for domain in DOMAINS:
        budget = SAMPLE_CHARS_PER_DOMAIN
        for doc in read_jsonl(corpus_path(domain, "train")):
            sample.append(doc[:budget])
            budget -= len(doc)
            if budget <= 0:
                break
    return sample


def train_tokenizer(out_dir: Path = TOKENIZER_DIR) -> PreTrainedTokenizerFast:
    """Train the BPE model and save it as a ``PreTrainedTokenizerFast`` directory."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_sample(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(out_dir)
    return fast


def load_tokenizer(path: Path = TOKENIZER_DIR) -> PreTrainedTokenizerFast:
    """Load the shared tokenizer (the same files are copied into every model dir)."""
    return PreTrainedTokenizerFast.from_pretrained(path)
