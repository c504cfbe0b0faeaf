"""Prompts cut from documents: what the target continues when traces are recorded.

The zoo and ``memspec_build`` cut evaluation prompts from held-out documents only, and the
predictor's training prompts from training documents only, with this one procedure. A prompt
is a line-aligned slice of a document of roughly ``PROMPT_CHARS`` characters, so the target
continues it in the document's own domain. Domains with few, long documents (code, legal)
yield several prompts per document, at evenly spaced line offsets; domains with many short
documents yield one prompt per document.
"""
from __future__ import annotations

import math

PROMPTS_PER_DOMAIN = 24
PROMPT_CHARS = 120


def _prompt_from(doc: str, begin: int, limit: int) -> str:
    """Whole lines of ``doc`` from offset ``begin`` up to ``limit`` chars (a contiguous
    substring, so the prompt provably comes from the held-out document); an over-long first
    line is cut at a space."""
    end = begin
    while end < len(doc):
        nl = doc.find("\n", end)
        line_end = len(doc) if nl < 0 else nl + 1
        if end > begin and line_end - begin > limit:
            break
        end = line_end
        if end - begin >= limit * 0.6:
            break
    out = doc[begin:end]
    if len(out) > limit:
        cut = out.rfind(" ", 0, limit)
        out = out[:cut if cut > limit // 2 else limit]
    return out


def _cut(doc: str, count: int, *, skip_opening: bool = False) -> list[str]:
    """Up to ``count`` prompts of ``doc`` at evenly spaced line offsets (from its first line, or,
    with ``skip_opening``, from past it: documents often share their opening lines)."""
    line_starts = [0, *[i + 1 for i, ch in enumerate(doc) if ch == "\n"][:-1]]
    # a short doc gets a prompt of about half its length so a continuation remains
    limit = min(PROMPT_CHARS, max(30, len(doc) // 2))
    span = max(0, len(line_starts) - 8)
    picks = [round((i + skip_opening) * span / (count + skip_opening)) for i in range(count)]
    prompts = [_prompt_from(doc, line_starts[p], limit) for p in dict.fromkeys(picks)]
    return [p for p in prompts if p.strip()]


def _round_robin(candidates: list[list[str]]) -> list[str]:
    """Every document's first prompt, then every document's second, ... (every document contributes)."""
    width = max((len(c) for c in candidates), default=0)
    return [c[i] for i in range(width) for c in candidates if i < len(c)]


def make_prompts(docs: list[str], n: int = PROMPTS_PER_DOMAIN) -> list[str]:
    """Return ``n`` distinct prompts spread over ``docs`` (deterministic).

    Documents that open alike (a licence header, ``#pragma once``, a package name) give the same
    prompt at their first line; a repeated prompt is dropped and replaced by prompts from later
    lines of every document, so a domain of look-alike files still yields ``n`` different turns.
    """
    per_doc = max(1, math.ceil(n / max(1, len(docs))))
    first = _round_robin([_cut(doc, per_doc) for doc in docs])
    out = list(dict.fromkeys(first))
    if len(out) < len(first) and len(out) < n:  # only then: documents without repeats keep their prompts
        extra = _round_robin([_cut(doc, per_doc + 4, skip_opening=True) for doc in docs])
        out = list(dict.fromkeys([*out, *extra]))
    return out[:n]


ChatPrompt = tuple[str, tuple[tuple[str, str], ...]]
"""A chat prompt: its rendering (with the generation prompt) and the messages it renders."""


def chat_prompts(conversations: list[tuple[tuple[str, str], ...]], render_prompt, n: int = PROMPTS_PER_DOMAIN
                 ) -> list[ChatPrompt]:
    """Up to ``n`` distinct prompts, each a conversation up to its first answer.

    A chat document's natural prompt is not a slice of its text but the conversation up to an
    assistant message, rendered with the generation prompt (``render_prompt``): what the node
    renders for a chat goal, so the target continues with an answer. Only the first answer:
    a later user message may refer to the conversation before it, and the benchmark's and the
    predictor's dialogues send a prompt's last user message in a conversation of their own, so
    every consumer of the prompt must see the same context (deterministic, in document order).
    """
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for messages in conversations:
        first = next((i for i, (role, _) in enumerate(messages) if role == "assistant" and i > 0), None)
        if first is not None and len(out) < n:
            out.setdefault(render_prompt(messages[:first]), messages[:first])
    return list(out.items())


MAX_DOC_CHARS = 24_000
"""Text prompts are cut from the start of long documents only (a 1 MB file would make hundreds)."""


def domain_prompts(rows: list[tuple[str, tuple[tuple[str, str], ...] | None]], n: int, render_prompt=None
                   ) -> list[tuple[str, list[list[str]] | None]]:
    """Up to ``n`` prompts of one domain's documents ``(text, messages or None)``: ``(prompt, messages)``.

    Chat documents give chat prompts (:func:`chat_prompts`, with the messages they render; needs
    ``render_prompt``), the others text slices (:func:`make_prompts`, messages None).
    """
    chats = [m for _, m in rows if m is not None] if render_prompt is not None else []
    texts = [t[:MAX_DOC_CHARS] for t, m in rows if m is None or render_prompt is None]
    out: list[tuple[str, list[list[str]] | None]] = [
        (p, [list(x) for x in m]) for p, m in chat_prompts(chats, render_prompt, n)] if chats else []
    out += [(p, None) for p in make_prompts(texts, n - len(out))] if texts and len(out) < n else []
    return out
