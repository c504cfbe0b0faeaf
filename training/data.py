"""Token streams of the zoo corpora (cached); the window sampler is
:class:`memspec_ros.builder.windows.WindowSampler`.

Each domain's training split is tokenized once (documents joined by EOS) and cached as a
uint16 array, so training steps only slice numpy arrays. Windows are drawn at random offsets
from a seeded generator: cheap, and every run with the same seed sees the same batches.
"""
from __future__ import annotations

import numpy as np
from transformers import PreTrainedTokenizerFast

from memspec_ros.builder.windows import WindowSampler
from training.corpora.build import corpus_path
from training.corpora.split import read_jsonl
from training.paths import CACHE_DIR

__all__ = ["WindowSampler", "token_stream"]

TOKENS_DIR = CACHE_DIR / "tokens"


def token_stream(domain: str, tok: PreTrainedTokenizerFast, split: str = "train") -> np.ndarray:
    """Return (and cache) the concatenated token ids of a domain split."""
    path = TOKENS_DIR / f"{domain}.{split}.npy"
    if path.exists():
        return np.load(path)
    docs = read_jsonl(corpus_path(domain, split))
    ids: list[int] = []
    for enc in tok(docs, add_special_tokens=False)["input_ids"]:
        ids.extend(enc)
        ids.append(tok.eos_token_id)
    arr = np.asarray(ids, dtype=np.uint16)
    TOKENS_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, arr)
    return arr
