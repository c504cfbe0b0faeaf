"""``python -m bench [--quick]``: see :mod:`bench.run`."""

from bench.run import main

raise SystemExit(main())
