"""``memspec_build drafts``: one distilled draft per domain, plus ``general``, and the catalogue.

The phases are the ones that built the bundled zoo (docs/zoo.md), with the user's target as
teacher:

1. next-token training from scratch on the draft's corpus (its domain; all domains, equally
   weighted, for ``general``);
2. KL distillation toward the target on the same corpus windows: greedy acceptance only counts
   agreement with the *target's* argmax, so the draft should learn the target's distribution,
   not the corpus's (starting from the pretrained draft: distilling from scratch in the same time
   was worse, the teacher forward slows each step about 4x);
3. KL distillation on the target's own greedy continuations of training prefixes: the draft
   is only ever asked to predict what the target writes.

Drafts train on 90% of each domain's training documents; the other 10% (validation) trains the
predictor and, with ``validation_checks``, is scored every so often in each KL phase, which then
keeps its best weights (:mod:`.validation`: small
corpora let a draft memorise its training text, and then more training makes it worse on new text).

By default (``specialists_from="general"``) only the general draft runs all three phases; it is
trained first, and every domain draft starts from it and runs phases 2 and 3 on its own domain.
Why: drafts trained from scratch per domain came out no better than the general draft on
domains whose text the target continues alike (C++ headers and Perl modules in the worked
example of docs/own_models.md), and each spent a quarter of its time relearning the shared
basics; a specialist that starts from the general draft begins where the general one ends on
its domain, and its whole budget goes to the domain. On the bundled zoo's target and corpora,
for the same time, it raised own-domain acceptance on four of five domains (code 0.13 -> 0.18,
legal 0.30 -> 0.40, prose 0.28 -> 0.33; docs/build.md). ``specialists_from="scratch"`` keeps the
earlier recipe (every draft from scratch, equal budgets) for comparison.

``specialists_from="base"`` separates the two roles the general draft plays in the default: a
*base* draft at the specialists' shape learns all domains (three phases, ``BASE_UNITS`` shares) and
every domain draft grows from it, but the base is not shipped; the shipped general draft is a
fallback trained from scratch at its own shape and share, as with ``scratch``. Why: with a small
fallback, specialists from scratch spend their pretraining relearning what every domain shares
(the chat template, the target's register) from one domain's text only; grown from a base they
start with it and spend their whole share on their domain.

Every draft uses the target's tokenizer files (copied verbatim) and the target's logit width
as its ``vocab_size``, so it passes the node's draft checks by construction; its architecture
is a small Llama whatever the target's (:mod:`.draft_architecture`), sized by measurement
(:mod:`.draft_sizing`). The time budget is split in units: the general draft gets
``GENERAL_UNITS`` of them (one when specialists start from scratch), each domain draft one;
within a draft, between its phases by ``PHASES`` / ``SPECIALIST_PHASES``; every phase stops at
its budget and saves.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import LlamaForCausalLM, PreTrainedModel

from memspec_ros.builder.chat_rendering import PromptRenderer, target_chat_renderers
from memspec_ros.builder.continuations import ContinuationPool
from memspec_ros.builder.corpora import (
    VALIDATION_FRACTION,
    Corpus,
    domain_seed,
    read_jsonl,
    read_jsonl_rows,
    split_documents,
    split_validation,
    write_jsonl,
)
from memspec_ros.builder.disk_space import require_free_space
from memspec_ros.builder.distillation import distill
from memspec_ros.builder.draft_architecture import Shape, llama_config, parse_shape
from memspec_ros.builder.draft_sizing import CANDIDATES, MIN_RATIO, SizingResult, choose_draft_shape, fixed_shape
from memspec_ros.builder.errors import BuildError
from memspec_ros.builder.layout import GENERAL, OutputLayout, draft_name
from memspec_ros.builder.machine_load import warn_if_busy
from memspec_ros.builder.prompts import PROMPTS_PER_DOMAIN, domain_prompts
from memspec_ros.builder.steps import StepLedger
from memspec_ros.builder.target_folder import (
    TargetInfo,
    pin_tokenizer_class,
    place_target,
    shares_filesystem,
    tokenizer_files,
)
from memspec_ros.builder.training_loop import TrainSpec, train
from memspec_ros.builder.validation import AgreementCheck, Check, continuation_rows
from memspec_ros.builder.windows import WindowSampler, token_array
from memspec_ros.core.token_map import TOKEN_MAP_FILE, TokenMap, load_token_map

PHASES: tuple[tuple[str, float], ...] = (("pretrain", 0.27), ("distill-corpus", 0.40),
                                         ("distill-continuations", 0.33))
"""Training phases of a draft trained from scratch and their shares of its time budget (the zoo's
100/150/120 s)."""
SPECIALIST_PHASES: tuple[tuple[str, float], ...] = (("distill-corpus", 0.55), ("distill-continuations", 0.45))
"""Phases of a domain draft that starts from the general draft (no pretraining: it has that)."""
GENERAL_UNITS = 2.0
"""Budget units of the general draft when the specialists start from it (a domain draft gets one):
it is every draft's foundation and learns all domains at once."""
SPECIALISTS_FROM: tuple[str, ...] = ("general", "scratch", "base")
"""Where a domain draft starts: the trained general draft (default), random weights, or a base draft
trained on all domains at the specialists' shape that is not shipped."""
BASE_UNITS = 2.0
"""Budget units of the base draft (``specialists_from="base"``): the general draft's in the default."""
BASE = "_base"
"""The base draft's name in ``work/checkpoints`` (a domain name cannot start with ``_``)."""
CONTINUATION_GENERATION_SHARE = 0.4
"""At most this share of the continuation phase goes to generating the target's continuations."""


@dataclass(frozen=True)
class DraftSettings:
    """Everything that shapes the drafts (all of it is part of the steps' input keys)."""

    time_budget_s: float = 1800.0
    """Training seconds for all drafts together (sizing, tokenising and export come on top)."""
    k: int = 4
    """Tokens a draft proposes per round (the sizing rule verifies k + 1)."""
    seq_len: int = 128
    batch: int = 16
    distill_batch: int = 8
    lr: float = 3e-3
    distill_lr: float = 1e-3
    continuation_prefix: int = 32
    continuation_new_tokens: int = 96
    continuation_rows: int = 16
    """Rows the target continues at once."""
    continuation_batches: int = 20
    validation_rows: int = 32
    """Validation prefixes per domain the target continues (:mod:`.validation`)."""
    validation_checks: int = 0
    """Times each distillation phase scores the draft on validation text and keeps the best
    weights (plus once before its first step); 0 keeps the last weights. Off by default until a
    clean comparison shows it helps (docs/build.md)."""
    max_positions: int = 2048
    """The drafts' context (capped at the target's): a longer dialogue is decoded target-only
    from there on, and the draft's KV cache, which the node's memory budget counts at full
    context, stays small."""
    shape: str = ""
    """``HIDDENxLAYERS`` to skip the choice (it is still measured and reported); empty: choose."""
    domain_shapes: tuple[tuple[str, str], ...] = ()
    """``(domain, HIDDENxLAYERS)`` pairs: drafts of these domains (``general`` included) get their own
    size instead of ``shape`` or the chosen one (a hard domain may deserve a larger draft); each is
    measured against the target too. Only with ``specialists_from="scratch"`` (and for ``general``
    alone with ``"base"``): a domain draft that starts from another draft has its shape."""
    specialists_from: str = "general"
    """``general``: domain drafts start from the trained general draft; ``scratch``: from random weights;
    ``base``: from a base draft of all domains that is not shipped (the general draft is then a
    fallback trained from scratch)."""
    general_units: float = 0.0
    """Budget units of the general draft (a domain draft gets one); 0: ``GENERAL_UNITS`` when the
    specialists start from it, else one."""
    draft_vocab: int = 0
    """Subset drafts: they predict only this many of the target's tokens, the most frequent in the
    training text (:mod:`memspec_ros.core.token_map`); 0, or at least the target's vocabulary:
    every token."""
    seed: int = 0
    init_layers: int = 0
    """Drafts start as the target's embedding, its first ``init_layers`` layers and its final norm
    (:mod:`memspec_ros.builder.target_init`; a Llama target only); 0: from random weights."""
    save_dtype: str = ""
    """The dtype the drafts are saved in: ``bfloat16``, ``float16`` or ``float32``; empty: the target's
    own when it is stored in 16 bits, else float32. A bf16 draft is half the bytes (what a robot's
    disk and the repository carry); the node computes in its own ``dtype`` whatever a file holds."""

    def step_key(self) -> dict[str, object]:
        """The settings as the training steps' input keys see them. A setting added later is left
        out at its default, so a build made before it existed does not retrain for nothing."""
        key = asdict(self)
        if not self.draft_vocab:
            del key["draft_vocab"]
        del key["save_dtype"]  # how a draft is written changes no training step (the export's key has it)
        if not self.init_layers:
            del key["init_layers"]
        return key

    def export_dtype(self, target: TargetInfo) -> str:
        """The dtype a draft file is written in (see ``save_dtype``)."""
        if self.save_dtype:
            return self.save_dtype
        return target.stored_dtype if target.stored_dtype in ("bfloat16", "float16") else "float32"

    def draft_vocab_size(self, target: TargetInfo) -> int:
        """The drafts' logit count: the subset plus 'other', or the target's whole vocabulary."""
        return self.draft_vocab + 1 if 0 < self.draft_vocab < target.logit_width else target.logit_width

    def draft_seconds(self, domains: int) -> tuple[float, float]:
        """Training seconds of one domain draft and of the general draft."""
        unit = self.time_budget_s / (domains + self.effective_general_units + self.base_units)
        return unit, unit * self.effective_general_units

    def base_seconds(self, domains: int) -> float:
        """Training seconds of the base draft (0 unless ``specialists_from="base"``)."""
        return self.draft_seconds(domains)[0] * self.base_units

    @property
    def base_units(self) -> float:
        """Budget units of the base draft: ``BASE_UNITS`` when the specialists grow from one, else 0."""
        return BASE_UNITS if self.specialists_from == "base" else 0.0

    @property
    def effective_general_units(self) -> float:
        """``general_units``, its default resolved (what the build really gave the general draft)."""
        return self.general_units or (GENERAL_UNITS if self.specialists_from == "general" else 1.0)


@dataclass(frozen=True)
class DraftBuild:
    """What the drafts step produced."""

    domains: list[str]
    drafts: dict[str, Path]
    sizing: SizingResult
    trained: list[str]
    """Drafts this run (re)trained or re-exported; empty when every step was already done."""


SIZING_STEPS = ("sizing", "sizing-per-domain")
"""What ``--resize`` redoes."""


def run_drafts(target: TargetInfo, corpora: list[Corpus], out: Path, settings: DraftSettings,
               *, force: bool = False, resize: bool = False, general_corpus: Corpus | None = None) -> DraftBuild:
    """Build every draft of ``corpora`` for ``target`` into ``out`` and write the catalogue.

    ``resize`` measures the draft sizes again (the rest reruns only where the sizes changed).
    ``general_corpus`` (its domain :data:`GENERAL`) is the general draft's own text, what users ask
    outside every domain; without it the general draft trains on all the domains' corpora. Why
    offer it: a general draft trained on every domain is a multi-domain draft that takes much of
    each specialist's edge, whereas the fallback's job is the turns no specialist covers."""
    from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer

    layout = OutputLayout(out)
    ledger = StepLedger(layout.stamps, force=force, redo=SIZING_STEPS if resize else ())
    warn_if_busy("drafts")
    _check_target_slot(layout, target)
    domains = [c.domain for c in corpora]
    all_drafts = [*domains, GENERAL]
    print(f"[drafts] target {target.path} ({target.model_type}, logit width {target.logit_width}, "
          f"{target.weights_bytes / 1e6:.1f} MB); domains {domains} + {GENERAL}", flush=True)
    teacher = functools.cache(lambda: _servable(load_causal_lm(target.path), target.path))  # loaded if needed

    if settings.specialists_from not in SPECIALISTS_FROM:
        raise BuildError(f"specialists_from must be one of {', '.join(SPECIALISTS_FROM)}, got "
                         f"{settings.specialists_from!r}")
    overrides = _shape_overrides(settings, all_drafts)  # a bad --draft-shape fails before minutes of sizing
    fixed = None
    if settings.init_layers:
        from memspec_ros.builder.target_init import target_shape
        from memspec_ros.core.model_loading import load_config

        if settings.shape or overrides:
            raise BuildError("--draft-from-target sets the drafts' shape (the target's width, that many of its "
                             "layers): leave --draft-shape out")
        fixed = target_shape(load_config(target.path), settings.init_layers)
    elif settings.shape:
        fixed = parse_shape(settings.shape)
    # before anything is written: room for the smallest drafts; after sizing, for the chosen ones
    vocab = settings.draft_vocab_size(target)
    trained_drafts = len(all_drafts) + (settings.specialists_from == "base")  # the base draft's checkpoints
    texts = [*corpora, *([general_corpus] if general_corpus else [])]
    _require_space(layout, target, texts, fixed or CANDIDATES[-1], trained_drafts, vocab)
    sizing = _sizing_step(ledger, layout, teacher, target, settings, fixed)
    shape = sizing.shape
    unused = set(overrides) >= set(all_drafts)
    print(f"[sizing] {sizing.summary()}" + (" (unused: every draft has its own --draft-shape)" if unused else ""),
          flush=True)
    if not sizing.ratio_met:
        print(f"[sizing] warning: even the smallest draft costs more than 1/{MIN_RATIO:.0f} of a verification "
              "on this machine: speculation will barely pay off with this target (see `evaluate`)", flush=True)
    if sizing.unstable:
        print(f"[sizing] warning: this machine's speed moved by up to {sizing.spread:.0%} between repeated "
              f"measurements (load average {sizing.load_average:.1f} on {os.cpu_count()} cores): other work was "
              "running, so the chosen size may not be what this machine affords. Build on a quiet machine, or "
              "when it is quiet rerun the same command with --resize (only the sizing is measured again; drafts "
              "are retrained only if their size changes), or choose with --draft-shape", flush=True)

    shapes = {d: overrides.get(d, shape) for d in all_drafts}
    if any(shapes[d] != shape for d in all_drafts):
        _shape_overrides_step(ledger, layout, teacher, target, settings, sizing, shapes)
    _require_space(layout, target, texts, max(shapes.values(), key=lambda s: s.parameters(vocab)),
                   trained_drafts, vocab)
    split_keys = {c.domain: _split_step(ledger, layout, c) for c in corpora}
    text_splits = {**split_keys, **({GENERAL: _split_step(ledger, layout, general_corpus)} if general_corpus else {})}
    _write_manifest(layout, corpora, general_corpus)
    renderers = target_chat_renderers(target.path)
    ledger.run("heldout-prompts", {"splits": split_keys, "chat_prompts": "first answer"},
               lambda: _write_prompts(layout, split_keys, renderers[1] if renderers else None),
               outputs=[layout.heldout_prompts])
    ledger.run("target", {"fingerprint": target.fingerprint},
               lambda: {"placed": place_target(target.path, layout.target)},
               outputs=[layout.target / "config.json"])
    tok = load_tokenizer(layout.target)
    streams: dict[str, np.ndarray] = {}
    token_keys: dict[str, str] = {}
    eos = target.eos_token_id if isinstance(target.eos_token_id, int) else target.eos_token_id[0]
    validation: dict[str, np.ndarray] = {}
    for corpus in texts:
        token_keys[corpus.domain] = _tokens_step(ledger, layout, corpus.domain, text_splits[corpus.domain], target,
                                                 tok, eos, settings)
        streams[corpus.domain] = np.load(layout.tokens(corpus.domain))
        rows = _validation_step(ledger, layout, teacher, corpus.domain, token_keys[corpus.domain], settings)
        if rows is not None:
            validation[corpus.domain] = rows
    token_map, map_key = _token_map_step(ledger, layout, token_keys, target, settings,
                                         _stop_and_special_ids(tok, target))

    per_domain, per_general = settings.draft_seconds(len(domains))
    from_general, from_base = settings.specialists_from == "general", settings.specialists_from == "base"
    specialist_phases = SPECIALIST_PHASES if from_general or from_base else PHASES

    def plan(seconds: float, phases: tuple[tuple[str, float], ...]) -> str:
        return ", ".join(f"{name} {seconds * share:.0f} s" for name, share in phases)

    per_base = settings.base_seconds(len(domains))
    base_plan = (f"a base draft of all domains (not shipped) {per_base:.0f} s ({plan(per_base, PHASES)}), "
                 if from_base else "")
    origin = {"general": "from the general draft: ", "scratch": "from scratch: ", "base": "from the base draft: "}
    print(f"[drafts] budget {settings.time_budget_s:.0f} s: {GENERAL} {per_general:.0f} s "
          f"({plan(per_general, PHASES)}), then {base_plan}{len(domains)} domain drafts x {per_domain:.0f} s "
          f"({origin[settings.specialists_from]}{plan(per_domain, specialist_phases)})", flush=True)
    trained: list[str] = []
    # the general draft first: with specialists_from=general every domain draft starts from it
    index_of = {d: i for i, d in enumerate(all_drafts)}  # seeds as before the order changed
    domain_keys = {d: token_keys[d] for d in domains}
    general_texts = [GENERAL] if general_corpus else domains
    general = _train_draft(ledger, layout, GENERAL, index_of[GENERAL], dict.fromkeys(general_texts, 1.0), streams,
                           {**{d: token_keys[d] for d in general_texts}, **map_key}, teacher, target,
                           shapes[GENERAL], settings, per_general, PHASES, start=None,
                           check=_check(validation, general_texts, settings, token_map), token_map=token_map)
    if general.ran:
        trained.append(draft_name(GENERAL))
    outcomes = {GENERAL: general}
    start = (layout.checkpoint(GENERAL, PHASES[-1][0]), general.key) if from_general else None
    base = None
    if from_base:  # at the specialists' shape, on every domain; only its last checkpoint is kept
        base = _train_draft(ledger, layout, BASE, len(all_drafts), dict.fromkeys(domains, 1.0), streams,
                            {**domain_keys, **map_key}, teacher, target, shape, settings, per_base, PHASES,
                            start=None, check=_check(validation, domains, settings, token_map),
                            token_map=token_map, export=False)
        start = (layout.checkpoint(BASE, PHASES[-1][0]), base.key)
    for domain in domains:
        result = _train_draft(ledger, layout, domain, index_of[domain], {domain: 1.0}, streams,
                              {domain: token_keys[domain], **map_key}, teacher, target, shapes[domain], settings,
                              per_domain, specialist_phases, start=start,
                              check=_check(validation, [domain], settings, token_map), token_map=token_map)
        if result.ran:
            trained.append(draft_name(domain))
        outcomes[domain] = result
    drafts = {draft_name(d): layout.draft(d) for d in all_drafts}
    _write_drafts_report(layout, settings, shapes, {GENERAL: per_general, **dict.fromkeys(domains, per_domain)},
                         outcomes, None if base is None else (shape, per_base, base), general_corpus)
    _write_catalogue(layout, target, corpora, trained, general_corpus)
    return DraftBuild(domains=domains, drafts=drafts, sizing=sizing, trained=trained)


def _servable(model: PreTrainedModel, path: Path) -> PreTrainedModel:
    """``model`` if it can serve as a speculative target; :class:`BuildError` saying why not."""
    from memspec_ros.core.cache_rollback import require_rollback
    from memspec_ros.core.errors import ModelConfigError

    try:
        require_rollback(model, f"target {path}")
    except ModelConfigError as exc:
        raise BuildError(str(exc)) from None
    return model


def _check_target_slot(layout: OutputLayout, target: TargetInfo) -> None:
    """Refuse to replace an ``<out>/target`` this tool did not put there."""
    slot = layout.target
    if not slot.exists() or slot.resolve() == target.path:
        return
    if not (layout.stamps / "target.json").exists():
        raise BuildError(f"{slot} already exists and memspec_build did not put it there: choose an empty --out "
                         "folder (or remove that folder yourself)")


def _sizing_step(ledger: StepLedger, layout: OutputLayout, teacher: Callable[[], PreTrainedModel], target: TargetInfo,
                 settings: DraftSettings, fixed: Shape | None) -> SizingResult:
    machine = {"host": platform.node(), "cpu": platform.processor() or platform.machine(),
               "threads": torch.get_num_threads()}
    inputs = {"target": target.fingerprint, "k": settings.k, "shape": settings.shape, "machine": machine,
              "candidates": [s.label for s in CANDIDATES], "rule": MIN_RATIO}
    vocab = settings.draft_vocab_size(target)
    if vocab != target.logit_width:  # a key that full-vocabulary builds made before keeps matching
        inputs["draft_vocab_size"] = vocab
    if settings.init_layers:
        inputs["shape"] = asdict(fixed)

    def work() -> dict[str, object]:
        print(f"[sizing] measuring the target and candidate drafts on this machine ({machine['threads']} "
              "threads)", flush=True)
        if fixed is not None:
            result = fixed_shape(fixed, teacher(), target, settings.k, vocab_size=vocab)
        else:
            result = choose_draft_shape(teacher(), target, settings.k, vocab_size=vocab)
        layout.reports.mkdir(parents=True, exist_ok=True)
        (layout.reports / "sizing.json").write_text(json.dumps(result.to_json(), indent=1) + "\n")
        return result.to_json()

    return SizingResult.from_json(ledger.run("sizing", inputs, work).result)


def _draft_shapes(settings: DraftSettings, drafts: list[str], default: Shape) -> dict[str, Shape]:
    """Every draft's shape: its ``domain_shapes`` entry, else ``default``; :class:`BuildError` on a bad entry."""
    overrides = _shape_overrides(settings, drafts)
    return {d: overrides.get(d, default) for d in drafts}


def _shape_overrides(settings: DraftSettings, drafts: list[str]) -> dict[str, Shape]:
    """The drafts ``domain_shapes`` sizes apart, checked; :class:`BuildError` on a bad entry."""
    overrides = dict(settings.domain_shapes)
    unknown = sorted(set(overrides) - set(drafts))
    if unknown:
        raise BuildError(f"--draft-shape names domain(s) {unknown} that have no corpus; domains: {drafts}")
    if overrides and settings.specialists_from == "general":
        raise BuildError("--draft-shape DOMAIN=HIDDENxLAYERS needs --specialists-from scratch: a domain draft "
                         "that starts from the general draft has the general draft's shape")
    grown = sorted(set(overrides) - {GENERAL})
    if grown and settings.specialists_from == "base":
        raise BuildError(f"--draft-shape {grown[0]}=...: with --specialists-from base every domain draft has the "
                         "base draft's shape (give it as --draft-shape HIDDENxLAYERS); only general=HIDDENxLAYERS "
                         "sizes a draft apart")
    try:
        return {d: parse_shape(s) for d, s in overrides.items()}
    except ValueError as exc:
        raise BuildError(f"--draft-shape: {exc}") from None


def _shape_overrides_step(ledger: StepLedger, layout: OutputLayout, teacher: Callable[[], PreTrainedModel],
                          target: TargetInfo, settings: DraftSettings, sizing: SizingResult,
                          shapes: Mapping[str, Shape]) -> None:
    """Measure each per-domain shape against the sizing's target verification and report it."""
    others = {s.label: s for s in shapes.values() if s != sizing.shape}
    inputs = {"sizing": sizing.to_json(), "per_domain": {d: s.label for d, s in shapes.items()}}

    def work() -> dict[str, object]:
        measured = {}
        for label, shape in sorted(others.items()):
            ms = fixed_shape(shape, teacher(), target, settings.k,
                             vocab_size=settings.draft_vocab_size(target)).draft_step_ms
            measured[label] = {"draft_step_ms": ms, "ratio": round(sizing.target_verify_ms / ms, 2)}
        report = {**sizing.to_json(), "per_domain": {d: s.label for d, s in shapes.items()}, "shapes": measured}
        (layout.reports / "sizing.json").write_text(json.dumps(report, indent=1) + "\n")
        return measured

    for label, m in ledger.run("sizing-per-domain", inputs, work).result.items():
        note = "" if m["ratio"] >= MIN_RATIO else f" (below the {MIN_RATIO:.0f}x rule: speculation pays less)"
        print(f"[sizing] {label}: step {m['draft_step_ms']:.3f} ms, target verify / step = {m['ratio']:.1f}x{note}",
              flush=True)


def _require_space(layout: OutputLayout, target: TargetInfo, corpora: list[Corpus], shape: Shape,
                   drafts: int, vocab: int) -> None:
    params = shape.parameters(vocab)
    needed = drafts * params * 4 * (len(PHASES) + 1)  # fp32 checkpoints per phase + the exported draft
    chars = sum(c.characters for c in corpora)
    needed += chars * 2 + chars * 4  # the split as JSON lines; token arrays (at most a token per character)
    if not (layout.target / "config.json").exists() and not shares_filesystem(target.path, layout.root):
        needed += target.weights_bytes
    require_free_space(layout.root, needed, "the drafts")


def _split_step(ledger: StepLedger, layout: OutputLayout, corpus: Corpus) -> str:
    seed = domain_seed(corpus.domain)

    def work() -> dict[str, object]:
        train_docs, held = split_documents(list(corpus.documents), seed=seed)
        fit, val = split_validation(train_docs, seed=seed)
        write_jsonl(layout.train_split(corpus.domain), fit, corpus.chats)
        write_jsonl(layout.validation_split(corpus.domain), val, corpus.chats)
        write_jsonl(layout.heldout(corpus.domain), held, corpus.chats)
        print(f"[split] {corpus.domain}: {len(fit)} training / {len(val)} validation / {len(held)} held-out "
              f"documents ({corpus.characters / 1e6:.2f} M characters)", flush=True)
        return {"train_documents": len(fit), "validation_documents": len(val), "heldout_documents": len(held)}

    return ledger.run(f"split-{corpus.domain}",
                      {"digest": corpus.digest, "seed": seed, "validation": VALIDATION_FRACTION}, work,
                      outputs=[layout.train_split(corpus.domain), layout.validation_split(corpus.domain),
                               layout.heldout(corpus.domain)]).key


def _write_prompts(layout: OutputLayout, domains: Mapping[str, str], render_prompt: PromptRenderer | None
                   ) -> dict[str, object]:
    """Evaluation prompts cut from the held-out documents only, in the bundled zoo's format.

    A chat document gives prompts that end where an answer begins, with their messages (a row's
    ``messages``: what a client would send as a chat goal); other documents give text slices.
    """
    counts = {}
    with layout.heldout_prompts.open("w", encoding="utf-8") as fh:
        for domain in domains:
            rows = domain_prompts(read_jsonl_rows(layout.heldout(domain)), PROMPTS_PER_DOMAIN, render_prompt)
            counts[domain] = len(rows)
            for prompt, messages in rows:
                row = {"domain": domain, "prompt": prompt, **({"messages": messages} if messages else {})}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return counts


def _write_manifest(layout: OutputLayout, corpora: list[Corpus], general_corpus: Corpus | None) -> None:
    """What `predictor` and `evaluate` read: the domains, where they came from (and the general
    draft's own corpus, if any: not a domain, so neither step reads it)."""
    def entry(c: Corpus) -> dict[str, object]:
        return {"domain": c.domain, "source": str(c.source), "digest": c.digest, "documents": len(c.documents)}

    manifest: dict[str, object] = {"domains": [entry(c) for c in corpora]}
    if general_corpus is not None:
        manifest["general_corpus"] = entry(general_corpus)
    layout.split_manifest.parent.mkdir(parents=True, exist_ok=True)
    layout.split_manifest.write_text(json.dumps(manifest, indent=1) + "\n")


def _tokens_step(ledger: StepLedger, layout: OutputLayout, domain: str, split_key: str, target: TargetInfo,
                 tok: object, eos: int, settings: DraftSettings) -> str:
    path, val_path = layout.tokens(domain), layout.tokens(domain, "validation")

    def work() -> dict[str, object]:
        ids = token_array(read_jsonl(layout.train_split(domain)), tok, eos)
        val_docs = read_jsonl(layout.validation_split(domain))
        val_ids = token_array(val_docs, tok, eos) if val_docs else np.zeros(0, dtype=ids.dtype)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, ids)
        np.save(val_path, val_ids)
        return {"tokens": len(ids), "validation_tokens": len(val_ids)}

    outcome = ledger.run(f"tokens-{domain}", {"split": split_key, "target": target.fingerprint}, work,
                         outputs=[path, val_path])
    window = max(settings.seq_len, settings.continuation_prefix)
    needed = 2 * (window + 1)
    if outcome.result["tokens"] < needed:
        raise BuildError(f"corpus of domain {domain!r} has only {outcome.result['tokens']} training tokens; at least "
                         f"{needed} are needed for training windows of {window} tokens: add text (or lower "
                         "--seq-len)")
    return outcome.key


def _validation_step(ledger: StepLedger, layout: OutputLayout, teacher: Callable[[], PreTrainedModel], domain: str,
                     tokens_key: str, settings: DraftSettings) -> np.ndarray | None:
    """The target's greedy continuations of the domain's validation prefixes, or None (no validation
    text, or checkpoint selection turned off)."""
    if settings.validation_checks == 0:
        return None
    path = layout.validation_rows(domain)
    inputs = {"tokens": tokens_key, "rows": settings.validation_rows, "prefix": settings.continuation_prefix,
              "new_tokens": settings.continuation_new_tokens, "seed": settings.seed}

    def work() -> dict[str, object]:
        rows = continuation_rows(teacher(), np.load(layout.tokens(domain, "validation")), settings.validation_rows,
                                 settings.continuation_prefix, settings.continuation_new_tokens,
                                 settings.seed + domain_seed(domain))
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, rows if rows is not None else np.zeros((0, 0), dtype=np.int64))
        if rows is None:
            print(f"[validation] {domain}: too little validation text for one prefix: its drafts keep their "
                  "last weights", flush=True)
        return {"rows": 0 if rows is None else len(rows)}

    outcome = ledger.run(f"validation-{domain}", inputs, work, outputs=[path])
    return np.load(path) if outcome.result["rows"] else None


def _check(validation: Mapping[str, np.ndarray], domains: list[str], settings: DraftSettings,
           token_map: TokenMap | None) -> Check | None:
    """The validation score of a draft of ``domains``: on their rows together (None if none has any)."""
    rows = [validation[d] for d in domains if d in validation]
    return AgreementCheck(np.concatenate(rows), settings.continuation_prefix, token_map=token_map) if rows else None


def _stop_and_special_ids(tok: object, target: TargetInfo) -> list[int]:
    """Ids a subset must hold whatever the corpora say: the tokenizer's special tokens and every id
    the node stops at (the generation config's end-of-turn ids too, e.g. Llama 3's ``<|eot_id|>``):
    a draft that cannot propose the end of an answer loses a round at every turn's end."""
    from transformers import GenerationConfig

    ids = [*getattr(tok, "all_special_ids", []), *_as_list(target.eos_token_id), target.bos_token_id,
           target.pad_token_id]
    with contextlib.suppress(OSError, ValueError):  # no generation_config.json: the tokenizer's ids suffice
        ids += _as_list(GenerationConfig.from_pretrained(str(target.path), local_files_only=True).eos_token_id)
    return sorted({int(t) for t in ids if t is not None and 0 <= int(t) < target.logit_width})


def _token_map_step(ledger: StepLedger, layout: OutputLayout, token_keys: Mapping[str, str], target: TargetInfo,
                    settings: DraftSettings, specials: list[int]) -> tuple[TokenMap | None, dict[str, str]]:
    """The drafts' token map (``--draft-vocab``): the most frequent target tokens of every domain's
    training text (and the general corpus's, if any), ``specials`` always among them; ``(None, {})``
    for full-vocabulary drafts.

    One map for all drafts: a domain draft starts from the general draft, so they share its rows.
    The second value joins the drafts' step keys, so changing the subset retrains them."""
    if settings.draft_vocab_size(target) == target.logit_width:
        return None, {}
    path = layout.token_map

    def work() -> dict[str, object]:
        counts = np.zeros(target.logit_width, dtype=np.int64)
        for domain in token_keys:
            ids = np.load(layout.tokens(domain))
            counts += np.bincount(ids[ids < target.logit_width], minlength=target.logit_width)
        by_frequency = [int(t) for t in np.argsort(-counts, kind="stable") if counts[t] > 0 and t not in specials]
        ids = sorted([*specials, *by_frequency[:max(0, settings.draft_vocab - len(specials))]])
        TokenMap.from_ids(ids, target.logit_width).save(path.parent)
        covered = float(counts[ids].sum() / max(1, counts.sum()))
        return {"tokens": len(ids), "coverage": round(covered, 5)}

    outcome = ledger.run("draft-vocab", {"tokens": dict(token_keys), "draft_vocab": settings.draft_vocab,
                                         "specials": specials, "width": target.logit_width}, work,
                         outputs=[path])
    print(f"[vocab] the drafts predict {outcome.result['tokens']} of the target's {target.logit_width} tokens, "
          f"{100 * outcome.result['coverage']:.2f}% of the training text's tokens; the target writes the rest",
          flush=True)
    token_map = load_token_map(path.parent)
    assert token_map is not None
    return token_map, {"draft-vocab": outcome.key}


def _as_list(value: int | list[int] | None) -> list[int | None]:
    return list(value) if isinstance(value, list) else [value]


@dataclass(frozen=True)
class _DraftOutcome:
    ran: bool
    """True if any of the draft's steps ran (rather than being skipped as finished)."""
    key: str
    """The input key of its last training step: what a draft started from it depends on."""
    phases: dict[str, dict[str, object]]
    """Each phase's result (steps, seconds, final loss or KL), this run's or the stamp's."""
    texts: tuple[str, ...] = ()
    """The corpora it trained on (domains, or ``general`` for a general corpus)."""


def _train_draft(ledger: StepLedger, layout: OutputLayout, domain: str, index: int, mix: dict[str, float],
                 streams: Mapping[str, np.ndarray], upstream: dict[str, str], teacher: Callable[[], PreTrainedModel],
                 target: TargetInfo, shape: Shape, settings: DraftSettings, seconds: float,
                 phases: tuple[tuple[str, float], ...], *, start: tuple[Path, str] | None,
                 check: Check | None, token_map: TokenMap | None = None, export: bool = True) -> _DraftOutcome:
    """Run ``phases`` and the export of one draft, from random weights (``start`` None; the first phase
    must then be ``pretrain``) or from a checkpoint (``start``: its folder and its step key). ``check``
    scores the draft on validation text in the KL phases, which keep their best weights. With
    ``token_map`` the draft is a subset draft: it trains on its own ids and ships the map. Without
    ``export`` (the base draft) its last checkpoint is the result."""
    name = draft_name(domain)
    seed = settings.seed + 1000 * (index + 1)
    positions = min(settings.max_positions, target.max_positions)
    data = {d: streams[d] for d in mix}
    common = {"target": target.fingerprint, "shape": asdict(shape), "settings": settings.step_key(),
              "draft_seconds": seconds, "positions": positions, "tokens": upstream}
    ran = False

    def sampler(seq_len: int, batch: int, seed_offset: int) -> WindowSampler:
        return WindowSampler(data, mix, seq_len, batch, seed + seed_offset)

    def pretrain(budget: float, _source: Path | None, out_dir: Path) -> dict[str, object]:
        """Next-token training from scratch, or from the target's first layers (``init_layers``, at the
        distillation's gentler rate: the weights are already good); a subset draft trains on its own ids,
        rare tokens as 'other'."""
        torch.manual_seed(seed)
        vocab = token_map.draft_vocab_size if token_map is not None else target.logit_width
        if settings.init_layers:
            from memspec_ros.builder.target_init import draft_from_target

            model = draft_from_target(teacher(), settings.init_layers, positions, token_map)
        else:
            model = LlamaForCausalLM(llama_config(shape, vocab_size=vocab, max_positions=positions,
                                                  bos_token_id=target.bos_token_id,
                                                  eos_token_id=target.eos_token_id, pad_token_id=target.pad_token_id))
        lr = settings.distill_lr if settings.init_layers else settings.lr
        spec = TrainSpec(budget, lr, settings.batch, settings.seq_len, seed, log_every=10**9)
        table = None if token_map is None else token_map.target_to_draft.numpy().astype(np.int32)  # not int64: 4x
        own = data if table is None else {d: table[ids] for d, ids in data.items()}
        windows = WindowSampler(own, mix, settings.seq_len, settings.batch, seed)
        return train(model, windows, spec, out_dir, f"{name} pretrain")

    def distill_corpus(budget: float, source: Path | None, out_dir: Path) -> dict[str, object]:
        """KL distillation on corpus windows."""
        student = LlamaForCausalLM.from_pretrained(source, dtype=torch.float32)
        spec = TrainSpec(budget, settings.distill_lr, settings.distill_batch, settings.seq_len, seed + 1,
                         log_every=10**9)
        return distill(student, teacher(), sampler(settings.seq_len, settings.distill_batch, 1), spec, out_dir,
                       f"{name} distill on corpus", check=check, checks=settings.validation_checks,
                       token_map=token_map)

    def distill_continuations(budget: float, source: Path | None, out_dir: Path) -> dict[str, object]:
        """KL distillation on the target's own continuations of training prefixes."""
        student = LlamaForCausalLM.from_pretrained(source, dtype=torch.float32)
        t0 = time.monotonic()
        prefixes = sampler(settings.continuation_prefix - 1, settings.continuation_rows, 2)
        pool = ContinuationPool(teacher(), prefixes, settings.continuation_batches, settings.continuation_new_tokens,
                                settings.distill_batch, seed + 3,
                                max_seconds=budget * CONTINUATION_GENERATION_SHARE)
        generation = time.monotonic() - t0
        spec = TrainSpec(max(0.1 * budget, budget - generation), settings.distill_lr, settings.distill_batch,
                         settings.continuation_prefix + settings.continuation_new_tokens - 1, seed + 4,
                         log_every=10**9)
        stats = distill(student, teacher(), pool, spec, out_dir, f"{name} distill on target continuations",
                        check=check, checks=settings.validation_checks, token_map=token_map)
        return {**stats, "pool_rows": len(pool.rows), "generation_seconds": round(generation, 1)}

    work = {"pretrain": pretrain, "distill-corpus": distill_corpus, "distill-continuations": distill_continuations}
    if (start is None) != (phases[0][0] == "pretrain"):
        raise ValueError("a draft trained from scratch starts with pretrain; one started from a checkpoint does not")
    source, after = (None, None) if start is None else start
    results: dict[str, dict[str, object]] = {}
    for phase, share in phases:
        budget = seconds * share
        out_dir = layout.checkpoint(domain, phase)
        inputs = {**common, "phase": phase, "after": after, "budget": budget}
        step = ledger.run(f"{name}-{phase}", inputs,
                          functools.partial(work[phase], budget, source, out_dir),
                          outputs=[out_dir / "model.safetensors"])
        ran |= not step.skipped
        results[phase] = step.result
        source, after = out_dir, step.key
    final_key = after
    if not export:
        return _DraftOutcome(ran=ran, key=final_key, phases=results, texts=tuple(mix))

    # export: the draft folder the catalogue names
    dest = layout.draft(domain)

    def export_draft() -> dict[str, object]:
        return _export_draft(source, dest, target, name, token_map, settings.export_dtype(target))

    export_key = {"after": final_key, **({"save_dtype": settings.save_dtype} if settings.save_dtype else {})}
    step = ledger.run(f"{name}-export", export_key, export_draft,
                      outputs=[dest / "model.safetensors", dest / "config.json",
                               *([dest / TOKEN_MAP_FILE] if token_map is not None else [])])
    ran |= not step.skipped
    results["export"] = step.result
    return _DraftOutcome(ran=ran, key=final_key, phases=results, texts=tuple(mix))


def _export_draft(checkpoint: Path, dest: Path, target: TargetInfo, name: str,
                  token_map: TokenMap | None = None, dtype: str = "float32") -> dict[str, object]:
    """Write the draft folder (weights, config, the target's tokenizer files, a subset draft's
    token map) and check it fits."""
    from memspec_ros.core.model_loading import load_config, load_tokenizer
    from memspec_ros.runtime.catalogue_file import DraftEntry
    from memspec_ros.runtime.model_set_checks import check_draft

    if dest.exists():
        shutil.rmtree(dest)
    model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    if dtype != "float32":  # the node loads it in its own dtype
        model = model.to(getattr(torch, dtype))
    model.save_pretrained(dest, safe_serialization=True)
    for f in tokenizer_files(target.path):
        shutil.copy2(f, dest / f.name)
    target_tok = load_tokenizer(target.path)
    pin_tokenizer_class(dest, type(target_tok).__name__)
    if token_map is not None:
        token_map.save(dest)
    check_draft(target_tok, load_config(target.path), DraftEntry(name=name, path=dest, domain=""))
    params = sum(p.numel() for p in model.parameters())
    size = (dest / "model.safetensors").stat().st_size
    print(f"[export] {name}: {params / 1e6:.2f} M parameters, {size / 1e6:.1f} MB -> {dest}", flush=True)
    return {"parameters": params, "bytes": size}


def _write_drafts_report(layout: OutputLayout, settings: DraftSettings, shapes: Mapping[str, Shape],
                         seconds: Mapping[str, float], outcomes: Mapping[str, _DraftOutcome],
                         base: tuple[Shape, float, _DraftOutcome] | None = None,
                         general_corpus: Corpus | None = None) -> None:
    """Write ``reports/drafts.json``: the recipe (every setting, the seed included) and what each
    phase of each draft reached (and of the base draft the specialists grew from, if any). Draft
    quality varies between seeds of one recipe (docs/own_models.md), so a report of margins is only
    comparable with the settings that produced it beside it."""
    report: dict[str, object] = {
        "settings": {**asdict(settings), "general_units": settings.effective_general_units,
                     **({"base_units": settings.base_units} if base else {}),
                     "general_corpus": str(general_corpus.source) if general_corpus else "all domains"},
        "drafts": {draft_name(d): {"shape": asdict(shapes[d]), "budget_s": round(seconds[d], 1),
                                   "texts": list(outcome.texts), "phases": outcome.phases}
                   for d, outcome in outcomes.items()},
    }
    if base is not None:
        shape, budget, outcome = base
        report["base"] = {"shape": asdict(shape), "budget_s": round(budget, 1), "texts": list(outcome.texts),
                          "phases": outcome.phases, "shipped": False}
    layout.reports.mkdir(parents=True, exist_ok=True)
    (layout.reports / "drafts.json").write_text(json.dumps(report, indent=1, default=str) + "\n")


def _write_catalogue(layout: OutputLayout, target: TargetInfo, corpora: list[Corpus], trained: list[str],
                     general_corpus: Corpus | None = None) -> None:
    """Write ``catalogue.yaml``; keep an existing predictor only if no draft changed since."""
    from memspec_ros.runtime.catalogue_file import (
        CatalogueFileError,
        DraftEntry,
        load_catalogue_file,
        write_catalogue_file,
    )

    entries = [DraftEntry(name=draft_name(c.domain), path=layout.draft(c.domain), domain=c.domain,
                          description=f"distilled from {target.path.name} on {c.source.name}") for c in corpora]
    entries.append(DraftEntry(name=draft_name(GENERAL), path=layout.draft(GENERAL), domain=GENERAL,
                              description=f"distilled from {target.path.name} on "
                                          + (general_corpus.source.name if general_corpus else "all corpora")))
    predictor = validation = None
    if layout.predictor.exists() and layout.catalogue.exists() and not trained:
        try:
            previous = load_catalogue_file(layout.catalogue)
        except CatalogueFileError:
            previous = None
        if previous is not None and previous.predictor is not None and \
                previous.draft_names == [e.name for e in entries]:
            predictor, validation = layout.predictor, previous.predictor_validation
    if layout.predictor.exists() and predictor is None:
        print("[drafts] the drafts changed: the catalogue names no predictor until `memspec_build predictor` "
              "retrains it", flush=True)
    write_catalogue_file(layout.catalogue, target=layout.target, drafts=entries, predictor=predictor,
                         predictor_validation=validation, header="Written by memspec_build; format: docs/catalogue.md.")
    print(f"[drafts] catalogue {layout.catalogue}", flush=True)
