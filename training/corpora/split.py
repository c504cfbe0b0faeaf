"""Document-level train/held-out split and the on-disk corpus format (JSON lines).

Splitting by document (not by position) keeps held-out text genuinely unseen: a fortune,
a source file or a licence is either entirely in training or entirely held out. The code is
:mod:`memspec_ros.builder.corpora`'s, shared with ``memspec_build``.
"""
from __future__ import annotations

from memspec_ros.builder.corpora import HELDOUT_FRACTION, read_jsonl, split_documents, write_jsonl

__all__ = ["HELDOUT_FRACTION", "read_jsonl", "split_documents", "write_jsonl"]
