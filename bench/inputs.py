"""What a run measures: the catalogue (target, drafts, predictor) and the evaluation prompts.

The benchmark is for a user's own model set on their own device as much as for the bundled
zoo, so both come from options (``--catalogue``, ``--prompts``) rather than from fixed paths:

* the **catalogue** is the file the node serves (``docs/catalogue.md``), or a folder holding
  ``catalogue.yaml``; default: the default model set, ``models/smollm2/catalogue.yaml``
  (SmolLM2-135M-Instruct with its drafts); ``models/zoo`` is the 17 M fixture;
* the **prompts** are ``{"domain", "prompt"}`` rows cut from held-out documents. Default:
  ``<catalogue folder>/heldout/prompts.jsonl`` (``memspec_build drafts`` writes it, from text
  no draft or predictor was trained on; the bundled zoo is built the same way). A catalogue
  assembled by hand has none: ``--prompts`` then names one, and :func:`domain_mismatch`
  reports prompts of the wrong domains before minutes of work are spent.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from memspec_ros.runtime.catalogue_file import catalogue_path

REPO = Path(__file__).resolve().parent.parent
BUNDLED_CATALOGUE = REPO / "models" / "smollm2" / "catalogue.yaml"
"""The default model set (what the node serves by default)."""
ZOO_CATALOGUE = REPO / "models" / "zoo" / "catalogue.yaml"
BUNDLED_SETS = {"smollm2": BUNDLED_CATALOGUE, "zoo": ZOO_CATALOGUE}
HELDOUT_PROMPTS = Path("heldout") / "prompts.jsonl"
"""Where ``memspec_build`` puts the evaluation prompts, relative to the catalogue's folder."""


def catalogue_file(path: Path | str) -> Path:
    """The catalogue file ``path`` names (the file itself or ``catalogue.yaml`` in a folder), resolved."""
    return catalogue_path(path).resolve()


def bundled_set(catalogue: Path | str) -> str | None:
    """The name of the bundled model set ``catalogue`` is (``smollm2``, ``zoo``), or None for a user's."""
    path = catalogue_file(catalogue)
    return next((name for name, file in BUNDLED_SETS.items() if path == file.resolve()), None)


def is_bundled(catalogue: Path | str) -> bool:
    """Whether ``catalogue`` is the default model set (the reproduce command needs no --catalogue)."""
    return catalogue_file(catalogue) == BUNDLED_CATALOGUE.resolve()


def default_prompts(catalogue: Path | str) -> Path:
    """The prompts file a run on ``catalogue`` uses unless ``--prompts`` names one (module docstring)."""
    return catalogue_file(catalogue).parent / HELDOUT_PROMPTS


def display_path(path: Path | str) -> str:
    """``path`` relative to the repository when inside it (results stay comparable across checkouts)."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)


def domain_mismatch(prompt_domains: Iterable[str], draft_domains: Iterable[str]) -> str | None:
    """Why the prompts cannot evaluate these drafts (no prompt domain has a draft), or None.

    Prompt domains without a draft of their own are allowed (the general draft or another one
    may still serve them), but with none in common the run would measure drafts on text they
    were never specialised for: almost certainly the wrong prompts file.
    """
    prompts, drafts = set(prompt_domains), set(draft_domains)
    if prompts & drafts:
        return None
    return (f"none of the prompts' domains {sorted(prompts)} is a draft domain of the catalogue "
            f"{sorted(drafts)}: pass --prompts with held-out prompts of the catalogue's domains "
            f"({{\"domain\", \"prompt\"}} rows; memspec_build writes <catalogue folder>/{HELDOUT_PROMPTS})")
