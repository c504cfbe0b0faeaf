"""Corpus builders, one module per domain; each exposes ``build_documents(seed) -> list[str]``.

A *document* is the unit of the held-out split (one source file, one licence, one fortune,
one worked problem, one dialogue), so held-out text never shares a document with training.
"""
