"""Evaluate the exported zoo: acceptance matrix, greedy samples, step timing -> docs.

Everything is measured on the committed artefacts (bf16 on disk, loaded as fp32), i.e.
exactly what the runtime will load. Writes ``models/zoo/acceptance_matrix.json`` and
regenerates ``docs/zoo.md``.
"""
from __future__ import annotations

import json
import os
import time

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, PreTrainedModel

from memspec_ros.builder.evaluation import acceptance_rate, greedy_continuation, match_vector
from training.data import token_stream
from training.members import DRAFT_NAMES
from training.paths import CHECKPOINT_DIR, DOMAINS, HELDOUT_DIR, ZOO_DIR
from training.report import LOOP_RATIO, PHASES, write_report
from training.timing import step_ms
from training.tokenizer import load_tokenizer

K = 4
NEW_TOKENS = 64
PROMPT_LIMIT = int(os.environ.get("ZOO_EVAL_PROMPTS", "0"))
"""Prompts per domain to use; 0 = all (smoke runs set a small number)."""


def load(path: object) -> PreTrainedModel:
    """Load a model dir the way the runtime does (fp32, no remote code)."""
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                trust_remote_code=False).eval()


def distinct_ngram_ratio(tokens: list[int], n: int = 4) -> float:
    """Distinct n-grams / all n-grams: near 1 for fresh text, low for loops."""
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


@torch.inference_mode()
def heldout_loss(model: PreTrainedModel, tok: object, windows: int = 40, length: int = 256) -> dict[str, float]:
    """Mean next-token loss (nats) on the first ``windows`` x ``length`` held-out tokens per domain."""
    out = {}
    for d in DOMAINS:
        ids = torch.as_tensor(token_stream(d, tok, "heldout")[:windows * length]).long()
        ids = ids[: len(ids) // length * length].view(-1, length)
        logits = model(input_ids=ids).logits[:, :-1].float()
        out[d] = round(float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))), 3)
    return out


def _matrix(models: dict[str, PreTrainedModel],
            traces: dict[str, list[tuple[list[int], list[int]]]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, model in models.items():
        out[name] = {d: round(acceptance_rate([match_vector(model, p, c) for p, c in traces[d]],
                                              K), 4) for d in DOMAINS}
        print(f"[evaluate] {name}: {out[name]}", flush=True)
    return out


def evaluate_zoo() -> dict[str, object]:
    """Run all measurements and write the JSON matrix and docs/zoo.md."""
    torch.set_num_threads(2)
    tok = load_tokenizer(ZOO_DIR / "target")
    target = load(ZOO_DIR / "target")
    drafts = {f"draft-{n}": load(ZOO_DIR / f"draft-{n}") for n in DRAFT_NAMES}
    prompts = [json.loads(line) for line in (HELDOUT_DIR / "prompts.jsonl").open()]
    if PROMPT_LIMIT:
        prompts = [p for d in DOMAINS for p in [q for q in prompts if q["domain"] == d]
                   [:PROMPT_LIMIT]]

    t0 = time.time()
    traces: dict[str, list[tuple[list[int], list[int]]]] = {d: [] for d in DOMAINS}
    samples: dict[str, list[dict[str, object]]] = {d: [] for d in DOMAINS}
    for row in prompts:
        ids = tok(row["prompt"], add_special_tokens=False)["input_ids"]
        cont = greedy_continuation(target, ids, NEW_TOKENS, tok.eos_token_id)
        traces[row["domain"]].append((ids, cont))
        samples[row["domain"]].append({
            "prompt": row["prompt"], "continuation": tok.decode(cont),
            "distinct4": round(distinct_ngram_ratio(cont), 3), "tokens": len(cont)})
    gen_s = time.time() - t0
    print(f"[evaluate] target greedy traces: {gen_s:.0f} s", flush=True)

    matrix = _matrix(drafts, traces)
    plain = {f"draft-{n}": load(CHECKPOINT_DIR / f"draft-{n}") for n in DRAFT_NAMES
             if (CHECKPOINT_DIR / f"draft-{n}" / "model.safetensors").exists()}
    plain_matrix = _matrix(plain, traces) if plain else {}

    margins = {}
    for d in DOMAINS:
        own = matrix[f"draft-{d}"][d]
        best_other = max(v[d] for n, v in matrix.items() if n != f"draft-{d}")
        margins[d] = round(own - best_other, 4)

    losses = {"target": heldout_loss(target, tok)}
    for key, checkpoint in PHASES[:-1]:  # the earlier training runs of the target
        if (CHECKPOINT_DIR / checkpoint / "model.safetensors").exists():  # for comparison
            losses[key] = heldout_loss(load(CHECKPOINT_DIR / checkpoint), tok)
    print(f"[evaluate] held-out loss: {losses}", flush=True)

    timing = {"target_1tok_ms": step_ms(target, 1), "target_verify5_ms": step_ms(target, 5)}
    for name, model in drafts.items():
        timing[f"{name}_1tok_ms"] = step_ms(model, 1)
    worst_draft = max(v for k, v in timing.items() if k.startswith("draft-"))
    timing = {k: round(v, 3) for k, v in timing.items()}
    timing["verify5_over_slowest_draft_step"] = round(timing["target_verify5_ms"] / worst_draft, 2)

    result: dict[str, object] = {
        "k": K, "new_tokens": NEW_TOKENS, "domains": list(DOMAINS),
        "definition": "greedy speculative rounds of k=4 simulated exactly from match vectors "
                      "(training/acceptance.py): rate = accepted / proposed draft tokens, pooled "
                      "over the target's greedy continuations of the held-out prompts",
        "prompts_per_domain": {d: len(traces[d]) for d in DOMAINS},
        "matrix": matrix, "plain_matrix": plain_matrix, "diagonal_margin": margins,
        "target_heldout_loss": losses,
        "target_repetition": {d: {"prompts": len(samples[d]),
                                  "mean_distinct4": round(sum(x["distinct4"] for x in samples[d])
                                                          / max(1, len(samples[d])), 3),
                                  "loops": sum(x["distinct4"] < LOOP_RATIO for x in samples[d]),
                                  "mean_tokens": round(sum(x["tokens"] for x in samples[d])
                                                       / max(1, len(samples[d])), 1),
                                  "ended_at_once": sum(x["tokens"] == 0 for x in samples[d])}
                              for d in DOMAINS},
        "timing_ms": timing, "target_trace_seconds": round(gen_s, 1),
    }
    (ZOO_DIR / "acceptance_matrix.json").write_text(json.dumps(result, indent=2) + "\n")
    write_report(result, samples)
    return result
