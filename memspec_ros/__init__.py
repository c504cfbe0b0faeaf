"""memspec_ros: memory-aware speculative decoding for LLMs on robots.

Layers: ``core`` (engine, models), ``runtime`` (pool, loader, policies, predictor,
simulator) and ``ros`` (the lifecycle node); each is usable without the one above it.
"""
