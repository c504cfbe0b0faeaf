"""Fresh held-out questions for ``memspec_build evaluate --prompts``: margins read on 60 prompts, not 15.

``memspec_build drafts`` holds out 5% of the corpus documents, which at 300 conversations a domain
is 15 prompts: on them the committed drafts' margins over the general draft read +0.041 to +0.119;
on 60 fresh questions a domain +0.064 to +0.178, every domain moving by 0.01-0.06 (the 0.10 the
model set must reach is that close). This writes as many questions
a domain as asked, from the same grammars (:mod:`.prompts`) under another seed, none of them a
question any corpus plan up to ``--exclude-up-to`` conversations a domain asks (a plan's questions
are the first ``2 x count`` of seed 0, and a larger plan keeps a smaller one's, so one exclusion
covers every count up to it). Each row is the system prompt and the question, as chat messages that
``evaluate`` renders with the target's template; the target's own greedy continuation is what the
drafts are scored on there, so no answer is generated here. The questions share the corpora's
templates with other slot values: they measure the drafts on the robot's users' kind of question, not
on text of another kind.

    python -m training.smollm2.heldout --per-domain 60 --out models/smollm2/heldout/questions.jsonl
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from training.smollm2.prompts import DOMAINS, SYSTEM_PROMPT, questions

HELDOUT_SEED = 1
"""The corpora use seed 0."""


def heldout_questions(domain: str, count: int, exclude_up_to: int) -> list[str]:
    """Up to ``count`` questions of ``domain`` that no corpus plan of ``exclude_up_to`` conversations asks."""
    seen = set(questions(domain, 2 * exclude_up_to, seed=0))
    fresh = [q for q in questions(domain, count + len(seen), seed=HELDOUT_SEED) if q not in seen]
    return fresh[:count]


def rows(per_domain: int, exclude_up_to: int) -> list[dict]:
    """The prompts file's rows, domain by domain in the grammars' order."""
    return [{"domain": d, "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                                       {"role": "user", "content": q}]}
            for d in DOMAINS for q in heldout_questions(d, per_domain, exclude_up_to)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON-lines file to write")
    parser.add_argument("--per-domain", type=int, default=60, help="questions per domain (default 60)")
    parser.add_argument("--exclude-up-to", type=int, default=300,
                        help="leave out every question of a corpus plan of up to this many conversations a "
                             "domain (default 300, the corpora's in the Makefile)")
    args = parser.parse_args(argv)
    if args.per_domain < 1 or args.exclude_up_to < 0:
        raise SystemExit("--per-domain must be >= 1 and --exclude-up-to >= 0")
    out = rows(args.per_domain, args.exclude_up_to)
    counts = {d: sum(r["domain"] == d for r in out) for d in DOMAINS}
    short = [d for d, n in counts.items() if n < args.per_domain]
    if short:
        raise SystemExit(f"the grammars of {', '.join(short)} ran out of fresh questions ({counts}); "
                         "ask for fewer (--per-domain) or exclude fewer (--exclude-up-to)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    print(f"[heldout] {len(out)} questions ({args.per_domain} a domain) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
