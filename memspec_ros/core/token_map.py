"""A draft that speaks a subset of the target's vocabulary (``token_map.safetensors``).

Why: a modern target's vocabulary is 128k-256k tokens (Llama 3, Qwen2.5, Gemma 3), and a
small draft's cost is then almost all output head: a 64-wide draft over 151,936 tokens
spends 97% of its multiply-adds there, and its training steps are as slow. The tokens a
robot's dialogue actually uses are a few thousand. So a draft may predict only ``n`` of the
target's tokens (the most frequent in its corpora), as FR-Spec and EAGLE-3's draft
vocabularies do, and this map translates between the two id spaces:

* draft id ``j < n`` is target id ``draft_to_target[j]``;
* draft id ``n`` (:attr:`TokenMap.other`) stands for every other target token: context tokens
  outside the subset are fed to the draft as it, and it is never proposed.

Losslessness does not depend on the map: the draft proposes only subset tokens, and its
distribution is scattered into the target's vocabulary (zero elsewhere) for rejection
sampling, which accepts or corrects against the target's full distribution; greedy
verification compares ids. A token outside the subset is still written, by the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from memspec_ros.core.errors import ModelLoadError

TOKEN_MAP_FILE = "token_map.safetensors"
FORMAT = "memspec-token-map-1"
MAX_TARGET_VOCAB = 1 << 21
"""A file claiming a wider vocabulary is refused before the inverse table is allocated
(the same cap as a config's ``vocab_size``, :mod:`memspec_ros.core.config_sanity`)."""


@dataclass(frozen=True)
class TokenMap:
    """Draft ids <-> target ids for a draft over a subset of the target's vocabulary."""

    draft_to_target: torch.Tensor
    """``[n]`` int64: the target id of each draft id below :attr:`other`."""
    target_vocab_size: int
    """The target's logit width: proposals' distributions are scattered into this many ids."""
    target_to_draft: torch.Tensor = field(init=False, repr=False)
    """``[target_vocab_size]`` int64: each target id's draft id (:attr:`other` outside the subset)."""

    def __post_init__(self) -> None:
        ids = self.draft_to_target
        if ids.dim() != 1 or ids.numel() == 0:
            raise ValueError("a token map needs a non-empty 1-D list of target ids")
        if int(ids.min()) < 0 or int(ids.max()) >= self.target_vocab_size:
            raise ValueError(f"token map ids must lie in [0, {self.target_vocab_size}) (the target's vocabulary)")
        if torch.unique(ids).numel() != ids.numel():
            raise ValueError("token map ids must be distinct")
        inverse = torch.full((self.target_vocab_size,), ids.numel(), dtype=torch.long)
        inverse[ids] = torch.arange(ids.numel())
        object.__setattr__(self, "draft_to_target", ids.to(torch.long))
        object.__setattr__(self, "target_to_draft", inverse)
        # numpy views for the proposer's per-token lookups (a torch index op costs several us)
        object.__setattr__(self, "_to_draft_np", inverse.numpy())
        object.__setattr__(self, "_to_target_np", self.draft_to_target.numpy())

    @classmethod
    def from_ids(cls, target_ids: Sequence[int], target_vocab_size: int) -> TokenMap:
        return cls(torch.tensor(list(target_ids), dtype=torch.long), int(target_vocab_size))

    @property
    def other(self) -> int:
        """The draft id standing for every target token outside the subset (never proposed)."""
        return self.draft_to_target.numel()

    @property
    def draft_vocab_size(self) -> int:
        """The draft model's vocabulary: the subset plus :attr:`other`."""
        return self.other + 1

    @property
    def nbytes(self) -> int:
        """Memory the two index tensors take (counted with the draft)."""
        return (self.draft_to_target.numel() + self.target_to_draft.numel()) * 8

    def to_draft(self, target_ids: Sequence[int]) -> list[int]:
        """Draft ids for context tokens (outside the subset: :attr:`other`)."""
        return self._to_draft_np[np.asarray(target_ids, dtype=np.int64)].tolist()

    def to_target(self, draft_id: int) -> int:
        """The target id of a proposable draft id."""
        return int(self._to_target_np[draft_id])

    def scatter(self, probs: torch.Tensor) -> torch.Tensor:
        """A ``[..., n]`` distribution over the subset as ``[..., target_vocab_size]`` (zero elsewhere)."""
        full = probs.new_zeros((*probs.shape[:-1], self.target_vocab_size))
        full[..., self.draft_to_target.to(probs.device)] = probs
        return full

    def draft_inputs(self, target_ids: torch.Tensor) -> torch.Tensor:
        """A tensor of target ids (a training batch) as draft ids."""
        return self.target_to_draft.to(target_ids.device)[target_ids]

    def top_tokens(self, draft_logits: torch.Tensor) -> torch.Tensor:
        """The draft's argmax over the subset at every position, as target ids."""
        return self.draft_to_target.to(draft_logits.device)[draft_logits[..., :self.other].argmax(-1)]

    def teacher_log_probs(self, target_logits: torch.Tensor) -> torch.Tensor:
        """The target's distribution seen in the draft's vocabulary: ``[..., n + 1]`` log-probabilities,
        the subset's own and, last, the mass of every other token (what 'other' should predict)."""
        log_probs = torch.log_softmax(target_logits.float(), dim=-1)
        subset = log_probs[..., self.draft_to_target.to(target_logits.device)]
        outside = (self.target_to_draft == self.other).to(target_logits.device)
        rest = torch.logsumexp(log_probs[..., outside], dim=-1, keepdim=True)  # exact, however small
        return torch.cat([subset, rest], dim=-1)

    def save(self, folder: Path) -> Path:
        """Write ``token_map.safetensors`` into ``folder`` (a draft's folder)."""
        from safetensors.torch import save_file

        path = Path(folder) / TOKEN_MAP_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({"draft_to_target": self.draft_to_target.to(torch.int64).contiguous()}, str(path),
                  metadata={"format": FORMAT, "target_vocab_size": str(self.target_vocab_size)})
        return path


def load_token_map(folder: Path | str) -> TokenMap | None:
    """The token map of the draft in ``folder``; None when it has none (a full-vocabulary draft).

    Raises :class:`ModelLoadError` naming the file when it is unreadable or inconsistent.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(folder) / TOKEN_MAP_FILE
    if not path.is_file():
        return None
    rebuild = "rebuild the draft with `memspec_build drafts`"
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            ids = fh.get_tensor("draft_to_target")
        if meta.get("format") != FORMAT:
            raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT!r}")
        if ids.is_floating_point() or ids.is_complex():
            raise ValueError(f"draft_to_target holds {ids.dtype} values, not token ids")
        width = int(meta["target_vocab_size"])
        if not 0 < width <= MAX_TARGET_VOCAB:
            raise ValueError(f"target_vocab_size {width} is outside 1..{MAX_TARGET_VOCAB}")
        return TokenMap(ids.to(torch.long), width)
    except (OSError, SafetensorError, KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise ModelLoadError(f"{path}: not a usable token map ({exc}); {rebuild}") from exc


def draft_inputs(target_ids: torch.Tensor, token_map: TokenMap | None) -> torch.Tensor:
    """``target_ids`` as the draft reads them (unchanged for a full-vocabulary draft)."""
    return target_ids if token_map is None else token_map.draft_inputs(target_ids)


def draft_top_tokens(draft_logits: torch.Tensor, token_map: TokenMap | None) -> torch.Tensor:
    """The draft's argmax at every position, as target ids (for teacher-forced agreement)."""
    return draft_logits.argmax(-1) if token_map is None else token_map.top_tokens(draft_logits)
