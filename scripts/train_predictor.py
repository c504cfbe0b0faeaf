#!/usr/bin/env python3
"""Train MemSpec's draft-need predictor from exact traces of TRAINING text, save it by the zoo.

    python scripts/train_predictor.py            # -> models/zoo/predictor.safetensors

Data split (why the evaluation is honest): prompts are cut, with the same procedure the zoo
uses for its held-out prompts (``training.heldout.make_prompts``), from the *training* split of
each domain's corpus (``.cache/zoo/corpora/<domain>.train.jsonl``, rebuilt by
``python -m training.build_zoo --stages corpora``). The held-out documents and
``models/heldout/prompts.jsonl`` that benchmarks evaluate on are never read here. Sessions are
multi-domain dialogues built like the evaluation workloads; the target's greedy continuation
of each session is recorded once, with one teacher-forced pass per draft (exact traces), and
the predictor is fitted on them. A slice of the sessions is kept aside to report validation
accuracy. Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", type=Path, default=REPO / "models" / "zoo")
    ap.add_argument("--out", type=Path, default=None, help="default: <zoo>/predictor.safetensors")
    ap.add_argument("--sessions", type=int, default=28)
    ap.add_argument("--validation", type=int, default=4, help="sessions held aside for validation")
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--docs-per-domain", type=int, default=80)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trace-dir", type=Path, default=REPO / ".cache" / "predictor_traces")
    args = ap.parse_args()

    import torch

    from memspec_ros.runtime.catalogue import zoo_fingerprint
    from memspec_ros.runtime.catalogue_file import load_catalogue_file, write_catalogue_file
    from memspec_ros.runtime.predictor_training import train_predictor
    from memspec_ros.runtime.recording_models import load_recording_models
    from memspec_ros.runtime.traces import DialogueTrace, record_dialogue
    from memspec_ros.runtime.workload import multi_domain_dialogues
    from training.corpora.build import corpus_path
    from training.corpora.split import read_jsonl
    from training.heldout import make_prompts
    from training.paths import DOMAINS

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    out = args.out or args.zoo / "predictor.safetensors"
    models = load_catalogue_file(args.zoo)
    loaded = load_recording_models(models)
    engine, catalogue, drafts, target = loaded.engine, loaded.catalogue, loaded.drafts, loaded.engine.target

    # Training prompts: training-split documents only (never models/heldout).
    rng = random.Random(args.seed)
    prompts: dict[str, list[str]] = {}
    for domain in DOMAINS:
        docs = read_jsonl(corpus_path(domain, "train"))
        rng.shuffle(docs)
        prompts[domain] = make_prompts([d[:24_000] for d in docs[: args.docs_per_domain]], n=48)
    sessions = multi_domain_dialogues(prompts, sessions=args.sessions, turns=args.turns,
                                     max_new_tokens=args.max_new_tokens, seed=args.seed)

    fingerprint = zoo_fingerprint([models.target, *(s.path for s in catalogue)])
    args.trace_dir.mkdir(parents=True, exist_ok=True)
    traces: list[DialogueTrace] = []
    t0 = time.perf_counter()
    for i, turns in enumerate(sessions):
        path = args.trace_dir / f"train-{fingerprint}-{args.seed}-{i:03d}.npz"
        if path.exists():
            tr = DialogueTrace.load(path)
            if [t.prompt for t in tr.turns] == [t.prompt for t in turns] and set(tr.drafts) == set(catalogue.names):
                traces.append(tr)
                continue
        tr = record_dialogue(engine, drafts, turns, name=f"train-{i:03d}", helper=loaded.helper, k=args.k)
        tr.save(path)
        traces.append(tr)
        print(f"[trace] {i + 1}/{len(sessions)} {tr.generated_tokens} tokens "
              f"({time.perf_counter() - t0:.0f}s)", flush=True)

    n_val = min(args.validation, len(traces) - 1)
    train, val = traces[: len(traces) - n_val], traces[len(traces) - n_val:]
    t1 = time.perf_counter()
    predictor, metrics = train_predictor(
        train, catalogue.names, int(target.config.hidden_size), validation=val, k=args.k, seed=args.seed,
        meta={"data": "training-split documents of each domain (never models/heldout)", "seed": args.seed,
              "sessions": len(train), "validation_sessions": len(val), "turns": args.turns,
              "max_new_tokens": args.max_new_tokens, "zoo_fingerprint": fingerprint})
    fit_s = time.perf_counter() - t1
    predictor.save(out)
    if models.predictor is None and out.resolve().parent == models.root:
        # The catalogue names no predictor yet (a freshly exported zoo): now it has one.
        write_catalogue_file(models.source, target=models.target, drafts=list(models.drafts), predictor=out,
                             header="The bundled model set; format: docs/catalogue.md.")
    report = {name: vars(m) for name, m in metrics.items()}
    report["fit_seconds"] = fit_s
    # Lets an evaluation drop held-out prompts that happen to be textually identical to a
    # training prompt (different documents can share boilerplate lines).
    report["train_prompt_sha1"] = sorted({hashlib.sha1(t.prompt.encode()).hexdigest()
                                          for tr in traces for t in tr.turns})
    report["file_bytes"] = out.stat().st_size
    (out.with_suffix(".json")).write_text(json.dumps(report, indent=1))
    for name, m in metrics.items():
        print(f"[{name}] examples={m.examples} top1={m.top1:.3f} regret={m.regret:.3f} "
              f"(best fixed draft regret {m.best_single_regret:.3f}) mae={m.mae:.3f}")
    print(f"saved {out} ({out.stat().st_size / 1024:.0f} KiB) in {fit_s:.1f}s of fitting")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
