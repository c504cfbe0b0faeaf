"""The SmolLM2 model set's corpora: robot users' questions answered by the target itself.

One conversation per line of ``<out>/<domain>.jsonl``, as chat messages (``{"messages": [...]}``,
which ``memspec_build`` renders with the target's chat template): the system prompt, a question
of the domain (:mod:`.prompts`) and the target's greedy answer, and in a quarter of them a
second question of the same domain with its answer, so the drafts also see a conversation's
later turns. Why the target's own answers: they are exactly the text the drafts must predict
when the node serves this target (the issue's "fair training text"), and no offline corpus of
robot dialogue exists.

Answers are generated in batches (left-padded, bf16 where the CPU has native bf16: a batch of
32 runs about 5x the tokens per second of single-prompt decoding on 2 cores) and kept in a
resumable cache, so an interrupted run continues where it stopped.

    python -m training.smollm2.answers --target models/smollm2/target --out .cache/smollm2/corpora

It also answers ``--general`` conversations of questions outside every domain (the ``general``
grammar of :mod:`.prompts`) into ``general.jsonl`` beside the corpora folder (not in it: every entry
there is a domain to ``memspec_build``), the general draft's own text (``--general-corpus``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from pathlib import Path

import torch

from training.smollm2.prompts import DOMAINS, GENERAL_TOPICS, SYSTEM_PROMPT, questions

FOLLOW_UP_SHARE = 0.25


def conversations(domain: str, count: int, seed: int) -> list[list[str]]:
    """``count`` question lists (one or two questions) of ``domain``, deterministic."""
    pool = questions(domain, count * 2, seed)
    rng = random.Random(f"{domain}:follow-up:{seed}")
    firsts, rest = pool[:count], pool[count:]
    return [[q, rest[i % len(rest)]] if rest and rng.random() < FOLLOW_UP_SHARE else [q]
            for i, q in enumerate(firsts)]


class AnswerCache:
    """Answers already generated, by the hash of the rendered prompt (append-only JSON lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answers: dict[str, str] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.answers[row["key"]] = row["answer"]

    @staticmethod
    def key(prompt: str) -> str:
        return hashlib.sha256(prompt.encode()).hexdigest()[:24]

    def add(self, prompt: str, answer: str) -> None:
        key = self.key(prompt)
        self.answers[key] = answer
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": key, "answer": answer}, ensure_ascii=False) + "\n")


@torch.inference_mode()
def answer_all(model, tok, prompts: list[str], cache: AnswerCache, *, batch: int, max_new_tokens: int) -> None:
    """Greedy answers for every prompt not yet in ``cache``, in length-sorted batches."""
    todo = sorted({p for p in prompts if cache.key(p) not in cache.answers}, key=len)
    done_tokens, t0 = 0, time.perf_counter()
    for i in range(0, len(todo), batch):
        chunk = todo[i:i + batch]
        enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        for prompt, row in zip(chunk, out[:, enc.input_ids.shape[1]:], strict=True):
            ids = row.tolist()
            if tok.eos_token_id in ids:
                ids = ids[:ids.index(tok.eos_token_id)]
            done_tokens += len(ids)
            cache.add(prompt, tok.decode(ids, skip_special_tokens=True).strip())
        rate = done_tokens / (time.perf_counter() - t0)
        print(f"[answers] {min(i + batch, len(todo))}/{len(todo)} prompts, {rate:.0f} tokens/s", flush=True)


def domain_counts(specs: list[str]) -> dict[str, int]:
    """``--count DOMAIN=N`` options as a mapping; a domain the grammars lack is a clear error."""
    out: dict[str, int] = {}
    for spec in specs:
        domain, sep, number = spec.partition("=")
        if not sep or domain not in DOMAINS or not number.isdigit() or int(number) < 1:
            raise SystemExit(f"--count {spec!r}: expected DOMAIN=N with N >= 1 and DOMAIN one of "
                             f"{', '.join(DOMAINS)}")
        out[domain] = int(number)
    return out


def stale_corpora(out: Path) -> list[str]:
    """Entries of ``out`` that are not this grammar's corpora (none for a missing folder).

    ``memspec_build drafts --corpora`` takes every ``.txt``/``.jsonl`` file and folder of the folder as a
    domain, so a corpus left there by an earlier grammar (or anything else) would be built into a draft.
    """
    if not out.is_dir():
        return []
    ours = {f"{d}.jsonl" for d in DOMAINS}
    return sorted(p.name for p in out.iterdir() if p.name not in ours)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=Path, default=Path("models/smollm2/target"))
    parser.add_argument("--out", type=Path, default=Path(".cache/smollm2/corpora"))
    parser.add_argument("--per-domain", type=int, default=300, help="conversations per domain (default 300)")
    parser.add_argument("--count", action="append", default=[], metavar="DOMAIN=N",
                        help="conversations for one domain instead of --per-domain (repeatable)")
    parser.add_argument("--general", type=int, default=300, metavar="N",
                        help="conversations of questions outside every domain, for the general draft "
                             "(default 300; 0: none), written to --general-out")
    parser.add_argument("--general-out", type=Path, default=None,
                        help="where the general conversations go (default: general.jsonl beside --out)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.general < 0:
        raise SystemExit("--general must be >= 0 (0: no general conversations)")
    general_out = args.general_out or args.out.parent / f"{GENERAL_TOPICS}.jsonl"
    if general_out.parent.resolve() == args.out.resolve():
        raise SystemExit(f"--general-out {general_out} is inside the corpora folder {args.out}: memspec_build "
                         "would build it as a domain. Put it beside the folder")
    others = stale_corpora(args.out)
    if others:
        raise SystemExit(f"{args.out} holds {', '.join(others)}, which are not corpora of the domains "
                         f"{', '.join(DOMAINS)}: memspec_build would build them as domains too. Move them "
                         "away, or choose another --out")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.target)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.bfloat16).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = AnswerCache(args.out.parent / "answers.cache.jsonl")  # beside the corpora folder, not a domain in it
    counts = {d: args.per_domain for d in DOMAINS} | domain_counts(args.count)
    plans = {d: conversations(d, counts[d], args.seed) for d in DOMAINS}
    if args.general:
        plans[GENERAL_TOPICS] = conversations(GENERAL_TOPICS, args.general, args.seed)
    system = [{"role": "system", "content": SYSTEM_PROMPT}]

    def render(messages: list[dict]) -> str:
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def answered(qs: list[str]) -> list[dict]:
        """The system prompt, then each question with its cached answer."""
        msgs = list(system)
        for q in qs:
            msgs.append({"role": "user", "content": q})
            msgs.append({"role": "assistant", "content": cache.answers[cache.key(render(msgs))]})
        return msgs

    def transcripts(turn: int) -> list[list[dict]]:
        """Every conversation's messages up to its ``turn``-th question (earlier answers from the cache)."""
        return [[*answered(qs[:turn]), {"role": "user", "content": qs[turn]}]
                for plan in plans.values() for qs in plan if len(qs) > turn]

    for turn in (0, 1):
        answer_all(model, tok, [render(m) for m in transcripts(turn)], cache, batch=args.batch,
                   max_new_tokens=args.max_new_tokens)
    for domain, plan in plans.items():
        path = general_out if domain == GENERAL_TOPICS else args.out / f"{domain}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for qs in plan:
                msgs = answered(qs)
                fh.write(json.dumps({"messages": msgs}, ensure_ascii=False) + "\n")
        print(f"[answers] {path}: {len(plan)} conversations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
