"""Offline training pipeline for the memspec_ros model zoo (target + domain drafts).

Kept outside the ``memspec_ros`` package on purpose: the runtime never imports training code,
it only loads the saved Hugging Face directories under ``models/zoo``.
"""
