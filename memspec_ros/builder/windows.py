"""Token streams and random training windows.

A domain's training documents are tokenised once and joined by EOS into one id array, so
training steps only slice numpy arrays. Windows are drawn at random offsets from a seeded
generator: cheap, and every run with the same seed sees the same batches.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase


def token_array(docs: Sequence[str], tok: PreTrainedTokenizerBase, eos_id: int) -> np.ndarray:
    """The token ids of ``docs``, each followed by ``eos_id``, as one array.

    uint16 when the vocabulary fits (the zoo's 4096 tokens), uint32 otherwise (a user's
    target may have 150k tokens): the arrays of a large corpus stay small either way.
    """
    ids: list[int] = []
    # verbose=False: whole documents are longer than the model's context by design (training
    # windows are cut from the stream later); transformers would warn about every such corpus.
    for enc in tok(list(docs), add_special_tokens=False, verbose=False)["input_ids"]:
        ids.extend(enc)
        ids.append(eos_id)
    dtype = np.uint16 if max(ids, default=0) < 1 << 16 else np.uint32
    return np.asarray(ids, dtype=dtype)


class WindowSampler:
    """Draws ``(batch, seq_len + 1)`` windows from weighted domain streams."""

    def __init__(self, streams: dict[str, np.ndarray], weights: dict[str, float],
                 seq_len: int, batch: int, seed: int) -> None:
        self.names = list(streams)
        self.streams = [streams[n] for n in self.names]
        short = [n for n, s in zip(self.names, self.streams, strict=True) if len(s) < seq_len + 2]
        if short:
            raise ValueError(f"streams {short} are shorter than one window of {seq_len + 1} tokens")
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
