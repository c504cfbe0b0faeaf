"""The one error type ``memspec_build`` reports to its user.

A build fails for reasons the user must fix (an empty corpus, a target without safetensors
weights, a model that needs remote code, a full disk) and for bugs. The first kind is a
:class:`BuildError`: the command line prints its message alone and exits with code 2, so a
script can tell "your input" from "our crash" (a traceback, exit code 1).
"""
from __future__ import annotations


class BuildError(Exception):
    """Something the user must fix; the message says what, and how, in one sentence or two."""
