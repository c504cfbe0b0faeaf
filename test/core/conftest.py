"""Fixtures for the core-layer tests.

Tiny, randomly initialised Llama models are saved under a session tmp dir and loaded back
through the public loading code. Random weights give little acceptance, so alongside
independent random drafts there are "noisy copies" of the target (partial acceptance) and
an exact copy (everything accepted, exercising bonus tokens). The real zoo, once trained,
is used by ``test_zoo.py`` and skipped with a reason while it is absent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerFast

from memspec_ros.bundled_models import bundled_zoo_root
from memspec_ros.core.engine import SpeculativeEngine
from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
from memspec_ros.core.proposer import DraftProposer

TEXT = (
    "The robot moves to the kitchen and picks up the red cup. "
    "def add(a, b):\n    return a + b\n"
    "Solve 3x + 5 = 20, so x = 5. The licensee shall not redistribute the software. "
    "Café crème, naïve façade, 東京 and emoji 🤖 appear too. "
) * 20

# MEMSPEC_TEST_ZOO points the zoo tests at another zoo directory (e.g. a candidate build).
ZOO = Path(os.environ.get("MEMSPEC_TEST_ZOO") or bundled_zoo_root())
ZOO_DRAFTS = ("robot", "code", "math", "legal", "prose", "general")


def zoo_ready() -> bool:
    """True once the trained zoo (target and every draft) is on disk."""
    return all((ZOO / name / "model.safetensors").exists()
               for name in ("target", *(f"draft-{d}" for d in ZOO_DRAFTS)))


@pytest.fixture(autouse=True, scope="module")
def _single_torch_thread():
    """Run core tests on one intra-op thread, restoring the previous setting afterwards.

    The models here are tiny, so a second thread buys nothing, and on a shared 2-core
    machine two threads contending with another process slow every step down severalfold.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def train_tokenizer(vocab_size: int, text: str = TEXT) -> PreTrainedTokenizerFast:
    """A small byte-level BPE tokenizer like the zoo's (pad, bos, eos specials)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator([text], trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        clean_up_tokenization_spaces=False,
    )


def word_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A tokenizer whose tokens are ``t0``..``t{n-1}``: for tests that only need ids."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="t0")))


def tiny_llama(vocab: int, hidden: int, layers: int, seed: int, *, eos: int | None = 2,
               init_range: float = 0.25, max_positions: int = 256) -> LlamaForCausalLM:
    """A random Llama with peaked enough logits that argmax ties are practically impossible."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=max_positions, tie_word_embeddings=False,
        initializer_range=init_range, bos_token_id=1, eos_token_id=eos, pad_token_id=0,
    )
    return LlamaForCausalLM(config).eval()


def noisy_copy(model: PreTrainedModel, noise: float, seed: int) -> PreTrainedModel:
    """The same architecture with perturbed weights: a draft that agrees only partly."""
    torch.manual_seed(seed)
    copy = type(model)(model.config).eval()
    with torch.no_grad():
        for (_, dst), (_, src) in zip(copy.named_parameters(), model.named_parameters(), strict=True):
            dst.copy_(src + noise * src.std() * torch.randn_like(src))
    return copy


def save(model: PreTrainedModel, tokenizer, path: Path) -> Path:
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@dataclass
class TinyZoo:
    """Directories and loaded objects of the tiny test zoo."""

    root: Path
    engine: SpeculativeEngine
    drafts: dict[str, DraftProposer]
    vocab: int

    def fresh_draft(self, name: str) -> DraftProposer:
        """A new proposer (empty cache) for the named draft model."""
        return DraftProposer(self.drafts[name].model, name)


@pytest.fixture(scope="session")
def tiny_zoo(tmp_path_factory) -> TinyZoo:
    root = tmp_path_factory.mktemp("tiny_zoo")
    tokenizer = train_tokenizer(320)
    vocab = len(tokenizer)
    target = tiny_llama(vocab, 64, 2, seed=0)
    save(target, tokenizer, root / "target")
    save(tiny_llama(vocab, 32, 1, seed=1), tokenizer, root / "draft-random")
    save(noisy_copy(target, 0.05, seed=2), tokenizer, root / "draft-noisy")
    save(noisy_copy(target, 0.0, seed=3), tokenizer, root / "draft-exact")
    tok = load_tokenizer(root / "target", allowed_roots=[root])
    engine = SpeculativeEngine(load_causal_lm(root / "target", allowed_roots=[root]), tok)
    drafts = {
        name: DraftProposer(load_causal_lm(root / f"draft-{name}", allowed_roots=[root]), name)
        for name in ("random", "noisy", "exact")
    }
    return TinyZoo(root, engine, drafts, vocab)


@pytest.fixture(scope="session")
def zoo_engine() -> tuple[SpeculativeEngine, dict[str, DraftProposer]]:
    """The real zoo through the public loading code (skipped while it is not trained yet)."""
    if not zoo_ready():
        pytest.fail(f"model zoo not present under {ZOO} (it is committed; rebuild with make zoo)")
    from memspec_ros.core.model_loading import load_draft_model

    tok = load_tokenizer(ZOO / "target", allowed_roots=[ZOO])
    engine = SpeculativeEngine(load_causal_lm(ZOO / "target", allowed_roots=[ZOO]), tok)
    drafts = {
        d: DraftProposer(load_draft_model(ZOO / f"draft-{d}", tok, allowed_roots=[ZOO]), d)
        for d in ZOO_DRAFTS
    }
    return engine, drafts
