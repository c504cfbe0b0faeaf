"""Export the trained target into the bundled zoo and record its greedy quality.

The target is the one zoo member trained here; ``memspec_build`` then builds the drafts and
the predictor for it (``make zoo``). Writes, under ``models/zoo``:

* ``target/``: a self-contained Hugging Face folder (bf16 safetensors, loaded as fp32 by the
  runtime; the tokenizer with the robot dialogue's chat template);
* ``reports/target.json``: held-out loss per domain and the repetition check of its greedy
  continuations. The check's prompts are cut from the *target's* held-out documents (the
  corpora stage's split), text the target never trained on, and are stored in the report so
  that ``test/core/test_zoo.py`` re-checks the shipped weights against the recorded counts.
"""
from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from transformers import LlamaForCausalLM, PreTrainedModel

from memspec_ros.builder.corpora import read_jsonl
from memspec_ros.builder.evaluation import greedy_continuation
from memspec_ros.builder.prompts import MAX_DOC_CHARS as MAX_PROMPT_DOC_CHARS
from memspec_ros.builder.prompts import make_prompts
from training.corpora.build import corpus_path
from training.data import token_stream
from training.members import TARGET_CHECKPOINT
from training.paths import CHECKPOINT_DIR, DOMAINS, ZOO_DIR
from training.tokenizer import CHAT_TEMPLATE, load_tokenizer

LOOP_RATIO = 0.5
"""A continuation whose distinct-4-gram ratio is below this loops (real 64-token held-out
windows have a median ratio of 0.95-1.0)."""
NEW_TOKENS = 64
HELDOUT_DOC_BUDGET = 140_000
"""Characters of held-out documents per domain the prompts are cut from."""


def distinct_ngram_ratio(tokens: list[int], n: int = 4) -> float:
    """Distinct n-grams / all n-grams: near 1 for fresh text, low for loops."""
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def export_target() -> None:
    """Write ``models/zoo/target`` (bf16) from the last training checkpoint."""
    tok = load_tokenizer()
    tok.chat_template = CHAT_TEMPLATE  # the robot corpus's dialogue format, for goals that send messages
    model = LlamaForCausalLM.from_pretrained(CHECKPOINT_DIR / TARGET_CHECKPOINT, dtype=torch.float32)
    out = ZOO_DIR / "target"
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    print(f"[export] target: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params -> {out}", flush=True)


def quality_prompts(domain: str) -> list[str]:
    """Prompts cut from the first ``HELDOUT_DOC_BUDGET`` characters of the target's held-out documents."""
    kept, budget = [], HELDOUT_DOC_BUDGET
    for doc in read_jsonl(corpus_path(domain, "heldout")):
        doc = doc[:MAX_PROMPT_DOC_CHARS]
        if budget < len(doc):
            break
        kept.append(doc)
        budget -= len(doc)
    return make_prompts(kept)


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


def write_target_report(checkpoint_sha256: str | None = None) -> dict[str, object]:
    """Measure the exported target (as the runtime loads it) and write ``reports/target.json``.

    ``checkpoint_sha256`` (of the training checkpoint it was exported from) is recorded so that
    ``make zoo`` re-exports only when another target was trained.
    """
    tok = load_tokenizer(ZOO_DIR / "target")
    model = LlamaForCausalLM.from_pretrained(ZOO_DIR / "target", dtype=torch.float32).eval()
    repetition: dict[str, dict[str, object]] = {}
    for d in DOMAINS:
        prompts = quality_prompts(d)
        ratios, lengths = [], []
        for prompt in prompts:
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
            cont = greedy_continuation(model, ids, NEW_TOKENS, tok.eos_token_id)
            ratios.append(distinct_ngram_ratio(cont))
            lengths.append(len(cont))
        repetition[d] = {"prompts": prompts, "loops": sum(r < LOOP_RATIO for r in ratios),
                         "mean_distinct4": round(sum(ratios) / len(ratios), 3),
                         "mean_tokens": round(sum(lengths) / len(lengths), 1)}
        print(f"[target report] {d}: {repetition[d]['loops']} of {len(prompts)} continuations loop", flush=True)
    report = {"checkpoint_sha256": checkpoint_sha256,
              "new_tokens": NEW_TOKENS, "loop_ratio": LOOP_RATIO, "heldout_loss": heldout_loss(model, tok),
              "repetition": repetition}
    path = ZOO_DIR / "reports" / "target.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return report
