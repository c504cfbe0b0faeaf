"""Evaluation harness: every policy side by side on the same workloads, with plots and a report.

``python -m bench`` (``make bench``) runs the paper's six experiments; ``python -m bench --quick``
(``make bench-quick``) a smaller version of the same. See ``docs/bench.md``.

The package uses only the public APIs of :mod:`memspec_ros.core` and :mod:`memspec_ros.runtime`,
as a user would; ``bench/engine_bench.py`` (the engine benchmark) is a separate script that
lives in the same folder.
"""
