"""Token streams and random training windows.

Each domain's training split is tokenized once (documents joined by EOS) and cached as a
uint16 array, so training steps only slice numpy arrays. Windows are drawn at random offsets
from a seeded generator: cheap, and every run with the same seed sees the same batches.
"""
from __future__ import annotations

import numpy as np
import torch
from transformers import PreTrainedTokenizerFast

from training.corpora.build import corpus_path
from training.corpora.split import read_jsonl
from training.paths import CACHE_DIR

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


class WindowSampler:
    """Draws ``(batch, seq_len + 1)`` windows from weighted domain streams."""

    def __init__(self, streams: dict[str, np.ndarray], weights: dict[str, float],
                 seq_len: int, batch: int, seed: int) -> None:
        self.names = list(streams)
        self.streams = [streams[n] for n in self.names]
        w = np.asarray([weights[n] for n in self.names], dtype=np.float64)
        self.probs = w / w.sum()
        self.seq_len, self.batch = seq_len, batch
        self.rng = np.random.default_rng(seed)

    def next(self) -> torch.Tensor:
        """Return a LongTensor batch; column 0..L-1 are inputs, 1..L the labels."""
        rows = []
        picks = self.rng.choice(len(self.streams), size=self.batch, p=self.probs)
        for k in picks:
            s = self.streams[k]
            start = int(self.rng.integers(0, len(s) - self.seq_len - 1))
            rows.append(s[start:start + self.seq_len + 1].astype(np.int64))
        return torch.from_numpy(np.stack(rows))
