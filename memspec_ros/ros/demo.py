"""``make demo``: the node with the default model set answering a multi-topic robot chat.

Starts ``memspec_node`` as its own process (as a robot's bringup would), configures and
activates it over the standard lifecycle services, then plays one chat session through the
Generate action whose user messages move between domains (an errand, code, general knowledge,
a how-to, arithmetic), answered by SmolLM2-135M-Instruct with its drafts. It prints each
streamed answer, then what the working set did: which drafts were loaded and evicted, how often
the active draft changed, and acceptance. Everything crosses real DDS, restricted to this machine.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass

from memspec_interfaces.action import Generate
from memspec_interfaces.msg import DraftResidency, DraftState

from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.lifecycle_client import LifecycleClient
from memspec_ros.ros.node_process import NodeProcess
from memspec_ros.ros.qos import RESIDENCY_LOG_QOS
from memspec_ros.ros.tool_node import tool_node

SYSTEM_PROMPT = "You are a helpful home service robot. Keep your answers short and clear."
"""The system prompt the default model set's drafts and predictor were built with (its corpora's
conversations open with it: ``models/smollm2/heldout/prompts.jsonl``)."""

#: (topic, user message): one chat session whose topic moves the way a household robot's user
#: moves it - an errand, a bit of code, general knowledge, a how-to, arithmetic, back to errands -
#: so the working set follows the topic from goal to goal. The node renders the conversation with
#: the target's chat template; the model's end-of-turn token ends each answer.
DIALOGUE: tuple[tuple[str, str], ...] = (
    ("commands", "Please bring me the red cup from the kitchen."),
    ("code", "Write a short Python function that returns True when a battery voltage is below 11.2 volts."),
    ("general", "What is the capital of France?"),
    ("howto", "How do I make a cup of tea?"),
    ("math", "What is 15% of 200?"),
    ("commands", "Thank you. Now go back to your charging station."),
)


def goal_for(text: str, max_new_tokens: int, first: bool) -> Generate.Goal:
    """A user message of the demo's chat session (the system prompt goes with the first)."""
    return make_goal(messages=[("user", text)], system_prompt=SYSTEM_PROMPT if first else "",
                     max_new_tokens=max_new_tokens, session_id="demo-chat")


STATE = {DraftState.ON_STORAGE: "storage", DraftState.LOADING: "loading", DraftState.RESIDENT: "resident",
         DraftState.EVICTING: "evicting"}


@dataclass
class ResidencyLog:
    """Turns the stream of DraftResidency snapshots into a list of state changes."""

    def __post_init__(self) -> None:
        self.last: dict[str, int] = {}
        self.changes: list[tuple[float, str, str, str]] = []
        self.lock = threading.Lock()
        self.t0 = time.monotonic()

    def __call__(self, msg: DraftResidency) -> None:
        with self.lock:
            for d in msg.drafts:
                old = self.last.get(d.name)
                if old is not None and old != d.state:
                    self.changes.append((time.monotonic() - self.t0, d.name, STATE[old], STATE[d.state]))
                self.last[d.name] = d.state

    def resident(self) -> list[str]:
        with self.lock:
            return [n for n, s in self.last.items() if s == DraftState.RESIDENT]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params-file", default="config/memspec.yaml")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--storage-mbps", type=float, default=46.0,
                        help="emulated storage bandwidth for draft loads in MB/s (default %(default)s: a load then "
                             "costs about 2.7 decoding rounds, the paper's edge regime); 0 = native")
    args = parser.parse_args(argv)

    with tool_node("memspec_demo") as client_node:
        residency = ResidencyLog()
        client_node.create_subscription(DraftResidency, "/memspec/draft_residency", residency, RESIDENCY_LOG_QOS)
        # session_dir "": the demo's node lives as long as the demo, and the next run opens its
        # sessions again with a new client (a stored one would belong to this run's client).
        overrides: dict[str, object] = {"storage_bandwidth_mbps": args.storage_mbps, "session_dir": ""}
        with NodeProcess(args.params_file, overrides=overrides) as node:
            return _run(client_node, node, residency, args.max_new_tokens)

def _run(client_node, node: NodeProcess, residency: ResidencyLog, max_new_tokens: int) -> int:
    print(f"[demo] started the node: {' '.join(node.command)}")
    lifecycle = LifecycleClient(client_node)
    if not lifecycle.wait_for_services(60.0):
        print("[demo] the node's lifecycle services never appeared; node log:\n" + node.log())
        return 1
    for transition in ("configure", "activate"):
        t = time.monotonic()
        if not lifecycle.change_state(transition):
            print(f"[demo] {transition} failed; node log:\n" + node.log())
            return 1
        print(f"[demo] {transition}: ok in {time.monotonic() - t:.1f} s -> {lifecycle.get_state()}")
    print(f"[demo] resident drafts after configure: {residency.resident()}")

    gen = GenerateClient(client_node)
    if not gen.wait_for_server(30.0):
        print("[demo] no Generate action server; node log:\n" + node.log())
        return 1
    totals = {"tokens": 0, "seconds": 0.0, "switches": 0, "stall": 0.0}
    print(f"[demo] one chat session; system prompt {SYSTEM_PROMPT!r}")
    for i, (domain, text) in enumerate(DIALOGUE, 1):
        print(f"\n--- turn {i} ({domain}) ---\nuser> {text}\nrobot> ", end="", flush=True)
        t = time.monotonic()
        call = gen.send(goal_for(text, max_new_tokens, i == 1),
                        on_text=lambda text: (sys.stdout.write(text), sys.stdout.flush()))
        if not call.wait_accepted():
            print("[demo] goal rejected; node log:\n" + node.log())
            return 1
        r = call.wait(300)
        elapsed = time.monotonic() - t
        totals["tokens"] += r.num_tokens
        totals["seconds"] += elapsed
        totals["switches"] += r.draft_switches
        totals["stall"] += r.stall_seconds
        print(f"\n[{r.num_tokens} tokens, {r.tokens_per_second:.1f} tok/s, acceptance {r.acceptance_rate:.2f}, "
              f"mean accepted length {r.mean_accepted_length:.2f}, drafts {list(r.drafts_used) or ['target only']}, "
              f"switches {r.draft_switches}, stall {r.stall_seconds:.3f} s, finish_reason {r.finish_reason}]")
        if not call.succeeded:
            print(f"[demo] generation did not succeed: {r.message}")
            return 1

    print("\n=== summary ===")
    print(f"{totals['tokens']} tokens in {totals['seconds']:.1f} s "
          f"({totals['tokens'] / max(totals['seconds'], 1e-9):.1f} tok/s end to end), "
          f"{totals['switches']} draft switches, {totals['stall']:.3f} s stalled waiting for loads")
    print("residency changes (seconds since start, draft, from -> to):")
    for t, name, old, new in residency.changes:
        print(f"  {t:7.2f}  {name:<14} {old} -> {new}")
    print(f"resident at the end: {residency.resident()}")
    for transition in ("deactivate", "cleanup", "shutdown"):
        lifecycle.change_state(transition)
    print("[demo] node deactivated, cleaned up and shut down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
