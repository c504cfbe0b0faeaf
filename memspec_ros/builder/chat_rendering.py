"""Chat corpora rendered with the target's own chat template, as the node renders chat goals.

An instruct target is served chat goals: the node renders the conversation with the target
tokenizer's chat template (:func:`memspec_ros.runtime.chat.render_ids`). Drafts trained on that
rendering learn the template's markers and where answers end (the end-of-turn token), and
prompts cut at the generation prompt make the target continue with an answer, as it does when
served. Both renderers come from one tokenizer, so the corpus and the node agree by construction.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memspec_ros.builder.corpora import ChatMessages, ChatRenderer
from memspec_ros.builder.errors import BuildError

PromptRenderer = Callable[[ChatMessages], str]
"""Renders a conversation up to an answer, generation prompt appended."""


def _render(tokenizer, messages: ChatMessages, *, generation_prompt: bool) -> str:
    try:
        return tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in messages], tokenize=False,
                                             add_generation_prompt=generation_prompt)
    except Exception as exc:  # jinja's TemplateError, or raise_exception() inside the template
        raise BuildError(f"the target's chat template refused a conversation of the corpus ({exc}); "
                         "check the roles and their order") from None


def chat_renderers(tokenizer) -> tuple[ChatRenderer, PromptRenderer] | None:
    """``(whole conversation, conversation up to an answer)`` renderers, or None without a template."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    return (lambda m: _render(tokenizer, m, generation_prompt=False),
            lambda m: _render(tokenizer, m, generation_prompt=True))


def target_chat_renderers(target: Path) -> tuple[ChatRenderer, PromptRenderer] | None:
    """:func:`chat_renderers` of the target folder's tokenizer."""
    from memspec_ros.core.model_loading import load_tokenizer

    return chat_renderers(load_tokenizer(target))
