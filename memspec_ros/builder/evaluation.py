"""``memspec_build evaluate``: is each draft worth serving? Acceptance, step times, verdicts.

Acceptance is measured exactly and cheaply with the greedy identity
(:mod:`memspec_ros.core.greedy_match`): the target continues each held-out prompt greedily
once, each draft runs one teacher-forced pass over prompt + continuation, and
``match[t] = draft argmax == target token`` fixes every speculative round of k. The rate is
accepted / proposed draft tokens, pooled over a domain's prompts. Prompts come from
``<out>/heldout/prompts.jsonl``, cut by ``drafts`` from held-out documents only: text no draft
or predictor was trained on.

Verdicts, per draft, from the acceptance on its own domain and the measured step times:

* ``slower than target-only``: the estimated speed-up on its domain (or over all domains for
  ``general``) is below 1: its rounds cost more than the tokens they save;
* ``no better than the general draft``: on its own domain it accepts no more than the general
  draft does, so it is not worth a slot in memory;
* ``useful`` otherwise.

Below the table, the report says what to do about the drafts that need it (:func:`advice`):
one that is slower or no better is better left out or rebuilt; a specialist within
:data:`CLOSE_TO_GENERAL` of the general draft on its own domain makes which specialist is
resident matter little, and the small-fallback recipe is worth a comparison build.

The speed-up estimate is the round arithmetic of the traces: a round of ``p`` proposals costs
``p`` draft steps and one (k+1)-token verification and emits ``accepted + 1`` tokens, against
one target step per token without speculation (draft catch-up after switches is not counted).
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import DynamicCache, PreTrainedModel

from memspec_ros.builder.disk_space import require_free_space
from memspec_ros.builder.errors import BuildError
from memspec_ros.builder.layout import GENERAL, OutputLayout
from memspec_ros.builder.predictor_step import BuildInputs, read_build
from memspec_ros.builder.progress import count_bar
from memspec_ros.builder.steps import StepLedger
from memspec_ros.core.greedy_match import greedy_rounds
from memspec_ros.core.token_map import TokenMap, draft_inputs, draft_top_tokens

GENERAL_MARGIN = 0.0
"""A specialist must beat the general draft on its own domain by more than this."""
USEFUL = "useful"
NO_BETTER = "no better than the general draft"
SLOWER = "slower than target-only"
CLOSE_TO_GENERAL = 0.10
"""A useful specialist leading the general draft by less than this on its domain gets advice."""
RECIPE_DOC = "docs/own_models.md, 'Which recipe'"


@torch.inference_mode()
def greedy_continuation(model: PreTrainedModel, ids: list[int], n_new: int, eos_id: int) -> list[int]:
    """Target-only greedy decoding with a KV cache; stops at EOS (not included)."""
    cache = DynamicCache(config=model.config)
    logits = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True).logits
    out: list[int] = []
    for _ in range(n_new):
        nxt = int(logits[0, -1].argmax())
        if nxt == eos_id:
            break
        out.append(nxt)
        logits = model(input_ids=torch.tensor([[nxt]]), cache=cache, use_cache=True).logits
    return out


@torch.inference_mode()
def match_vector(model: PreTrainedModel, prompt: list[int], cont: list[int],
                 token_map: TokenMap | None = None) -> list[bool]:
    """Teacher-forced draft argmax over ``prompt + cont`` compared with ``cont`` (``token_map``:
    the draft's, if it is a subset draft)."""
    if not cont:
        return []
    logits = model(input_ids=draft_inputs(torch.tensor([prompt + cont]), token_map)).logits[0]
    preds = draft_top_tokens(logits[len(prompt) - 1:len(prompt) + len(cont) - 1], token_map).tolist()
    return [p == c for p, c in zip(preds, cont, strict=True)]


def pooled_rounds(matches: Sequence[Sequence[bool]], k: int) -> tuple[int, int, int]:
    """``(accepted, proposed, rounds)`` of greedy rounds summed over sequences."""
    acc = prop = rounds = 0
    for m in matches:
        a, p, r = greedy_rounds(m, k)
        acc, prop, rounds = acc + a, prop + p, rounds + r
    return acc, prop, rounds


def acceptance_rate(matches: Sequence[Sequence[bool]], k: int = 4) -> float:
    """Pooled acceptance rate ``sum(accepted) / sum(proposed)`` over sequences."""
    acc, prop, _ = pooled_rounds(matches, k)
    return acc / prop if prop else 0.0


def estimated_speedup(accepted: float, proposed: int, rounds: int, draft_ms: float, verify_ms: float,
                      target_ms: float) -> float:
    """Target-only time / speculative time for the same tokens (see the module docstring)."""
    if rounds == 0:
        return 0.0
    tokens = accepted + rounds
    speculative = proposed * draft_ms + rounds * verify_ms
    return tokens * target_ms / speculative


def verdict(speedup: float, own_acceptance: float, general_acceptance: float | None) -> str:
    """A draft's verdict (module docstring); ``general_acceptance``: the general draft's on the
    same domain, ``None`` for the general draft itself."""
    if speedup < 1.0:
        return SLOWER
    if general_acceptance is not None and own_acceptance <= general_acceptance + GENERAL_MARGIN:
        return NO_BETTER
    return USEFUL


MAX_REPORTED_K = 8
"""Rounds are reported for every k up to this (``own_rounds_by_k``): the node's automatic k
chooses among them."""


@dataclass(frozen=True)
class EvaluationSettings:
    time_budget_s: float = 600.0
    """Seconds for the target's greedy continuations (at least one prompt per domain)."""
    prompts_per_domain: int = 24
    max_new_tokens: int = 64
    k: int = 4
    prompts_file: str | None = None
    """Your own held-out prompts (``{"domain", "prompt"}`` or ``{"domain", "messages"}`` rows) instead
    of ``heldout/prompts.jsonl``."""


def run_evaluate(out: Path, settings: EvaluationSettings, *, force: bool = False) -> dict[str, object]:
    """Measure the catalogue in ``out``; write ``reports/evaluation.{json,md}``; return the report."""
    from memspec_ros.builder.machine_load import warn_if_busy
    from memspec_ros.runtime.catalogue import zoo_fingerprint

    warn_if_busy("evaluate")
    layout = OutputLayout(out)
    built = read_build(layout)
    catalogue = built.catalogue
    prompts_file = Path(settings.prompts_file) if settings.prompts_file else layout.heldout_prompts
    if settings.prompts_file and not prompts_file.is_file():
        raise BuildError(f"--prompts {prompts_file} does not exist")
    heldout = [layout.heldout(d) for d in built.domains] + [prompts_file]
    missing = [str(p) for p in heldout if not p.exists()]
    if missing:
        raise BuildError(f"held-out text {missing} is missing: rerun `memspec_build drafts --out {out} ...`")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in heldout)).hexdigest()[:16]
    inputs = {"models": zoo_fingerprint([catalogue.target, *(d.path for d in catalogue.drafts)]),
              "drafts": catalogue.draft_names, "heldout": digest, "settings": asdict(settings)}
    ledger = StepLedger(layout.stamps, force=force)
    require_free_space(out, 4 << 20, "the evaluation reports")
    outcome = ledger.run("evaluate", inputs, lambda: _evaluate(layout, built, settings, prompts_file),
                         outputs=[layout.reports / "evaluation.json", layout.reports / "evaluation.md"])
    print((layout.reports / "evaluation.md").read_text(), flush=True)
    return outcome.result


def evaluation_prompts(path: Path, domains: list[str], tok) -> dict[str, list[str]]:
    """Per domain, the texts the target continues: a row's ``prompt``, or its ``messages`` rendered
    with the target's chat template up to the answer. :class:`BuildError` for a row it cannot use."""
    from memspec_ros.builder.chat_rendering import chat_renderers
    from memspec_ros.builder.corpora import parse_chat_messages

    renderers = chat_renderers(tok)
    out: dict[str, list[str]] = {d: [] for d in domains}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BuildError(f"{path} line {number} is not JSON ({exc.msg})") from None
        domain = row.get("domain") if isinstance(row, dict) else None
        if domain not in out:
            raise BuildError(f"{path} line {number}: domain {domain!r} is not one of this build's domains "
                             f"{domains}")
        if isinstance(row.get("prompt"), str) and row["prompt"]:
            out[domain].append(row["prompt"])
        elif "messages" in row:
            if renderers is None:
                raise BuildError(f"{path} line {number} has messages but the target has no chat template")
            out[domain].append(renderers[1](parse_chat_messages(row["messages"], f"{path} line {number}",
                                                                need_answer=False)))
        else:
            raise BuildError(f"{path} line {number} needs a prompt (text) or messages (a conversation)")
    return out


def _evaluate(layout: OutputLayout, built: BuildInputs, settings: EvaluationSettings, prompts_file: Path
              ) -> dict[str, object]:
    from memspec_ros.builder.step_timing import interleaved_step_ms
    from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
    from memspec_ros.core.token_map import load_token_map

    catalogue = built.catalogue
    tok = load_tokenizer(catalogue.target)
    target = load_causal_lm(catalogue.target)
    drafts = {d.name: load_causal_lm(d.path) for d in catalogue.drafts}
    token_maps = {d.name: load_token_map(d.path) for d in catalogue.drafts}
    domains_of = catalogue.domains
    eos = tok.eos_token_id

    cut = evaluation_prompts(prompts_file, list(built.domains), tok)  # by default cut from held-out documents
    prompts = {d: cut.get(d, [])[: settings.prompts_per_domain] for d in built.domains}
    traces: dict[str, list[tuple[list[int], list[int]]]] = {d: [] for d in built.domains}
    t0 = time.monotonic()
    total = sum(map(len, prompts.values()))
    bar = count_bar(total, "held-out continuations", "prompt")
    for i in range(max(map(len, prompts.values()), default=0)):  # round-robin: a budget cut spares no domain
        if i and time.monotonic() - t0 > settings.time_budget_s:
            print(f"[evaluate] time budget spent after {i} prompt(s) per domain", flush=True)
            break
        for d in built.domains:
            if i < len(prompts[d]):
                ids = tok(prompts[d][i], add_special_tokens=False)["input_ids"]
                traces[d].append((ids, greedy_continuation(target, ids, settings.max_new_tokens, eos)))
                bar.update()
    bar.close()
    trace_seconds = time.monotonic() - t0

    rounds: dict[str, dict[str, tuple[int, int, int]]] = {}
    own_rounds_by_k: dict[str, dict[str, list[int]]] = {}
    for name, model in drafts.items():
        matches = {d: [match_vector(model, p, c, token_maps[name]) for p, c in traces[d]] for d in built.domains}
        rounds[name] = {d: pooled_rounds(matches[d], settings.k) for d in built.domains}
        own = [domains_of[name]] if domains_of[name] in built.domains else list(built.domains)
        own_rounds_by_k[name] = {str(k): list(pooled_rounds([m for d in own for m in matches[d]], k))
                                 for k in range(1, MAX_REPORTED_K + 1)}
    matrix = {n: {d: round(a / p, 4) if p else 0.0 for d, (a, p, _) in row.items()} for n, row in rounds.items()}

    # timed in rounds, interleaved: the verdicts rest on ratios that one slow spell of the machine would skew
    target_step, target_verify, draft_ms = interleaved_step_ms(target, drafts, settings.k)
    timing = {"target_step_ms": target_step, "target_verify_ms": target_verify}

    general = next((n for n, d in domains_of.items() if d == GENERAL), None)
    verdicts: dict[str, dict[str, object]] = {}
    for name, domain in domains_of.items():
        own = [domain] if domain in built.domains else list(built.domains)
        a, p, r = (sum(rounds[name][d][i] for d in own) for i in range(3))
        speedup = estimated_speedup(a, p, r, draft_ms[name], timing["target_verify_ms"], timing["target_step_ms"])
        config = drafts[name].config
        entry: dict[str, object] = {"domain": domain, "shape": f"{config.hidden_size}x{config.num_hidden_layers}",
                                    "acceptance": round(a / p, 4) if p else 0.0,
                                    "estimated_speedup": round(speedup, 3), "step_ms": round(draft_ms[name], 4)}
        if domain in built.domains:
            others = [matrix[o][domain] for o in drafts if o != name]
            entry["margin"] = round(matrix[name][domain] - max(others), 4) if others else None
            specialists = [matrix[o][domain] for o in drafts if o not in (name, general)]
            entry["margin_over_domain_drafts"] = round(matrix[name][domain] - max(specialists), 4) \
                if specialists else None
            if general is not None:
                entry["margin_over_general"] = round(matrix[name][domain] - matrix[general][domain], 4)
        general_here = matrix[general][domain] if general not in (None, name) and domain in built.domains else None
        entry["verdict"] = verdict(speedup, matrix[name].get(domain, 0.0), general_here)
        verdicts[name] = entry
    report: dict[str, object] = {
        "k": settings.k, "max_new_tokens": settings.max_new_tokens, "domains": list(built.domains),
        "prompts_per_domain": {d: len(traces[d]) for d in built.domains},
        "prompts": _shown_path(prompts_file, layout.root),
        "definition": "greedy rounds of k simulated exactly from match vectors: acceptance = accepted / proposed "
                      "draft tokens, pooled over the target's greedy continuations of held-out prompts",
        "matrix": matrix, "timing_ms": {k: round(v, 4) for k, v in timing.items()},
        "draft_step_ms": {n: round(v, 4) for n, v in draft_ms.items()},
        "drafts": verdicts, "trace_seconds": round(trace_seconds, 1),
        "own_rounds_by_k": own_rounds_by_k,
        "own_rounds_definition": "per draft, [accepted, proposed, rounds] of greedy rounds of each k on its own "
                                 "domain's continuations (the general draft: all domains); the node's "
                                 "num_speculative_tokens: 0 (auto) weighs them against this machine's timings",
    }
    layout.reports.mkdir(parents=True, exist_ok=True)
    (layout.reports / "evaluation.json").write_text(json.dumps(report, indent=1) + "\n")
    (layout.reports / "evaluation.md").write_text(render_markdown(report))
    return report


def advice(report: dict) -> list[str]:
    """What to do about the drafts whose verdict or margin calls for it: one line per draft.

    Why: a verdict alone leaves a user to work out the remedy; the remedies are known from the
    worked examples (docs/own_models.md) and differ by cause. One order of precedence, the one
    docs/build.md documents: each draft gets the remedy of the first cause that applies:

    1. it agrees with the target too rarely for even a free draft to pay: train longer, more text;
    2. it is slower than target-only: a smaller ``--draft-shape`` (unless it is the smallest
       shape sizing measures: then train longer, or leave it out);
    3. it accepts no more than the general draft on its own domain: more text, longer, or leave it out;
    4. it leads the general draft by less than 0.10 on its own domain: compare a build with a
       small general fallback, or one whose general draft trains on text outside the domains
       (one line for all such drafts).
    """
    from memspec_ros.builder.draft_sizing import CANDIDATES

    smallest = CANDIDATES[-1]
    lines, close = [], []
    for name, e in report["drafts"].items():
        domain = "all domains" if e["domain"] == GENERAL else e["domain"]
        over_general = e.get("margin_over_general")
        if e["verdict"] == SLOWER and not _a_free_draft_would_pay(report, e["acceptance"]):
            lines.append(f"{name}: (1) it agrees with the target too rarely to pay on {domain} (acceptance "
                         f"{e['acceptance']:.3f}): even a draft that cost nothing would be slower than "
                         "target-only, so a smaller `--draft-shape` cannot help. Train longer "
                         "(`--time-budget-s`; `reports/drafts.json` has the steps each phase made: a large "
                         "vocabulary makes every step slow) or give it more text; if every draft is near "
                         "0, check that the target itself writes sensible text on your corpora.")
        elif e["verdict"] == SLOWER and e.get("shape") == f"{smallest.hidden}x{smallest.layers}":
            lines.append(f"{name}: (2) its rounds cost more than the tokens they save on {domain}, and it already "
                         f"has the smallest shape sizing measures ({smallest.label}): no smaller draft will pay "
                         "either. Train longer (`--time-budget-s`) or give it more text, check that the machine "
                         "was quiet (`reports/sizing.json`: `unstable`), or leave it out of catalogue.yaml and "
                         "rerun `memspec_build predictor`.")
        elif e["verdict"] == SLOWER:
            lines.append(f"{name}: (2) its rounds cost more than the tokens they save on {domain}; rebuild the "
                         "drafts with a smaller `--draft-shape` (halve the hidden size, at least "
                         f"{smallest.hidden}x{smallest.layers}; or the `--threads` the node will use), or leave it "
                         "out of catalogue.yaml and rerun `memspec_build predictor`.")
        elif e["verdict"] == NO_BETTER:
            lines.append(f"{name}: (3) the general draft accepts as much on {domain}; give the domain more text or "
                         "a longer `--time-budget-s`, or leave it out of catalogue.yaml and rerun "
                         "`memspec_build predictor`.")
        elif over_general is not None and over_general < CLOSE_TO_GENERAL:
            close.append(f"{name} ({over_general:+.3f} on {domain})")
    if close:
        lines.append(", ".join(close) + f": (4) within {CLOSE_TO_GENERAL:.2f} of the general draft on "
                     "its own domain, where which draft is resident then matters little. If a domain has "
                     "under about 1 M characters of text, give it more first; if your robot's text stays "
                     "in your domains, compare a build with a small general fallback "
                     "(`--specialists-from scratch --general-share 0.5 --draft-shape HxL --draft-shape "
                     "general=HxL`: the general draft about half the size, trained for half a domain draft's "
                     f"time; {RECIPE_DOC}), or one whose general draft learns what users ask outside your "
                     "domains instead of every domain (`--general-corpus PATH`; docs/build.md).")
    return lines


def _a_free_draft_would_pay(report: dict, acceptance: float) -> bool:
    """Whether rounds at this acceptance beat target-only if proposing cost nothing.

    Why: a draft slower than target-only is usually too big for the machine, but one that
    almost never agrees with the target (an undertrained draft, a large vocabulary's few steps)
    is slow at any size, and shrinking it would only make it agree less.
    """
    timing, k = report["timing_ms"], report["k"]
    return estimated_speedup(k * acceptance, k, 1, 0.0, timing["target_verify_ms"], timing["target_step_ms"]) > 1.0


def _shown_path(path: Path, root: Path) -> str:
    """``path`` relative to the output folder when inside it (a report stays valid when the folder moves)."""
    path, root = path.resolve(), root.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def render_markdown(report: dict) -> str:
    """The evaluation report for people (the JSON beside it has the same numbers)."""
    domains = report["domains"]
    lines = ["# Draft evaluation (`memspec_build evaluate`)", "",
             f"Acceptance (k={report['k']}, greedy, held-out prompts"
             + (f" from `{report['prompts']}`" if report.get("prompts") else "") + ": "
             + ", ".join(f"{d} {n}" for d, n in report["prompts_per_domain"].items()) + "). "
             + report["definition"] + ".", "",
             "| draft \\ domain | " + " | ".join(domains) + " |", "|---|" + "---|" * len(domains)]
    for name, row in report["matrix"].items():
        own = report["drafts"][name]["domain"]
        cells = [f"**{row[d]:.3f}**" if d == own else f"{row[d]:.3f}" for d in domains]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    t = report["timing_ms"]
    lines += ["", f"Target: {t['target_step_ms']:.3f} ms per 1-token step, {t['target_verify_ms']:.3f} ms per "
              f"{report['k'] + 1}-token verification.", "",
              "| draft | domain | own-domain acceptance | margin over best other | over other domain drafts | "
              "over general | step ms | est. speed-up | verdict |",
              "|---|---|---|---|---|---|---|---|---|"]

    def signed(value: float | None) -> str:
        return "" if value is None else f"{value:+.3f}"

    for name, e in report["drafts"].items():
        margins = " | ".join(signed(e.get(key)) for key in ("margin", "margin_over_domain_drafts",
                                                              "margin_over_general"))
        lines.append(f"| {name} | {e['domain']} | {e['acceptance']:.3f} | {margins} | {e['step_ms']:.3f} | "
                     f"{e['estimated_speedup']:.2f}x | {e['verdict']} |")
    todo = advice(report)
    if todo:
        lines += ["", "What to do:", "", *(f"- {line}" for line in todo)]
    return "\n".join(lines) + "\n"
