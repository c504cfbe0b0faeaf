"""The runtime: one engine, a draft pool, a background loader, a policy, a scheduler.

This is the library API that benchmarks and the ROS node use. :meth:`DraftRuntime.generate`
runs one dialogue turn round by round: the policy picks the draft for each round (waiting for a
load only if the policy says so, and timing that wait as *stall*), the engine runs the round,
and the outcome feeds the shared statistics, the context tracker and the policy. Scheduling runs
either inline every ``check_interval`` rounds (:meth:`DraftRuntime.tick`: library use,
benchmarks, the simulator) or externally: the decoding loop only signals that a check is due and
the node runs prediction (:meth:`DraftRuntime.plan`) and prefetch (:meth:`DraftRuntime.apply`)
in its own executor callbacks, in other threads.

Everything a server needs between a request and the round loop is here too, so the node only
translates: :meth:`DraftRuntime.admit` (tokenise once, check the window), sliding a long
dialogue (in :meth:`generate`, undone with the turn if it fails), rendering chat messages
(:mod:`.chat`), stop strings (:mod:`.stop_strings`), :meth:`DraftRuntime.hint_scope`, text deltas
(``on_progress``) and a :class:`FinishReason` that tells a cancel from a deactivate.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from memspec_ros.core.engine import DecodeState, Prompt, SpeculativeEngine
from memspec_ros.core.finish_reason import FinishReason
from memspec_ros.core.model_loading import (
    build_empty_model,
    load_config,
    load_state_from_bytes,
)
from memspec_ros.core.ngram_proposer import NGRAM_NAME, lookup
from memspec_ros.core.position_limit import context_bound
from memspec_ros.core.proposer import DraftProposer
from memspec_ros.core.sampling import GREEDY, SamplingParams
from memspec_ros.core.stats import RoundStats
from memspec_ros.core.token_map import load_token_map
from memspec_ros.knobs import CHECK_INTERVAL, LOAD_TIMEOUT_S, K

from .acceptance import AcceptanceTracker, RoundRecord
from .catalogue import Budget, Catalogue, DraftSpec
from .chat import ChatMessage, ChatTurn
from .context import ContextTracker
from .conversation import Conversation
from .engine_rounds import EngineRounds
from .loader import BackgroundLoader, Loader, LoadRecord, Materializer
from .ngram_member import NGRAM_DOMAIN, NgramSettings, ngram_rounds
from .online_learning import LearnReport, OnlineLearner, examples_from_turn
from .policies.base import Decision, Policy, PolicyView, RoundFeedback, SchedulePlan
from .pool import DraftPool, InvalidTransition
from .residency import DraftState, ResidencyEvent, ResidencySnapshot
from .round_execution import RoundExecutor, predictor_calls
from .scheduler import Scheduler
from .stop_strings import StopStrings
from .storage import StorageModel
from .traces import draft_argmax
from .turn_progress import TextStream, TurnProgress
from .turns import Admission, TurnRequest, admit, fit_turn

_log = logging.getLogger(__name__)

LEARN_CONTEXT = 512
"""Tokens before a served turn that online learning's teacher-forced passes include."""


@dataclass(frozen=True)
class RuntimeConfig:
    """Knobs of a runtime (the node maps its parameters onto these)."""

    k: int = 4
    check_interval: int = 4
    storage: StorageModel = field(default_factory=StorageModel)
    load_timeout_s: float | None = 30.0
    space_wait_s: float = 5.0
    scheduling: Literal["inline", "external"] = "inline"
    max_load_failures: int = 1
    """Loads of a draft that may fail before policies are told it is unusable."""
    stall_timeout_s: float = 60.0
    ngram: NgramSettings | None = None
    """The n-gram member of the pool (:mod:`.ngram_member`): always resident at 0 bytes, chosen per
    round like a draft by policies that use it. None (the library default) leaves it out; the node
    turns it on (its ``ngram`` parameter)."""

    def __post_init__(self) -> None:
        K.check(self.k)
        CHECK_INTERVAL.check(self.check_interval)
        if self.load_timeout_s is not None:
            LOAD_TIMEOUT_S.check(self.load_timeout_s)
        if self.scheduling not in ("inline", "external"):
            raise ValueError(f"scheduling must be 'inline' or 'external', got {self.scheduling!r}")


def make_materializer(catalogue: Catalogue, *, dtype: torch.dtype = torch.float32,
                      device: str | torch.device = "cpu") -> Materializer:
    """A materializer that builds each draft from bytes the loader read itself.

    Configs are read (and checked against caps) once, up front: a load then only moves weight
    bytes and copies them into an uninitialised module, which is what an edge device's load
    costs too. The catalogue must have been sized for the same ``dtype``, or the budget would
    count other bytes than the drafts occupy.
    """
    mismatched = [s.name for s in catalogue if s.dtype != dtype]
    if mismatched:
        raise ValueError(f"drafts {mismatched} were sized for another dtype than {dtype}; build the catalogue "
                         f"with dtype={dtype} so the budget counts what they occupy")
    configs = {s.name: load_config(s.path) for s in catalogue}
    token_maps = {s.name: load_token_map(s.path) for s in catalogue}  # small, read once like the configs

    def materialize(spec: DraftSpec, blobs: list[bytearray]) -> DraftProposer:
        model = build_empty_model(configs[spec.name], dtype=dtype, device=device)
        load_state_from_bytes(model, blobs)
        return DraftProposer(model, spec.name, token_maps[spec.name])

    return materialize


@dataclass(frozen=True)
class ServedTurn:
    """The last completed turn, kept (one at a time) for online learning."""

    context: list[int]
    """The whole dialogue after the turn (its output last)."""
    prompt_ids: list[int]
    output_ids: list[int]
    hidden: np.ndarray
    """The target's hidden state that produced each output token."""
    max_new_tokens: int


@dataclass(frozen=True)
class RoundEvent:
    """One round on the timeline (for residency plots and simulator validation)."""

    start: float
    end: float
    turn: int
    draft: str | None
    proposed: int
    accepted: int
    emitted: int
    stall_s: float
    draft_s: float
    verify_s: float
    extra_s: float
    """Policy-requested extra draft work in the round (counterfactual scoring)."""
    catchup_tokens: int
    resident: tuple[str, ...]
    loading: tuple[str, ...]
    context_tokens: int = 0
    """Dialogue tokens before the round (what the simulator's costs depend on)."""
    load_in_flight: bool = False
    """A draft was loading when the round started: its reading and, as it completes,
    materialisation run beside the round (``loading`` is the state after the round)."""


@dataclass
class GenerationReport:
    """Outcome of one :meth:`DraftRuntime.generate` call (one dialogue turn)."""

    output_ids: list[int]
    text: str
    finish_reason: FinishReason | str
    wall_s: float
    prompt_tokens: int = 0
    stall_s: float = 0.0
    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    switches: int = 0
    loads: int = 0
    load_failures: int = 0
    tick_s: float = 0.0
    predictor_s: float = 0.0
    counterfactual_s: float = 0.0
    drafts_used: list[str] = field(default_factory=list)
    timeline: list[RoundEvent] = field(default_factory=list)
    last_draft: str | None = field(default=None, repr=False)
    """Draft of the most recent drafted round (switches are counted against it)."""
    kept_tokens: int | None = None
    """``None``, or: the dialogue reached the context window and this turn continued it from
    its last ``kept_tokens`` tokens (see :func:`~memspec_ros.runtime.turns.fit_turn`)."""
    seed: int | None = None
    """The seed the turn's sampling generator used (drawn when the caller gave none)."""
    reused_tokens: int = 0
    """Tokens of the dialogue's KV cache the turn kept instead of encoding them again (an admitted
    turn continuing a dialogue; for a chat turn, the common prefix with its rendering)."""

    def record_round(self, draft: str | None, proposed: int, accepted: int, stall_s: float) -> None:
        """Account one round; shared by real runs and the simulator so both count alike.

        Switches count changes of model draft (each costs a catch-up forward); the n-gram member
        has no cache to catch up, so rounds with it neither count as one nor break a run of a draft.
        """
        if draft is not None:
            if draft != NGRAM_NAME and self.last_draft is not None and draft != self.last_draft:
                self.switches += 1
            if draft != NGRAM_NAME:
                self.last_draft = draft
            if draft not in self.drafts_used:
                self.drafts_used.append(draft)
        self.rounds += 1
        self.proposed += proposed
        self.accepted += accepted
        self.stall_s += stall_s

    @property
    def tokens(self) -> int:
        """Tokens generated."""
        return len(self.output_ids)

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of wall time (stalls, ticks and prefill included)."""
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed draft tokens."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def mean_accepted_length(self) -> float:
        """Tokens emitted per target verification."""
        return self.tokens / self.rounds if self.rounds else 0.0


@dataclass
class RuntimeStats:
    """Cumulative figures since the runtime was built (diagnostics, benchmark reports)."""

    rounds: int = 0
    tokens: int = 0
    generations: int = 0
    decode_s: float = 0.0
    stall_s: float = 0.0
    switches: int = 0
    ticks: int = 0
    tick_s: float = 0.0
    predictor_s: float = 0.0
    predictor_calls: int = 0
    loads: int = 0
    load_failures: int = 0
    mean_load_s: float | None = None
    mean_round_s: float | None = None

    @property
    def load_round_ratio(self) -> float | None:
        """Measured mean load time / mean round time: the regime the run actually had."""
        if self.mean_load_s is None or not self.mean_round_s:
            return None
        return self.mean_load_s / self.mean_round_s

    @property
    def predictor_fraction(self) -> float:
        """Share of decoding time spent in the predictor (target: <= 2%)."""
        return self.predictor_s / self.decode_s if self.decode_s > 0 else 0.0


class DraftRuntime:
    """Memory-aware speculative decoding over a catalogue of drafts.

    Args:
        engine: the speculative engine (owns the target), or any :class:`RoundExecutor` (the
            simulator passes a trace replay; with it, pass ``loader`` and a virtual ``clock``).
        catalogue: the drafts.
        budget: memory for drafts; ignored (unlimited) for a policy with ``unlimited_memory``.
        policy: any :class:`~memspec_ros.runtime.policies.base.Policy`.
        config: see :class:`RuntimeConfig`.
        materialize: how loaded bytes become a proposer (default: :func:`make_materializer`).
        clock: time source (seconds).
        loader: builds the loader from the pool (default: the background loader thread).
    """

    def __init__(self, engine: SpeculativeEngine | RoundExecutor, catalogue: Catalogue, budget: Budget,
                 policy: Policy, config: RuntimeConfig | None = None, *, materialize: Materializer | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 on_load_failure: Callable[[LoadRecord], None] | None = None,
                 loader: Callable[[DraftPool], Loader] | None = None) -> None:
        if isinstance(engine, SpeculativeEngine):
            self.engine: SpeculativeEngine | None = engine
            self.rounds: RoundExecutor = EngineRounds(engine, clock)
        else:
            self.engine = None
            self.rounds = engine
        self.catalogue = catalogue
        self.config = config or RuntimeConfig()
        self.budget = Budget.unlimited() if policy.unlimited_memory else budget
        self.policy = policy
        self._clock = clock
        policy.bind(catalogue, self.budget, self.config.k)
        self.pool = DraftPool(catalogue, self.budget, clock=clock)
        if loader is not None:
            self.loader: Loader = loader(self.pool)
        else:
            self.loader = BackgroundLoader(self.pool, materialize or make_materializer(catalogue),
                                           self.config.storage, timeout_s=self.config.load_timeout_s,
                                           space_wait_s=self.config.space_wait_s, on_failure=on_load_failure,
                                           clock=clock)
        self.rounds.bind(self.pool, self.loader)
        self.ngram = self._make_ngram(self.config.ngram)
        self.tracker = AcceptanceTracker(self.member_names)
        self.context = ContextTracker()
        self.scheduler = Scheduler(self.pool, self.loader, policy, self.view, clock=clock,
                                   after_plan=lambda: self.rounds.charge_tick(self.policy))
        self.on_check_due: Callable[[], None] | None = None
        """Called (decoding thread) when a check is due in external mode, e.g. to trigger a
        guard condition; must return at once."""
        self._hint: str | None = None
        self._scoped_hints: list[str | None] = []
        self._lock = threading.Lock()
        self._generate_lock = threading.Lock()
        self._round = 0
        self._turn = 0
        self._turn_pos = 0
        self._remaining = 0
        self._stats = RuntimeStats()
        self._round_s_total = 0.0  # running sum and count, not a list: a node runs for weeks
        self._round_s_count = 0
        self._closed = False
        self._member_active = False
        self.learner: OnlineLearner | None = None
        """Online learning of the policy's predictor (:meth:`enable_learning`); None: off."""
        self._last_turn: ServedTurn | None = None

    # ------------------------------------------------------------------ public API
    @property
    def member_names(self) -> list[str]:
        """Every proposer a round can use: the catalogue's drafts, then the n-gram member if on."""
        return [*self.catalogue.names, *([self.ngram.name] if self.ngram is not None else [])]

    def enable_learning(self, **kwargs: float) -> OnlineLearner:
        """Let the policy's predictor keep learning from served turns (:mod:`.online_learning`).

        After each completed turn, :meth:`learn_from_last_turn` (called in idle time, e.g. by the
        node's learning thread) labels it with the resident drafts' teacher-forced acceptance and
        takes a guarded learning step. Keyword arguments go to :class:`OnlineLearner`.
        """
        predictor = getattr(self.policy, "predictor", None)
        if predictor is None:
            raise ValueError(f"policy {self.policy.name!r} has no predictor to train")
        self.learner = OnlineLearner(predictor, lock=self.policy._lock, **kwargs)
        return self.learner

    def learn_from_last_turn(self, cancel: threading.Event | None = None) -> LearnReport | None:
        """Learn from the most recent completed turn, once; None when there is nothing to learn.

        Each resident draft runs teacher-forced over the turn and at most :data:`LEARN_CONTEXT`
        tokens before it (one forward pass, leased from the pool so it cannot be evicted
        meanwhile); its argmax at each output position says whether it would have been accepted
        there. The n-gram member's lookups are replayed over
        the turn the same way and feed its measured value. ``cancel`` is checked before every
        pass: a goal that arrives ends the step at once and nothing of the turn is learned.
        """
        learner = self.learner
        with self._lock:
            served, self._last_turn = self._last_turn, None
        if learner is None or served is None or self.engine is None:
            return None
        t0 = time.perf_counter()
        names = list(learner.predictor.draft_names)
        start = len(served.context) - len(served.output_ids)
        # The turn and at most LEARN_CONTEXT tokens before it: a pass's cost stays bounded however
        # long the dialogue grows (the labels are the turn's; the draft sees ample context for them).
        lo = max(0, start - LEARN_CONTEXT)
        match: dict[str, np.ndarray] = {}
        for name in self.pool.resident():
            if cancel is not None and cancel.is_set():
                return LearnReport(0, None, None, cancelled=True, seconds=time.perf_counter() - t0)
            if name not in names:
                continue
            try:
                proposer = self.pool.acquire(name)
            except InvalidTransition:  # evicted since we listed it
                continue
            try:
                first = max(lo, len(served.context) - context_bound(proposer.model.config))
                if first >= start:
                    continue  # a turn longer than the draft's positions: no label for it
                with torch.inference_mode():
                    argmax = draft_argmax(proposer, served.context[first:]).cpu().numpy()
            finally:
                self.pool.release(name)
            match[name] = argmax[start - 1 - first: len(served.context) - 1 - first] == np.asarray(served.output_ids)
        if cancel is not None and cancel.is_set():
            return LearnReport(0, None, None, cancelled=True, seconds=time.perf_counter() - t0)
        if self.ngram is not None:
            observe = getattr(self.policy, "observe_ngram_replay", None)
            if observe is not None:
                observe(ngram_rounds(self.ngram, served.context, start, self.config.k))
        x, y, mask = examples_from_turn(served.prompt_ids, served.output_ids, served.hidden, match, names,
                                        learner.predictor.hidden_size, k=self.config.k,
                                        max_new_tokens=served.max_new_tokens)
        report = learner.learn(x, y, mask)
        return dataclasses.replace(report, seconds=time.perf_counter() - t0)

    def residency(self) -> ResidencySnapshot:
        """The pool's snapshot plus the n-gram member (resident, 0 bytes) when it is on: what the
        node publishes. ``active`` names the member while the latest round ran it."""
        snap = self.pool.snapshot()
        if self.ngram is None:
            return snap
        with self._lock:
            active = self._member_active
        return snap.with_member(self.ngram.name, NGRAM_DOMAIN, active=active)

    def _make_ngram(self, settings: NgramSettings | None):
        if NGRAM_NAME in self.catalogue:
            raise ValueError(f"a catalogue draft is named {NGRAM_NAME!r}, the name reserved for the n-gram member: "
                             "rename the draft")
        if settings is None:
            return None
        # A trace replay only proposes greedily: no distribution is built, any width will do.
        vocab = int(self.engine.target.config.get_text_config().vocab_size) if self.engine is not None else 1
        return settings.proposer(vocab)

    def add_residency_listener(self, listener: Callable[[ResidencyEvent], None]) -> None:
        """Be told of every residency change (state, progress, active draft, predictions)."""
        self.pool.add_listener(listener)

    def hint_problem(self, domain: str | None) -> str | None:
        """Why ``domain`` cannot be a hint, or None (the reason never repeats the hint's text)."""
        if domain is None or domain in self.catalogue or self.catalogue.by_domain(domain) is not None:
            return None
        return f"not a draft domain; known: {sorted(set(self.catalogue.domains))}"

    def set_hint(self, domain: str | None) -> None:
        """Set (or clear) the standing domain hint: a prior for the predictor, never a constraint.

        The standing hint is what a planner said about the coming work (the node's
        ``~/context_hint``); a goal's own hint overrides it for one turn (:meth:`hint_scope`).
        """
        problem = self.hint_problem(domain)
        if problem is not None:
            raise ValueError(f"unknown domain hint {domain!r}: {problem}")
        with self._lock:
            self._hint = domain

    @contextmanager
    def hint_scope(self, domain: str | None) -> Iterator[None]:
        """Within the block, ``domain`` (if not None) overrides the standing hint.

        Leaving the block, on every path, restores what was there: the standing hint, which
        may have changed meanwhile (a planner's new hint during a goal is not lost).
        """
        problem = self.hint_problem(domain)
        if problem is not None:
            raise ValueError(f"unknown domain hint {domain!r}: {problem}")
        with self._lock:
            self._scoped_hints.append(domain)
        try:
            yield
        finally:
            with self._lock:
                self._scoped_hints.pop()

    def _effective_hint_locked(self) -> str | None:
        return next((h for h in reversed(self._scoped_hints) if h is not None), self._hint)

    def set_policy(self, policy: Policy) -> None:
        """Switch policy at run time (takes effect from the next round; statistics are kept).

        A policy that needs unlimited memory (the oracle) cannot replace one under a budget.
        """
        if policy.unlimited_memory and not self.budget.is_unlimited:
            raise ValueError(f"policy {policy.name!r} needs unlimited memory; build a new runtime for it")
        policy.bind(self.catalogue, self.budget, self.config.k)
        with self.scheduler.lock:
            self.policy = policy
            self.scheduler.policy = policy
        learner = self.learner
        if learner is not None:  # keep learning into the new policy's predictor, or stop without one
            predictor = getattr(policy, "predictor", None)
            self.learner = None
            if predictor is not None:
                self.learner = OnlineLearner(predictor, lock=policy._lock, **learner.settings)
                self.learner.restore(learner.state())

    def reconfigure(self, *, k: int | None = None, check_interval: int | None = None) -> None:
        """Change the speculation length or the check interval at run time (next round on)."""
        changes = {n: v for n, v in (("k", k), ("check_interval", check_interval)) if v is not None}
        with self._lock:
            self.config = dataclasses.replace(self.config, **changes)
        if k is not None:
            self.policy.k = k

    @property
    def hint(self) -> str | None:
        """The standing domain hint (:meth:`set_hint`; a scoped hint is not included)."""
        with self._lock:
            return self._hint

    def warm_up(self, drafts: Sequence[str] | None = None, timeout: float | None = 60.0) -> list[str]:
        """Load an initial working set (default: the policy's) and wait; not part of any timing.

        Returns the drafts that ended up resident.
        """
        names = list(drafts) if drafts is not None else self.policy.initial_working_set()
        tickets = [self.loader.request(n) for n in names if self.pool.state(n) != DraftState.RESIDENT]
        for t in tickets:
            t.wait(timeout)
        return self.pool.resident()

    def tick(self) -> SchedulePlan:
        """Plan and apply in one go (thread-safe): the inline mode of library use and the simulator."""
        return self.scheduler.tick()

    def plan(self) -> SchedulePlan | None:
        """Prediction: the policy's forecast and wanted working set now (thread-safe).

        The plan is kept; :meth:`apply` carries it out. The node runs the two in separate
        executor callbacks so that a finished load can start the next one (``apply`` again)
        without waiting for the next forecast. None once the runtime is closed.
        """
        return None if self._closed else self.scheduler.plan()

    def apply(self) -> SchedulePlan | None:
        """Prefetch: carry out the latest plan (loads, evictions, cancellations); thread-safe.

        Returns the plan applied, or None before the first :meth:`plan` or once closed: the
        residency events of :meth:`close` itself must not start loads on a closed loader.
        """
        return None if self._closed else self.scheduler.apply_latest()

    def view(self) -> PolicyView:
        """What policies see now."""
        with self._lock:
            round_index, turn, pos, remaining, hint = (self._round, self._turn, self._turn_pos, self._remaining,
                                                       self._effective_hint_locked())
        unusable = self.pool.failed_drafts(self.config.max_load_failures)
        return PolicyView(now=self._clock(), round_index=round_index, turn=turn, turn_position=pos,
                          remaining=remaining, k=self.config.k, residency=self.pool.snapshot(),
                          pending_loads=tuple(self.loader.pending()), acceptance=self.tracker.summary(),
                          context=self.context.features(), hint=hint, unusable=unusable,
                          catalogue=self.catalogue, budget=self.budget,
                          mean_load_s=self.loader.totals().mean_load_s,
                          ngram=self.ngram.name if self.ngram is not None else None)

    def new_conversation(self) -> Conversation:
        """A dialogue to continue across calls (pass it to :meth:`generate`)."""
        return Conversation()

    def admit(self, prompt: str | ChatTurn, max_new_tokens: int, stop: Sequence[str] = ()) -> Admission:
        """Tokenise ``prompt`` (once), or render a chat turn's messages, and check the turn
        fits the context window and its stop strings are usable.

        The returned :class:`TurnRequest` is what :meth:`run_turn` runs, so a server checks a
        request when it arrives and never tokenises it again.
        """
        if self.engine is None:
            raise RuntimeError("admission needs a real engine (this runtime replays traces)")
        return admit(self.engine, prompt, max_new_tokens, stop)

    def run_turn(self, request: TurnRequest, params: SamplingParams = GREEDY, **kwargs) -> GenerationReport:
        """:meth:`generate` for an admitted request (keyword arguments as there)."""
        return self.generate(request, request.max_new_tokens, params, stop=request.stop, **kwargs)

    def generate(
        self,
        prompt: Prompt | TurnRequest,
        max_new_tokens: int,
        params: SamplingParams = GREEDY,
        *,
        conversation: Conversation | None = None,
        on_round: Callable[[RoundStats, DecodeState], None] | None = None,
        on_progress: Callable[[TurnProgress], None] | None = None,
        progress_every: int = 1,
        should_stop: Callable[[], bool | FinishReason | None] | None = None,
        stop: Sequence[str] = (),
    ) -> GenerationReport:
        """Generate one turn. ``conversation`` continues a dialogue (its context is kept).

        ``prompt``: text or ids (tokenised by the engine; a dialogue that overflows is an
        error), or an admitted :class:`TurnRequest` (a dialogue that would overflow slides).
        ``on_round(stats, state)`` runs after every round; ``on_progress(progress)`` gets text
        deltas every ``progress_every`` rounds and at the end, holding back text that may be
        the start of a stop string. ``should_stop()`` is polled before every round: truthy ends
        the turn, as ``FinishReason.CANCELLED`` unless it returns a :class:`FinishReason` itself
        (a server says ``DEACTIVATED`` for a deactivate). ``stop``: the turn ends at the first of
        these strings in its text (``FinishReason.STOP``), and its text, tokens and the
        conversation's context end right before it.

        ``params`` without a seed get a fresh one, reported as ``GenerationReport.seed``.
        """
        if self._closed:
            raise RuntimeError("runtime is closed")
        params = params.with_drawn_seed()
        stops = StopStrings(stop)
        stream = TextStream(on_progress, progress_every, stops) if on_progress is not None else None
        with self._generate_lock:
            checkpoint = conversation.checkpoint() if conversation is not None else None
            try:
                return self._generate(prompt, max_new_tokens, params, conversation, on_round, stream, should_stop,
                                      stops)
            except BaseException:
                # A failed turn must not break the dialogue: back to the last completed turn.
                self.pool.set_active(None)
                if checkpoint is not None:
                    conversation.restore(checkpoint)
                raise

    def run_dialogue(self, turns: Sequence, params: SamplingParams = GREEDY) -> list[GenerationReport]:
        """Run turns (objects with ``prompt`` and ``max_new_tokens``) as one conversation."""
        conv = self.new_conversation()
        return [self.generate(t.prompt, t.max_new_tokens, params, conversation=conv) for t in turns]

    def statistics(self) -> RuntimeStats:
        """Cumulative statistics (a copy)."""
        totals = self.loader.totals()
        with self._lock:
            s = RuntimeStats(**{k: getattr(self._stats, k) for k in RuntimeStats.__dataclass_fields__})
            s.mean_round_s = self._round_s_total / self._round_s_count if self._round_s_count else None
        s.ticks = self.scheduler.stats.ticks
        s.tick_s = self.scheduler.stats.seconds
        s.predictor_s = self.rounds.predictor_seconds(self.policy)
        s.predictor_calls = predictor_calls(self.policy)
        s.loads = totals.loaded
        s.load_failures = totals.failed
        s.mean_load_s = totals.mean_load_s
        return s

    def window_stats(self, rounds: int = 32) -> dict:
        """Acceptance over the most recent ``rounds`` (what ``AcceptanceStats`` publishes)."""
        summary = self.tracker.summary()
        window = summary.window[-rounds:]
        prop = sum(r.proposed for r in window)
        acc = sum(r.accepted for r in window)
        emitted = sum(r.emitted for r in window)
        secs = sum(r.seconds for r in window)
        per = {}
        for n in self.member_names:
            rs = [r for r in window if r.draft == n]
            p = sum(r.proposed for r in rs)
            per[n] = {"acceptance_rate": (sum(r.accepted for r in rs) / p) if p else 0.0, "rounds": len(rs)}
        st = self.statistics()
        return {"active_draft": window[-1].draft if window else None,
                "window_acceptance_rate": acc / prop if prop else 0.0,
                "mean_accepted_length": emitted / len(window) if window else 0.0,
                "tokens_per_second": emitted / secs if secs > 0 else 0.0,
                "rounds": len(window), "per_draft": per, "draft_switches": st.switches, "loads": st.loads,
                "stall_seconds": st.stall_s}

    def close(self) -> None:
        """Stop the loader thread and drop every draft (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.loader.close()
        for n in self.pool.resident():
            self.pool.evict(n, reason="runtime closed")

    def __enter__(self) -> DraftRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the loop
    def _generate(self, prompt: Prompt | TurnRequest, max_new_tokens: int, params: SamplingParams,
                  conversation: Conversation | None, on_round, stream: TextStream | None,
                  should_stop, stops: StopStrings) -> GenerationReport:
        t_start = self._clock()
        tick_s0 = self.scheduler.stats.seconds
        pred_s0 = self.rounds.predictor_seconds(self.policy)
        totals0 = self.loader.totals()
        conv = conversation or Conversation()
        if conv.stored_ids is not None and self.engine is not None:
            conv.rebuild(self.engine)  # restored from disk: prefill its context (the checkpoint undoes it)
        kept = None
        chat_messages = None
        reused = 0
        if isinstance(prompt, TurnRequest):
            if self.engine is None:
                raise RuntimeError("an admitted request needs a real engine (this runtime replays traces)")
            fitted = fit_turn(self.engine, conv, prompt)  # the caller's checkpoint undoes a slide or a cut
            prompt, kept, chat_messages = fitted.prompt_ids, fitted.kept_tokens, fitted.messages
            reused = fitted.reused_tokens
        elif conv.is_chat:
            raise ValueError("a chat conversation continues with admitted chat turns (TurnRequest), not raw prompts")
        # prefill: loads go on meanwhile
        turn = self.rounds.begin_turn(prompt, max_new_tokens, params, conv, stops)
        turn_index = turn.turn_index
        self.context.new_turn(turn.prompt_ids)
        with self._lock:
            self._turn = turn_index
            self._turn_pos = 0
            self._remaining = turn.remaining
        self.policy.new_turn(self.view())
        report = GenerationReport(output_ids=[], text="", finish_reason="", wall_s=0.0,
                                  prompt_tokens=len(turn.prompt_ids) - (1 if turn_index == 0 else 0),
                                  kept_tokens=kept, seed=params.seed, reused_tokens=reused)
        turn_rounds = 0
        hidden: list = []  # the emitted tokens' hidden states: what online learning's features are made of
        since_tick = 0
        stopped: FinishReason | None = None
        while not turn.done:
            stop = should_stop() if should_stop is not None else None
            if stop:
                stopped = stop if isinstance(stop, FinishReason) else FinishReason.CANCELLED
                break
            r_start = self._clock()
            view = self.view()
            if self.ngram is not None:  # whether the member would propose now: a lookup, ~0.1 ms
                match = lookup(turn.tokens, self.config.k, self.ngram.min_n, self.ngram.max_n)
                view = dataclasses.replace(view, ngram_match=len(match))
            draft, stall, k_round = self._select_draft(view, should_stop)
            stop = should_stop() if stall and should_stop is not None else None
            if stop:  # the stall ended because the generation is ending: no further round
                report.stall_s += stall
                stopped = stop if isinstance(stop, FinishReason) else FinishReason.CANCELLED
                break
            handle = None
            pooled = draft is not None and (self.ngram is None or draft != self.ngram.name)
            if not pooled and draft is not None:
                handle = self.ngram  # always resident: nothing to acquire
            elif pooled:
                try:
                    handle = self.pool.acquire(draft)
                except InvalidTransition:  # evicted by a concurrent tick since the decision
                    draft, pooled = None, False
            with self._lock:
                self._member_active = draft is not None and not pooled
            try:
                if pooled or draft is None:
                    # An n-gram round leaves the pool's active draft as it was: it stays the draft the
                    # policy's hysteresis and the eviction plan protect (the topic shows the member).
                    self.pool.set_active(draft)
                out = turn.run(draft, handle, k_round, self.policy.wants_counterfactual)
            finally:
                if pooled:
                    self.pool.release(draft)
            self.context.push(out.emitted_ids, out.hidden)
            if self.learner is not None and out.hidden is not None:
                hidden.append(out.hidden)
            report.counterfactual_s += out.counterfactual_s
            used = out.draft
            r_end = self._clock()
            load_in_flight = bool(view.residency.names_in(DraftState.LOADING))
            self.tracker.record(RoundRecord(round_index=view.round_index, draft=used, proposed=out.proposed,
                                            accepted=out.accepted, emitted=out.emitted,
                                            seconds=r_end - r_start, draft_s=out.draft_s,
                                            verify_s=out.verify_s, loading=load_in_flight))
            with self._lock:
                self._round += 1
                self._turn_pos += out.emitted
                self._remaining = turn.remaining
                if used is not None:
                    self._round_s_total += r_end - r_start - stall
                    self._round_s_count += 1
            self.policy.observe(RoundFeedback(round_index=view.round_index, turn=turn_index,
                                              turn_position=view.turn_position, draft=used,
                                              proposed=out.proposed, accepted=out.accepted,
                                              emitted=out.emitted, seconds=r_end - r_start,
                                              counterfactual=out.counterfactual), view)
            report.record_round(used, out.proposed, out.accepted, stall)
            snap = self.pool.snapshot()
            report.timeline.append(RoundEvent(
                start=r_start - t_start, end=r_end - t_start, turn=turn_index, draft=used, proposed=out.proposed,
                accepted=out.accepted, emitted=out.emitted, stall_s=stall, draft_s=out.draft_s,
                verify_s=out.verify_s, extra_s=out.counterfactual_s, catchup_tokens=out.catchup_tokens,
                resident=tuple(snap.resident), loading=tuple(snap.names_in(DraftState.LOADING)),
                context_tokens=out.context_tokens,
                load_in_flight=load_in_flight))
            if on_round is not None:
                on_round(out.stats, turn.state)
            if stream is not None:
                stream.round(out, turn.state)
            turn_rounds += 1
            since_tick += 1
            if turn_rounds == 1 or since_tick >= self.config.check_interval:
                since_tick = 0
                if self.config.scheduling == "inline":
                    self.scheduler.tick()
                elif self.on_check_due is not None:
                    self.on_check_due()
        self.pool.set_active(None)  # nothing proposes between turns
        with self._lock:
            self._member_active = False
        with self._lock:
            self._remaining = 0  # no turn runs: a load now slows no decoding
        report.output_ids, report.text, report.finish_reason = turn.finish(stopped)
        if self.learner is not None and self.engine is not None and stopped is None and report.output_ids and hidden:
            states = np.concatenate(hidden)[: len(report.output_ids)]
            with self._lock:
                self._last_turn = ServedTurn(context=list(turn.state.token_ids), prompt_ids=list(turn.prompt_ids),
                                             output_ids=list(report.output_ids), hidden=states,
                                             max_new_tokens=max_new_tokens)
        if chat_messages is not None:  # the answer becomes part of the history the next turn renders
            conv.messages = [*chat_messages, ChatMessage("assistant", report.text)]
        if stream is not None:
            stream.close(turn.state)
        report.wall_s = self._clock() - t_start
        report.tick_s = self.scheduler.stats.seconds - tick_s0
        report.predictor_s = self.rounds.predictor_seconds(self.policy) - pred_s0
        totals = self.loader.totals()
        report.loads = totals.loaded - totals0.loaded
        report.load_failures = totals.failed - totals0.failed
        with self._lock:
            st = self._stats
            st.rounds += report.rounds
            st.tokens += report.tokens
            st.generations += 1
            st.decode_s += report.wall_s
            st.stall_s += report.stall_s
            st.switches += report.switches
        return report

    def _select_draft(self, view: PolicyView, should_stop: Callable[[], bool] | None = None
                      ) -> tuple[str | None, float, int]:
        """Ask the policy: the draft, seconds stalled for it, and the proposal length.

        If the policy chooses to wait for a load, wait (timed as stall). The wait watches
        ``should_stop`` too: a cancel or a deactivate must not sit out a load on slow storage
        (up to ``stall_timeout_s``) before the round even starts.
        """
        decision: Decision = self.policy.choose(view)
        draft, stall = decision.draft, 0.0
        k_round = self._proposal_length(decision)
        if draft is not None and self.ngram is not None and draft == self.ngram.name:
            return draft, 0.0, k_round
        if draft is None or self.pool.state(draft) == DraftState.RESIDENT:
            return draft, 0.0, k_round
        if decision.wait:
            t0 = self._clock()
            ticket = self.scheduler.demand(draft)
            self.rounds.wait_for_load(ticket, self.config.stall_timeout_s, should_stop)
            stall = self._clock() - t0
            if self.pool.state(draft) == DraftState.RESIDENT:
                return draft, stall, k_round
            if should_stop is not None and should_stop():
                return None, stall, k_round  # the caller ends the turn; the load is not a failure
            _log.warning("stalled %.3fs for %s but it did not load (%s); continuing with what is resident",
                         stall, draft, ticket.error or ticket.outcome)
            decision = self.policy.choose(self.view())
            if decision.draft is not None and self.pool.state(decision.draft) == DraftState.RESIDENT:
                return decision.draft, stall, self._proposal_length(decision)
        # Not resident and not waited for: run target-only rather than block.
        return None, stall, k_round

    def _proposal_length(self, decision: Decision) -> int:
        """The decision's k, within 1 and the runtime's k (a policy may only shorten proposals)."""
        return self.config.k if decision.k is None else max(1, min(decision.k, self.config.k))
