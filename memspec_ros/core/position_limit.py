"""How many positions a model attends over, whatever its config calls the limit.

Most configs say ``max_position_embeddings`` (GPT-2's ``n_positions`` maps onto it); MPT says
``max_seq_len``; BLOOM says nothing, because ALiBi attention has no learned or rotary table to
run out of. The engine needs a context bound all the same (it refuses sessions that would
outgrow it) and so does the memory budget (a draft's KV cache is counted at full context), so
a model without one gets :data:`UNBOUNDED_DEFAULT`, which the node's ``max_context`` parameter
can raise.
"""

from __future__ import annotations

from transformers import PretrainedConfig

UNBOUNDED_DEFAULT = 2048
"""Context assumed for a model whose config sets no position limit (ALiBi: BLOOM)."""

_LIMIT_FIELDS = ("max_position_embeddings", "max_seq_len")


def position_limit(config: PretrainedConfig) -> int | None:
    """The config's own position limit, or None when the architecture has none.

    Read from the text model's config: a multimodal wrapper (Gemma 3) keeps it there.
    """
    config = config.get_text_config()
    for name in _LIMIT_FIELDS:
        value = getattr(config, name, None)
        if value:
            return int(value)
    return None


def context_bound(config: PretrainedConfig) -> int:
    """The position limit, or :data:`UNBOUNDED_DEFAULT` for a model without one."""
    return position_limit(config) or UNBOUNDED_DEFAULT
