"""``python -m memspec_ros.builder``: the same as the ``memspec_build`` console script."""
from __future__ import annotations

from memspec_ros.builder.cli import main

raise SystemExit(main())
