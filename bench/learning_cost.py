"""What online learning costs a goal: its tokens/s with and without a learning step running.

``python -m bench.learning_cost [--catalogue models/smollm2] [--pairs 8]``

The node runs each learning step on its torch thread after a turn, and a goal accepted meanwhile
cancels it: the goal's turn, queued behind the step on the same thread, starts once the draft pass
in progress ends. The worst case is a goal that arrives right after the previous turn, when the
step has just begun. This measures exactly that with a real runtime, the step and the turns run
one after the other on one thread as on the node's torch thread: for pairs of turns of held-out
prompts, the second turn's tokens/s (from the moment the step starts) when the goal arrived during
the step's first draft pass (:class:`GoalDuringFirstPass`), against the same pair with no step
running, interleaved pair by pair. It also times complete, uncancelled steps: the idle time
learning needs after a turn.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig, make_policy
from memspec_ros.runtime.ngram_member import NgramSettings
from memspec_ros.runtime.workload import load_chat_style, load_prompts

from .config import REPO
from .real_runs import serve_turn
from .split import load_training_prompts
from .testbed import load_testbed
from .workloads import build_workload


class GoalDuringFirstPass(threading.Event):
    """The cancel event of a goal that arrives while the step's first draft pass runs: clear at the
    step's first check (before that pass), set at every later one. The worst case for the goal,
    made deterministic: it waits for one whole pass."""

    def __init__(self) -> None:
        super().__init__()
        self._checks = 0

    def is_set(self) -> bool:
        self._checks += 1
        return self._checks > 1


def run(args: argparse.Namespace) -> dict[str, float]:
    tb = load_testbed(args.catalogue, args.threads or None, args.dtype)
    root = args.catalogue if args.catalogue.is_dir() else args.catalogue.parent
    prompts_file = root / "heldout" / "prompts.jsonl"
    style = load_chat_style(prompts_file)
    workload = build_workload(load_prompts(prompts_file), exclude=load_training_prompts(tb.predictor_path),
                              sessions=args.pairs, turns=2, max_new_tokens=args.max_new_tokens, seed=args.seed,
                              style=style)
    config = RuntimeConfig(k=4, ngram=NgramSettings())
    rates: dict[bool, list[float]] = {False: [], True: []}
    steps: list[float] = []
    waits: list[float] = []
    policy = make_policy("memspec", predictor=tb.predictor_path, draft_names=tb.catalogue.names)
    # Everything on this one thread, as the node runs learning and generations on its torch thread
    # (a second thread running torch would start a second OpenMP team: torch_thread.py says what that costs).
    with DraftRuntime(tb.engine, tb.catalogue, Budget.drafts(2), policy, config, materialize=tb.materialize) as rt:
        rt.enable_learning()
        rt.warm_up()
        for i, session in enumerate(workload.sessions):
            first, second = session.turns
            for learning in ((False, True) if i % 2 == 0 else (True, False)):
                conv = rt.new_conversation()
                serve_turn(rt, conv, first)
                if not learning:
                    rt.learn_from_last_turn()  # the same learned state in both variants, learned before timing
                started = time.perf_counter()
                if learning:  # the step starts; the goal arrives during its first pass and waits for it
                    learned = rt.learn_from_last_turn(GoalDuringFirstPass())
                    waits.append(learned.seconds if learned is not None else 0.0)
                report = serve_turn(rt, conv, second)
                wall = time.perf_counter() - started
                rates[learning].append(report.tokens / wall if wall > 0 else 0.0)
            conv = rt.new_conversation()  # a complete step in idle time
            serve_turn(rt, conv, first)
            full = rt.learn_from_last_turn()
            if full is not None:
                steps.append(full.seconds)
    without, with_ = statistics.fmean(rates[False]), statistics.fmean(rates[True])
    out = {"tokens_per_s_without_learning": without, "tokens_per_s_with_learning_cancelled": with_,
           "ratio": with_ / without if without else 0.0, "cancelled_step_ms": 1e3 * statistics.fmean(waits or [0.0]),
           "full_step_ms": 1e3 * statistics.fmean(steps or [0.0]), "pairs": len(rates[False]),
           "threads": float(tb.threads or 0)}
    print(f"{args.catalogue} ({tb.dtype_note}, {tb.threads} thread(s)), {out['pairs']} pairs of turns x "
          f"{args.max_new_tokens} tokens: the second turn's tokens/s {without:.1f} without learning, "
          f"{with_:.1f} with a learning step cancelled by it ({out['ratio']:.3f}x); a cancelled step ran "
          f"{out['cancelled_step_ms']:.0f} ms, a complete step takes {out['full_step_ms']:.0f} ms of idle time")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--catalogue", type=Path, default=REPO / "models" / "smollm2")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
