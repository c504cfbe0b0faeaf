"""How far apart the target's logits land when the same positions are scored in different batchings.

Greedy speculative decoding scores a round's positions in one verification block; plain decoding
scores one position per step; the benchmark's trace scores a whole context at once. In exact
arithmetic these agree. In low precision they do not, and what matters for a greedy output is how
much the *margin* between two candidate tokens moves: by more than a margin, and the two batchings
pick different tokens. This measures that movement for the top-5 tokens at every position of
greedy continuations of held-out prompts, one-token steps against blocks of five and against one
whole-context forward, and prints it in logits and in representable steps at the logits'
magnitude. ``memspec_ros.core.greedy_ties.TIE_STEPS`` is set from it.

    python -m bench.tie_noise                      # the default model set in bfloat16
    python -m bench.tie_noise --dtype float32 --prompts 4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from memspec_ros.bundled_models import default_model_set_root
from memspec_ros.core.greedy_ties import resolution
from memspec_ros.core.model_loading import configure_threads, load_causal_lm, load_tokenizer
from memspec_ros.core.scorer import TargetScorer

TOP = 5
BLOCK = 5


@torch.inference_mode()
def margin_shifts(model, prompt_ids: list[int], new_tokens: int) -> list[tuple[float, float]]:
    """``(|shift| in logits, in steps)`` of every top-5 pair margin at each greedy position."""
    step = TargetScorer(model)
    step.prefill(prompt_ids[:-1])
    out, step_rows = [prompt_ids[-1]], []
    for _ in range(new_tokens):
        row = step.score([out[-1]]).logits[0]
        step_rows.append(row)
        out.append(int(row.argmax()))
    generated = out[1:]
    block = TargetScorer(model)
    block.prefill(prompt_ids[:-1])
    feed = [prompt_ids[-1], *generated[:-1]]
    block_rows = [r for i in range(0, len(feed), BLOCK) for r in block.score(feed[i:i + BLOCK]).logits]
    whole = model(input_ids=torch.tensor([prompt_ids + generated[:-1]])).logits[0, len(prompt_ids) - 1:].float()
    dtype = next(model.parameters()).dtype
    shifts = []
    for p, ref in enumerate(step_rows):
        top = ref.topk(TOP).indices.tolist()
        for other in (block_rows[p], whole[p]):
            for i in range(TOP):
                for j in range(i + 1, TOP):
                    a, b = top[i], top[j]
                    shift = abs(float((ref[a] - ref[b]) - (other[a] - other[b])))
                    step = resolution(max(abs(float(ref[a])), abs(float(ref[b]))), dtype)
                    shifts.append((shift, shift / step))
    return shifts


def main(argv: list[str] | None = None) -> int:
    root = default_model_set_root()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", type=Path, default=root / "target")
    ap.add_argument("--prompts-file", type=Path, default=root / "heldout" / "prompts.jsonl",
                    help="held-out prompts (jsonl with a 'prompt' field), spread evenly")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--new-tokens", type=int, default=40)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    configure_threads(args.threads)
    model = load_causal_lm(args.target, dtype=getattr(torch, args.dtype))
    tokenizer = load_tokenizer(args.target)
    rows = [json.loads(line) for line in args.prompts_file.read_text().splitlines() if line.strip()]
    picked = rows[::max(1, len(rows) // args.prompts)][:args.prompts]
    shifts = []
    for row in picked:
        shifts += margin_shifts(model, tokenizer(row["prompt"], add_special_tokens=False).input_ids, args.new_tokens)
    logits = sorted(s for s, _ in shifts)

    def q(f: float) -> float:
        return logits[int(f * (len(logits) - 1))]

    print(f"{args.target} in {args.dtype}, {args.threads} thread(s): {len(shifts)} token pairs at "
          f"{len(picked) * args.new_tokens} positions; margin shift between batchings (logits): median {q(0.5):.4g}, "
          f"p99 {q(0.99):.4g}, p99.9 {q(0.999):.4g}, max {logits[-1]:.4g}; "
          f"max {max(st for _, st in shifts):.1f} representable steps at the logits' magnitude")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
