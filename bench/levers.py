"""What each speed lever gains, measured side by side: compute dtype, threads, proposal length k.

The headline (``python -m bench``) measures every policy at the node's default configuration.
This asks the other question: which settings make that default, and by how much. For each
configuration (dtype x threads x k), target-only decoding and memspec decode the same chat
sessions, alternating session by session (a slow spell of the machine lands on both alike), and
the table gives tokens/s and the ratio. Configurations run one after the other: compare their
ratios more than their absolute rates. Outputs are checked against the target's
greedy output *in each dtype* (a bf16 target is another model than the fp32 one), up to the
ties low precision makes (:mod:`bench.output_check`).

    python -m bench.levers                      # the default model set, 2 sessions x 4 turns
    python -m bench.levers --catalogue models/zoo --dtypes float32 --ks 4,6
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path

import torch

from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig
from memspec_ros.runtime.workload import load_chat_style, load_prompts

from .inputs import BUNDLED_CATALOGUE, default_prompts, display_path
from .output_check import check_outputs
from .policy_factory import PolicyFactory
from .real_runs import run_target_only, serve_session
from .testbed import load_testbed
from .trace_cache import session_traces
from .workloads import build_workload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.levers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalogue", type=Path, default=BUNDLED_CATALOGUE)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--ks", default="4")
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="write the table as JSON here too")
    args = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    prompts_file = default_prompts(args.catalogue)
    workload = build_workload(load_prompts(prompts_file), sessions=args.sessions, turns=args.turns,
                              max_new_tokens=args.max_new_tokens, calibration_turns=0,
                              style=load_chat_style(prompts_file), shift_rates=(1,))
    rows = []
    for dtype in args.dtypes.split(","):
        testbed = load_testbed(args.catalogue, None, dtype)
        traces = session_traces(testbed, workload.sessions, Path("results") / "cache",
                                max(map(int, args.ks.split(","))))
        factory = PolicyFactory(testbed.predictor_path, testbed.catalogue.names)
        for threads, k in itertools.product(map(int, args.threads.split(",")), map(int, args.ks.split(","))):
            torch.set_num_threads(threads)
            target = memspec = 0.0
            tokens = [0, 0]
            identical = True
            for session, trace in zip(workload.sessions, traces, strict=True):
                t = run_target_only(testbed.engine, session, trace)
                target += t.wall_s
                tokens[0] += t.tokens
                runtime = DraftRuntime(testbed.engine, testbed.catalogue, Budget.drafts(args.budget),
                                       factory("memspec"), RuntimeConfig(k=k), materialize=testbed.materialize)
                try:
                    runtime.warm_up()
                    t0 = time.perf_counter()
                    reports = serve_session(runtime, session)
                    memspec += time.perf_counter() - t0
                finally:
                    runtime.close()
                tokens[1] += sum(r.tokens for r in reports)
                identical &= check_outputs(testbed.engine.target, trace, [r.output_ids for r in reports]).lossless
            row = {"dtype": dtype, "threads": threads, "k": k, "target_only_tok_s": tokens[0] / target,
                   "memspec_tok_s": tokens[1] / memspec, "outputs_identical": identical}
            row["ratio"] = row["memspec_tok_s"] / row["target_only_tok_s"]
            rows.append(row)
            print(f"{dtype:9s} threads {threads} k {k}: target-only {row['target_only_tok_s']:6.1f} tok/s, memspec "
                  f"{row['memspec_tok_s']:6.1f} tok/s ({row['ratio']:.2f}x), outputs = target's: {identical}",
                  flush=True)
    print(f"catalogue {display_path(args.catalogue)}; {args.sessions} sessions x {args.turns} turns x "
          f"{args.max_new_tokens} tokens; load average {os.getloadavg()[0]:.2f}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
