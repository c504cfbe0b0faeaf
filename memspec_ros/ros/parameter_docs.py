"""Generate docs/parameters.md from the node's parameter declarations.

The declarations in :mod:`memspec_ros.ros.parameters` are the single source: a test fails
when the committed page differs from what this renders, so the page cannot go stale.

    python -m memspec_ros.ros.parameter_docs          # rewrite docs/parameters.md
    python -m memspec_ros.ros.parameter_docs --check  # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memspec_ros.ros.parameters import PARAMS, ParamSpec

PAGE = Path(__file__).resolve().parents[2] / "docs" / "parameters.md"

_HEADER = """\
# memspec_node parameters

Generated from `memspec_ros/ros/parameters.py` by `python -m memspec_ros.ros.parameter_docs`;
do not edit by hand (a test fails when this page is stale). On a robot, `ros2 param describe
/memspec <name>` shows the same descriptions and ranges.

**Read-only** parameters shape what configure loads: set them in the params file
(`config/memspec.yaml` holds every default) or on the command line
(`--ros-args -p name:=value`); changing one means restarting the node. **Dynamic** ones may be
set while the node runs (`ros2 param set`); they apply between generations.

| parameter | type | default | allowed | changeable | description |
|---|---|---|---|---|---|
"""


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, list):
        return "string[]"
    return "string"


def _allowed(spec: ParamSpec) -> str:
    if spec.choices:
        return ", ".join(f"`{c}`" for c in spec.choices)
    if spec.int_range:
        return f"{spec.int_range[0]} .. {spec.int_range[1]}"
    if spec.float_range:
        return f"{spec.float_range[0]:g} .. {spec.float_range[1]:g}"
    return ""


def _default(value: object) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return "`[" + ", ".join(str(v) for v in value) + "]`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def render() -> str:
    """The whole page, one table row per declared parameter, in declaration order."""
    rows = [
        f"| `{p.name}` | {_type_name(p.default)} | {_default(p.default)} | {_allowed(p)} | "
        f"{'read-only' if p.read_only else 'dynamic'} | {p.description.replace('|', '/')} |"
        for p in PARAMS
    ]
    return _HEADER + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/parameters.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE} is stale: run python -m memspec_ros.ros.parameter_docs", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
