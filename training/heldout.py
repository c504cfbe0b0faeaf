"""Held-out documents and prompts of the zoo; the prompt cutter itself is
:func:`memspec_ros.builder.prompts.make_prompts` (shared with ``memspec_build``)."""
from __future__ import annotations

from memspec_ros.builder.prompts import PROMPT_CHARS, PROMPTS_PER_DOMAIN, make_prompts

HELDOUT_DOC_BUDGET = 140_000
MAX_DOC_CHARS = 24_000

__all__ = ["HELDOUT_DOC_BUDGET", "MAX_DOC_CHARS", "PROMPTS_PER_DOMAIN", "PROMPT_CHARS", "make_prompts"]
