"""Train the worked example's target: a small GPT-2 with its own byte-level BPE tokenizer.

A robot team brings a target it already has; this script only makes one for the worked
example of ``docs/own_models.md``, so that the example's target shares nothing with the
bundled zoo: another architecture (GPT-2: learned positions, LayerNorm, GELU, fused QKV),
another tokenizer (8192 tokens, trained here) and other text (``make_corpora.py``'s
pretraining half). The result is a plain Hugging Face folder (``config.json``,
``model.safetensors``, tokenizer files), what ``memspec_build drafts --target`` expects.
``--arch qwen2 --tokenizer unigram`` makes a target of a second family with a second kind of
tokenizer (RoPE, RMSNorm, grouped-query attention; SentencePiece-style pieces and a ``<s>``
the tokenizer adds), to rehearse the workflow on something other than the worked example.

    python examples/own_models/train_target.py --data /tmp/own_models/pretraining \\
        --out /tmp/own_models/target --minutes 40
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

EOS = "<|endoftext|>"


def read_documents(folder: Path) -> dict[str, list[str]]:
    """``<domain>.jsonl`` files -> the documents of each domain."""
    return {p.stem: [json.loads(line)["text"] for line in p.open(encoding="utf-8")]
            for p in sorted(folder.glob("*.jsonl"))}


def train_unigram_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """SentencePiece-style unigram with a ``<s>`` prepended to every encoding, as Llama 2's does.

    A second kind of tokenizer for a second kind of target: ``▁`` word boundaries instead of
    byte-level pieces, a BOS token the tokenizer adds itself, and ``<unk>`` for characters the
    training text never had (no byte fallback), all of which the drafts and the node must handle.
    """
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                      unk_token="<unk>")
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=512)


def build_model(arch: str, tokenizer: PreTrainedTokenizerFast, hidden: int, layers: int) -> PreTrainedModel:
    """GPT-2 (learned positions, LayerNorm, GELU, tied head) or Qwen2 (RoPE, RMSNorm, grouped-query
    attention, SwiGLU, an untied head)."""
    heads = hidden // 64
    if arch == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(
            vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2), intermediate_size=(hidden * 8 // 3 + 63) // 64 * 64,
            max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False))
    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=hidden, n_layer=layers,
                                      n_head=heads, bos_token_id=tokenizer.eos_token_id,
                                      eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True))


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE (GPT-2's scheme, not its vocabulary): every byte sequence stays encodable."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=EOS,
                                   model_max_length=512)


def main(argv: list[str] | None = None) -> int:
    """Tokenizer, then next-token training on equally weighted domains for ``--steps`` or ``--minutes``."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="folder of <domain>.jsonl pretraining text")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--minutes", type=float, default=40.0)
    ap.add_argument("--steps", type=int, default=None,
                    help="train for exactly this many steps instead of --minutes: the same target on a busy "
                         "or a slow machine (the learning-rate schedule follows the steps)")
    ap.add_argument("--arch", choices=["gpt2", "qwen2"], default="gpt2",
                    help="the target's architecture (the worked example's is gpt2)")
    ap.add_argument("--tokenizer", choices=["bpe", "unigram"], default="bpe",
                    help="byte-level BPE (GPT-2's scheme) or a SentencePiece-style unigram that adds <s>")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 autocast (on the 2-core test machine it halved GPT-2's training speed: measure)")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    rng = random.Random(0)
    docs = read_documents(args.data)
    make_tokenizer = train_unigram_tokenizer if args.tokenizer == "unigram" else train_tokenizer
    tokenizer = make_tokenizer([t for texts in docs.values() for t in texts], args.vocab)
    streams = {}
    # each document as the node will send a prompt: with the <s> a unigram tokenizer adds
    opening = [tokenizer.bos_token_id] if args.tokenizer == "unigram" else []
    for domain, texts in docs.items():
        ids: list[int] = []
        for text in texts:
            ids += opening + tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] + [
                tokenizer.eos_token_id]
        streams[domain] = torch.tensor(ids)
        print(f"{domain}: {len(ids)} tokens ({sum(map(len, texts)) / len(ids):.2f} characters per token)",
              file=sys.stderr)
    model = build_model(args.arch, tokenizer, args.hidden, args.layers)
    print(f"{args.arch} target: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters",
          file=sys.stderr)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    deadline = time.monotonic() + args.minutes * 60
    start, step, tokens = time.monotonic(), 0, 0
    domains = sorted(d for d, ids in streams.items() if len(ids) > args.seq_len + 1)
    if not domains:
        raise SystemExit(f"no domain in {args.data} has more than {args.seq_len + 1} tokens")
    model.train()
    while (step < args.steps) if args.steps else ((now := time.monotonic()) < deadline):
        frac = step / args.steps if args.steps else (now - start) / (deadline - start)
        for group in opt.param_groups:  # warm-up, then cosine to 10% over the budget
            group["lr"] = args.lr * min(1.0, (step + 1) / 200) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        rows = []
        for _ in range(args.batch):
            stream = streams[rng.choice(domains)]
            at = rng.randrange(0, len(stream) - args.seq_len - 1)
            rows.append(stream[at:at + args.seq_len + 1])
        batch = torch.stack(rows)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(input_ids=batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += batch[:, :-1].numel()
        if step % 50 == 0:
            el = time.monotonic() - start
            print(f"step {step} loss {loss.item():.3f} {tokens / el:.0f} tok/s {el / 60:.1f} min", file=sys.stderr,
                  flush=True)
    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out}: {step} steps, {tokens / 1e6:.1f} M tokens", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
