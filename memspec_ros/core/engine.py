"""The speculative decoding engine: decoding states that advance one round at a time.

The engine deliberately does *not* decide which draft to use or how many tokens to
speculate: :meth:`DecodeState.step` takes the proposer and k for every round. That
keeps policy (the runtime layer's job: MemSpec, bandits, oracles) out of the mechanism and
lets a scheduler switch drafts, or fall back to target-only steps while a draft is still
loading, between any two rounds.

Invariant kept by every round: the target's KV cache covers all committed tokens except
the last one, whose logits the next round computes together with the new proposals.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from memspec_ros.core.detokenizer import IncrementalDetokenizer
from memspec_ros.core.errors import InvalidRequestError, VocabularyMismatchError
from memspec_ros.core.finish_reason import FinishReason
from memspec_ros.core.greedy_match import proposal_length
from memspec_ros.core.position_limit import context_bound, position_limit
from memspec_ros.core.proposer import DraftProposer, Proposal
from memspec_ros.core.rejection_sampler import RejectionSampler
from memspec_ros.core.sampling import GREEDY, SamplingParams
from memspec_ros.core.scorer import TargetScorer
from memspec_ros.core.stats import RoundStats
from memspec_ros.knobs import K

Prompt = str | Sequence[int]


class SpeculativeEngine:
    """A target model plus tokenizer; opens decoding states (:class:`DecodeState`).

    Args:
        target: the model whose output distribution is reproduced exactly.
        tokenizer: the target's tokenizer (drafts must share it).
        max_context: maximum sequence length (prompt + generated, all turns); defaults to
            and may not exceed the target's position limit (``max_position_embeddings``, MPT's
            ``max_seq_len``); a target without one (ALiBi) defaults to 2048 and takes any value.
        sampler: acceptance rule; replaceable for experiments and tests.
    """

    def __init__(
        self,
        target: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_context: int | None = None,
        *,
        sampler: RejectionSampler | None = None,
    ) -> None:
        self.target = target.eval()
        self.tokenizer = tokenizer
        self.vocab_size = int(target.config.vocab_size)
        model_limit = position_limit(target.config)
        if max_context is None:
            max_context = context_bound(target.config)
        if max_context < 2:
            raise InvalidRequestError(f"max_context must be >= 2, got {max_context}")
        if model_limit is not None and max_context > model_limit:
            raise InvalidRequestError(
                f"max_context {max_context} exceeds the target's position limit {model_limit}"
            )
        self.max_context = int(max_context)
        self.sampler = sampler or RejectionSampler()
        self.eos_token_ids = _eos_ids(target, tokenizer)
        self.special_prefix, self.special_suffix = _special_wrapping(tokenizer)

    def opening(self, turn_ids: Sequence[int]) -> list[int]:
        """``turn_ids`` (tokenised without special tokens) as the first turn of a dialogue.

        Exactly ``encode(text)`` for the text ``turn_ids`` came from: the special tokens the
        tokenizer adds around any text (e.g. a BOS) are learnt once at construction. This lets a
        caller tokenise a prompt once, before it knows whether the prompt opens a dialogue or
        continues one (a queued goal of a dialogue whose first turn has not run yet).
        """
        return [*self.special_prefix, *turn_ids, *self.special_suffix]

    # ------------------------------------------------------------------ prompts
    def encode(self, prompt: Prompt, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids for ``prompt`` (text is tokenised; id sequences are validated and copied)."""
        if isinstance(prompt, str):
            if not prompt:
                raise InvalidRequestError("prompt is empty")
            ids = self.tokenizer(prompt, add_special_tokens=add_special_tokens)["input_ids"]
        else:
            ids = [int(t) for t in prompt]
        if not ids:
            raise InvalidRequestError("prompt is empty (no tokens)")
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise InvalidRequestError(f"prompt contains token ids outside [0, {self.vocab_size}): {bad[:5]}")
        return ids

    def check_budget(self, used: int, new_prompt: int, max_new_tokens: int) -> None:
        """Raise unless ``max_new_tokens`` is valid and everything fits the context window."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise InvalidRequestError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
        total = used + new_prompt + max_new_tokens
        if total > self.max_context:
            raise InvalidRequestError(
                f"request needs {total} positions ({used} already in the dialogue + {new_prompt} "
                f"prompt + {max_new_tokens} new tokens) but the context window is {self.max_context}"
            )

    # ------------------------------------------------------------------ generation
    def start(
        self, prompt: Prompt, max_new_tokens: int, params: SamplingParams = GREEDY
    ) -> DecodeState:
        """Open a dialogue's decoding state for ``prompt``; advance it with :meth:`DecodeState.step`."""
        ids = self.encode(prompt)
        self.check_budget(0, len(ids), max_new_tokens)
        return DecodeState(self, ids, max_new_tokens, params)

    def generate(
        self,
        prompt: Prompt,
        draft: DraftProposer | None = None,
        k: int = 4,
        max_new_tokens: int = 64,
        params: SamplingParams = GREEDY,
    ) -> DecodeState:
        """Run a whole generation with one fixed draft (or target-only); return the finished state."""
        return self.run_turn(None, prompt, max_new_tokens, draft, k, params)

    def run_turn(
        self,
        state: DecodeState | None,
        prompt: Prompt,
        max_new_tokens: int,
        draft: DraftProposer | None = None,
        k: int = 4,
        params: SamplingParams | None = None,
    ) -> DecodeState:
        """Decode the next dialogue turn to its end with one fixed draft (or target-only).

        ``state=None`` opens the conversation; otherwise the turn continues ``state`` (its
        cache kept, :meth:`DecodeState.continue_with`). ``params=None`` means greedy for a
        new conversation and the previous turn's settings for a continued one. Returns the state.
        """
        if state is None:
            state = self.start(prompt, max_new_tokens, params or GREEDY)
        else:
            state.continue_with(prompt, max_new_tokens, params)
        while not state.done:
            state.step(draft, k)
        return state

    @torch.inference_mode()
    def target_greedy(self, prompt: Prompt, max_new_tokens: int) -> list[int]:
        """Reference greedy decoding with plain ``transformers.generate`` (ground truth for tests).

        Stops at end-of-sequence like the engine does; the eos token is included.
        """
        ids = self.encode(prompt)
        self.check_budget(0, len(ids), max_new_tokens)
        eos = sorted(self.eos_token_ids)
        config = GenerationConfig(
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos or None,
            pad_token_id=eos[0] if eos else 0,
        )
        input_ids = torch.tensor([ids], device=self.target.device)
        out = self.target.generate(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config
        )
        return out[0, len(ids) :].tolist()


class DecodeState:
    """The engine's decoding state of one dialogue: committed tokens, the target cache, the outputs.

    Once called a "session", like three other things in the project; the runtime's
    ``Conversation`` holds one of these, the node's ``DialogueStore`` holds conversations (see
    :mod:`memspec_ros.runtime.conversation`).

    Attributes:
        token_ids: every committed token of every turn (prompts and outputs).
        stats: one :class:`RoundStats` per round of the current turn.
        finish_reason: a :class:`FinishReason` (``EOS``, ``LENGTH``, or ``CANCELLED``/``ERROR``
            set by the runtime), ``None`` while the turn runs.
        last_hidden_state: target's final-layer hidden state that produced the newest
            token (feature for the runtime's predictor); ``verified_hidden_states`` holds
            those of every token emitted by the last round.
    """

    def __init__(
        self, engine: SpeculativeEngine, prompt_ids: list[int], max_new_tokens: int, params: SamplingParams
    ) -> None:
        self.engine = engine
        self.params = params
        self.generator = params.make_generator(engine.target.device)
        self.scorer = TargetScorer(engine.target)
        self.token_ids: list[int] = list(prompt_ids)
        self.scorer.prefill(self.token_ids[:-1])
        self.last_hidden_state: torch.Tensor | None = None
        self.verified_hidden_states: torch.Tensor | None = None
        self._begin_turn(max_new_tokens)

    def _begin_turn(self, max_new_tokens: int) -> None:
        self.max_new_tokens = max_new_tokens
        self.turn_start = len(self.token_ids)
        self.stats: list[RoundStats] = []
        self.finish_reason: FinishReason | None = None
        self._detok = IncrementalDetokenizer(self.engine.tokenizer)

    # ------------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        """True once the current turn hit end-of-sequence or ``max_new_tokens``."""
        return self.finish_reason is not None

    @property
    def output_ids(self) -> list[int]:
        """Tokens generated in the current turn (eos included if it was produced)."""
        return self.token_ids[self.turn_start :]

    @property
    def remaining(self) -> int:
        """Tokens the current turn may still emit."""
        return self.max_new_tokens - (len(self.token_ids) - self.turn_start)

    def text(self) -> str:
        """Full decoded text of the current turn (special tokens skipped)."""
        return self.engine.tokenizer.decode(
            self.output_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )

    def new_text(self) -> str:
        """Text produced since the previous call (correct across BPE/UTF-8 boundaries)."""
        return self._detok.delta(self.output_ids, final=self.done)

    # ------------------------------------------------------------------ rounds
    def step(self, proposer: DraftProposer | None = None, k: int = 4) -> RoundStats:
        """Run one round: ``proposer`` drafts up to ``k`` tokens, the target verifies them.

        With ``proposer=None`` the round is a plain target step that emits one token.
        Never emits past ``max_new_tokens``; stops at end-of-sequence.
        """
        if self.done:
            raise InvalidRequestError("the turn is finished; use continue_with() for a new turn")
        k_problem = K.problem(k)
        if k_problem is not None:
            raise InvalidRequestError(k_problem)
        if proposer is not None and proposer.vocab_size != self.engine.vocab_size:
            raise VocabularyMismatchError(
                proposer.name,
                f"its model has {proposer.vocab_size} output logits, the target has {self.engine.vocab_size}",
            )
        remaining = self.remaining
        k_round = proposal_length(k, remaining) if proposer is not None else 0
        if k_round > 0:
            proposal = proposer.propose(self.token_ids, k_round, self.params, self.generator)
        else:
            proposal = Proposal.empty()

        verify_start = time.perf_counter()
        proposed = proposal.tokens
        scores = self.scorer.score([self.token_ids[-1], *proposed])
        verdict = self.engine.sampler.verify(
            proposed, proposal.draft_probs, scores.logits, self.params, self.generator
        )
        emitted = verdict.tokens[:remaining]
        for i, token in enumerate(emitted):
            if token in self.engine.eos_token_ids:
                emitted = emitted[: i + 1]
                self.finish_reason = FinishReason.EOS
                break
        # The cache now holds old tokens + last + proposals; keep it equal to committed[:-1].
        self.scorer.rollback(len(proposed) + 1 - len(emitted))
        self.token_ids.extend(emitted)
        self.verified_hidden_states = scores.hidden[: len(emitted)]
        self.last_hidden_state = scores.hidden[len(emitted) - 1]
        if self.finish_reason is None and self.remaining <= 0:
            self.finish_reason = FinishReason.LENGTH
        verify_seconds = time.perf_counter() - verify_start

        stats = RoundStats(
            draft_name=proposer.name if proposer is not None and proposed else None,
            proposed=len(proposed),
            accepted=verdict.accepted,
            emitted=len(emitted),
            draft_seconds=proposal.seconds,
            verify_seconds=verify_seconds,
            catchup_tokens=proposal.catchup_tokens,
            catchup_seconds=proposal.catchup_seconds,
        )
        self.stats.append(stats)
        return stats

    def rewind(self, length: int) -> None:
        """Keep only the first ``length`` committed tokens, and the KV cache to match.

        Used to end a turn at a stop string (within the current turn), and to reuse the cached
        part of a chat history that was rendered differently after some point, which may lie in
        an earlier turn (:mod:`memspec_ros.runtime.chat`; the turn then starts there). Keeps the
        cache invariant: it covers every committed token but the last.
        """
        if not 1 <= length <= len(self.token_ids):
            raise ValueError(f"cannot rewind {len(self.token_ids)} committed tokens to {length}")
        del self.token_ids[length:]
        self.scorer.truncate(length - 1)
        self.turn_start = min(self.turn_start, length)
        self._detok.truncate(len(self.token_ids) - self.turn_start)

    def stop_at(self, chars: int) -> None:
        """End the current turn after the first ``chars`` characters of its text (a stop string
        begins there): the text, the committed tokens and the KV cache then all end there.

        When the cut falls inside a token, that token is dropped and the characters of it before
        the cut are tokenised again and appended (prefilled, as a prompt is), so the dialogue's
        text is exactly what the client received. What this keeps lossless: the turn's text is
        the target's own output up to the stop string; the next turn then sees that text, with
        its last few characters in their canonical tokenisation rather than the token the target
        sampled (which would reach past the stop). Neither alternative is acceptable: keeping the
        token puts text after the stop into the context, dropping its first characters loses
        text the client saw.
        """
        text = self.text()
        if not 0 <= chars <= len(text):
            raise ValueError(f"cannot cut a {len(text)}-character turn after {chars} characters")
        kept_text = text[:chars]
        out = self.output_ids

        def decode(ids: list[int]) -> str:
            return self.engine.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

        # The longest run of whole tokens inside the kept text, completed by the re-encoded rest;
        # the re-encoding must decode back to exactly the kept text after those tokens (a
        # tokenizer that prefixes "▁" to a word would add a space the client never received), or
        # one token fewer is kept and a longer rest re-encoded. Nothing fits: the kept text alone.
        whole, piece_ids = 0, self.engine.encode(kept_text, add_special_tokens=False) if kept_text else []
        for n in range(len(out), -1, -1):
            decoded = decode(out[:n])
            if len(decoded) > chars or not kept_text.startswith(decoded) or decoded.endswith("\ufffd"):
                continue
            piece = kept_text[len(decoded):]
            ids = self.engine.encode(piece, add_special_tokens=False) if piece else []
            if decode(out[:n] + ids) == kept_text:
                whole, piece_ids = n, ids
                break
        self.rewind(self.turn_start + whole)
        if piece_ids:
            self.scorer.prefill([self.token_ids[-1], *piece_ids[:-1]])
            self.token_ids.extend(piece_ids)
        self.finish_reason = FinishReason.STOP

    def continue_with(self, prompt: Prompt, max_new_tokens: int, params: SamplingParams | None = None) -> None:
        """Append the next dialogue turn, keeping the target cache (no re-prefill of history).

        Text is tokenised without special tokens (the conversation already began with them).
        ``params`` gives this turn its own sampling settings and seed (each goal of a robot
        dialogue may ask for different ones); ``None`` keeps the previous turn's.
        """
        if not self.done:
            raise InvalidRequestError("the current turn is still running; finish it first")
        ids = self.engine.encode(prompt, add_special_tokens=False)
        self.engine.check_budget(len(self.token_ids), len(ids), max_new_tokens)
        # The previous turn's last token was never fed; it and all but the last new token are.
        self.scorer.prefill([self.token_ids[-1], *ids[:-1]])
        self.token_ids.extend(ids)
        if params is not None:
            self.params = params
            self.generator = params.make_generator(self.engine.target.device)
        self._begin_turn(max_new_tokens)


def _special_wrapping(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The special tokens ``tokenizer`` puts before and after any text (e.g. ``([bos], [])``).

    Read off one probe text: with and without special tokens, the plain ids appear once inside
    the decorated ones. A tokenizer whose decoration does not look like that (none known) falls
    back to its BOS token, which is what a sliding window restarted with before.
    """
    probe = "a"
    plain = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(plain) + 1):
        if plain and full[i: i + len(plain)] == plain:
            return [int(t) for t in full[:i]], [int(t) for t in full[i + len(plain):]]
    bos = tokenizer.bos_token_id
    return ([] if bos is None else [int(bos)]), []


def _eos_ids(target: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    config_eos = getattr(getattr(target, "generation_config", None), "eos_token_id", None)
    if isinstance(config_eos, int):
        ids.add(config_eos)
    elif config_eos:
        ids.update(int(t) for t in config_eos)
    return frozenset(ids)
