"""``memspec_generate "text"``: stream an answer from the node to the terminal.

Sends a Generate goal, prints the answer as it streams (the whole answer, even when the
last feedback is late), then the result
statistics, why generation ended (finish_reason) and the seed (to replay a sample).
The text is sent as a user message (the node renders it with the model's chat template);
``--raw`` sends it as a raw prompt instead. ``--system`` sets a system prompt, ``--stop``
(repeatable) ends the answer at a string. Ctrl-C cancels the goal (the node stops within one round) and still prints
what was generated and the statistics. ROS arguments work as for any ROS program:
``memspec_generate "hi" --ros-args -r __ns:=/robot1`` talks to ``/robot1/memspec/generate``.

``--chat`` (or no text on a terminal) is an interactive chat in one session: each line is a
user message, the answer streams, Ctrl-C cancels the answer (the session keeps what was said),
Ctrl-D quits (:mod:`memspec_ros.ros.chat_loop`).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from memspec_interfaces.action import Generate
from rclpy.node import Node
from rclpy.utilities import remove_ros_args

from memspec_ros.ros.chat_loop import ChatStreams, new_session_id, run_chat
from memspec_ros.ros.cli_session_tokens import SessionTokenFile
from memspec_ros.ros.generate_client import GenerateClient, make_goal
from memspec_ros.ros.tool_node import tool_node


def format_result(result: Generate.Result) -> str:
    """Statistics block printed after the answer."""
    return (
        f"tokens: {result.num_tokens}  tokens/s: {result.tokens_per_second:.1f}  "
        f"acceptance: {result.acceptance_rate:.2f}  mean accepted length: {result.mean_accepted_length:.2f}\n"
        f"draft switches: {result.draft_switches}  stall: {result.stall_seconds:.3f} s  "
        f"drafts used: {', '.join(result.drafts_used) or '(target only)'}\n"
        f"finish_reason: {result.finish_reason}  seed: {result.seed}  message: {result.message}"
        + (f"\nsession started: {result.session_restart_reason or 'new'}" if result.session_started else "")
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The tool's options from a whole command line (ROS arguments removed)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", nargs="?", default=None,
                        help="what the user says (a user message), or with --raw the raw prompt; "
                             "without it on a terminal, an interactive chat (--chat)")
    parser.add_argument("--chat", action="store_true",
                        help="interactive chat in one session: read a line, stream the answer, repeat; "
                             "Ctrl-C cancels the answer, Ctrl-D quits (text, if given, is the first line)")
    parser.add_argument("--raw", action="store_true",
                        help="send the text as a raw prompt, not as a chat message (no chat template)")
    parser.add_argument("--system", default="", help="system prompt (chat messages only)")
    parser.add_argument("--stop", action="append", default=[], metavar="STRING",
                        help="end the answer at this string (repeatable; e.g. --stop $'\\nUSER:')")
    parser.add_argument("--action", default="memspec/generate",
                        help="action name, resolved in this tool's namespace and remaps (default %(default)s)")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="0 = the node's default_max_new_tokens")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0, help="0 = no top-k truncation")
    parser.add_argument("--seed", type=int, default=0, help="0 = the node draws one (printed at the end)")
    parser.add_argument("--domain-hint", default="")
    parser.add_argument("--session-id", "--session", dest="session_id", default="",
                        help="continue this dialogue session (--chat without it opens a new one)")
    parser.add_argument("--session-token", default="",
                        help="the session's token (default: the one this tool remembered in "
                             "$ROS_HOME/memspec_session_tokens.json when it opened the session)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the server")
    args = parser.parse_args(remove_ros_args(args=argv)[1:])
    if args.chat and args.raw:
        parser.error("--chat sends chat messages: it cannot be combined with --raw")
    return args


def chat_mode(args: argparse.Namespace, stdin: TextIO) -> bool:
    """Chat when asked to, or when no text is given and a person is typing (a terminal)."""
    return args.chat or (args.text is None and stdin.isatty())


def goal_from_args(args: argparse.Namespace, session_token: str, text: str | None = None,
                   system: bool = True) -> Generate.Goal:
    """The goal the options describe: a user message (or with ``--raw`` a raw prompt).

    ``text`` replaces the positional text (a chat line); ``system=False`` leaves the system
    prompt out (a continued chat session keeps the one it has)."""
    text = args.text if text is None else text
    return make_goal(
        text if args.raw else "", args.max_new_tokens,
        messages=() if args.raw else [("user", text)], system_prompt=args.system if system else "",
        stop=args.stop,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        seed=args.seed, domain_hint=args.domain_hint, session_id=args.session_id,
        session_token=session_token,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the tool; ``argv`` is a whole command line (program name first), as ``sys.argv``."""
    argv = list(sys.argv if argv is None else argv)
    args = parse_args(argv)
    chat = chat_mode(args, sys.stdin)
    if not chat and args.text is None:
        print("error: give the text to send, or --chat for an interactive chat", file=sys.stderr)
        return 2
    with tool_node("memspec_generate", argv) as node:
        return _chat(node, args) if chat else _generate(node, args)


def _chat(node: Node, args: argparse.Namespace) -> int:
    """The interactive loop on this terminal (or pipe), in one session."""
    client = GenerateClient(node, args.action)
    try:
        if not _server_ready(client, args.timeout):
            return 2
        tokens = SessionTokenFile()
        named = bool(args.session_id)
        token = _known_token(tokens, client, args)
        session_id = args.session_id or new_session_id()
        if token:
            client.session_tokens[session_id] = token
        args.session_id = session_id
        print(f"[session {session_id}; Ctrl-C cancels an answer, Ctrl-D quits]", file=sys.stderr)
        first_line = [args.text] if args.text else []

        def goal(text: str, first: bool) -> Generate.Goal:
            return goal_from_args(args, "", text=text, system=first)

        def remember(new_token: str) -> None:
            if named:
                tokens.put(client.action_name, session_id, new_token)

        streams = ChatStreams(_Prepended(first_line, sys.stdin), sys.stdout, sys.stderr,
                              interactive=sys.stdin.isatty())
        return run_chat(client, goal, streams, on_token=remember, timeout_s=args.timeout)
    finally:
        client.destroy()


def _server_ready(client: GenerateClient, timeout_s: float) -> bool:
    """Wait for the action server; say what to check when there is none."""
    if client.wait_for_server(timeout_s):
        return True
    print(f"error: no action server at {client.action_name} (is the node active?)", file=sys.stderr)
    return False


def _known_token(tokens: SessionTokenFile, client: GenerateClient, args: argparse.Namespace) -> str:
    """The session token to send: given on the command line, or remembered from an earlier run."""
    if args.session_token:
        return args.session_token
    return tokens.get(client.action_name, args.session_id) if args.session_id else ""


class _Prepended:
    """A line stream that yields some lines first (the positional text of ``--chat "..."``)."""

    def __init__(self, first: list[str], rest: TextIO) -> None:
        self._first, self._rest = list(first), rest

    def readline(self) -> str:
        if self._first:
            return self._first.pop(0) + "\n"
        return self._rest.readline()


def _generate(node: Node, args: argparse.Namespace) -> int:
    client = GenerateClient(node, args.action)
    try:
        if not _server_ready(client, args.timeout):
            return 2
        tokens = SessionTokenFile()
        goal = goal_from_args(args, _known_token(tokens, client, args))
        call = client.send(goal, on_text=lambda text: (sys.stdout.write(text), sys.stdout.flush()))
        if not call.wait_accepted(args.timeout):
            print(f"error: goal rejected: {client.describe_rejection(call)}", file=sys.stderr)
            return 3
        try:
            result = call.wait(timeout_s=24 * 3600)
        except KeyboardInterrupt:
            print("\n[cancelling]", file=sys.stderr)
            call.cancel()
            result = call.wait(timeout_s=60)
        if args.session_id and result.session_token:
            tokens.put(client.action_name, args.session_id, result.session_token)
        print()
        print(format_result(result))
        return 0 if call.succeeded else 1
    finally:
        client.destroy()


if __name__ == "__main__":
    sys.exit(main())
