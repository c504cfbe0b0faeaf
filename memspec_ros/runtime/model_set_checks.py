"""Will these models work together? Checks run at configure, before anything is served.

A draft that matches the target's tokenizer but not its output width (Qwen2.5-0.5B has 151936
logits, Qwen2.5-7B 152064) passes a tokenizer check and then fails every round it drafts; a
predictor trained for another target or another draft set forecasts nonsense or fails on
its first call. Each of these is cheap to detect from configs, tokenizers and the predictor
file's header, so configure refuses them with the file and the fix instead.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import PretrainedConfig, PreTrainedTokenizerBase

from memspec_ros.core.errors import ModelLoadError
from memspec_ros.core.model_loading import check_vocab_compatible, load_config, load_tokenizer
from memspec_ros.core.token_map import TOKEN_MAP_FILE, load_token_map
from memspec_ros.runtime.catalogue_file import DraftEntry


class ModelSetError(ValueError):
    """Models of one catalogue do not fit together; the message names the file and the fix."""


def logit_width(config: PretrainedConfig) -> int:
    """How many logits the model's output layer produces (its vocabulary size)."""
    return int(config.get_text_config().vocab_size)


def hidden_width(config: PretrainedConfig) -> int:
    """Width of the final hidden state (what the predictor's features are made of)."""
    return int(config.get_text_config().hidden_size)


def check_draft(target_tokenizer: PreTrainedTokenizerBase, target_config: PretrainedConfig,
                entry: DraftEntry) -> None:
    """Raise if ``entry`` cannot draft for the target: other tokenizer or other logit width.

    ``VocabularyMismatchError`` for the tokenizer (as before), :class:`ModelSetError` for the
    output width; both name the draft. A subset draft (``token_map.safetensors``) must have been
    mapped onto this target's width and have one logit per subset token plus 'other'.
    """
    check_vocab_compatible(target_tokenizer, load_tokenizer(entry.path), entry.name)
    draft_width = logit_width(load_config(entry.path))
    target_width = logit_width(target_config)
    try:
        token_map = load_token_map(entry.path)
    except ModelLoadError as exc:
        raise ModelSetError(f"draft {entry.name!r}: {exc}") from exc
    if token_map is not None:
        if token_map.target_vocab_size != target_width:
            raise ModelSetError(
                f"draft {entry.name!r} ({entry.path / TOKEN_MAP_FILE}) maps onto {token_map.target_vocab_size} target "
                f"tokens but the target produces {target_width} logits: it was made for another target. Use a draft "
                "made for this exact target (`memspec_build drafts` distils one)")
        if draft_width != token_map.draft_vocab_size:
            raise ModelSetError(
                f"draft {entry.name!r} ({entry.path}) produces {draft_width} logits but its token map has "
                f"{token_map.draft_vocab_size} (subset and 'other'): model and map were not made together; "
                "rebuild it with `memspec_build drafts`")
        return
    if draft_width != target_width:
        raise ModelSetError(
            f"draft {entry.name!r} ({entry.path / 'config.json'}) produces {draft_width} logits but the target "
            f"produces {target_width}: its proposals would be scored against other token ids. Use a draft "
            "made for this exact target (`memspec_build drafts` distils one), not one of a sibling model size"
        )


def check_predictor(path: Path, target_config: PretrainedConfig, draft_names: list[str]) -> None:
    """Raise :class:`ModelSetError` unless the predictor file was made for this target and these drafts.

    Reads only the file's header: the input width must be the target's hidden size (its
    features are the target's hidden states) and its drafts exactly the catalogue's.
    """
    from safetensors import SafetensorError, safe_open

    retrain = "retrain it for this catalogue with `memspec_build predictor`"
    try:
        with safe_open(str(path), framework="numpy") as fh:
            meta = fh.metadata() or {}
    except (OSError, SafetensorError) as exc:
        raise ModelSetError(f"predictor {path} is not a readable safetensors file ({exc}); {retrain}") from exc
    if meta.get("format") != "memspec-predictor-1":
        raise ModelSetError(f"predictor {path} is not a memspec predictor file; {retrain}")
    try:
        names = json.loads(meta["draft_names"])
        hidden = int(meta["hidden_size"])
    except (KeyError, ValueError, TypeError) as exc:
        raise ModelSetError(f"predictor {path} has a damaged header ({exc}); {retrain}") from exc
    target_hidden = hidden_width(target_config)
    if hidden != target_hidden:
        raise ModelSetError(
            f"predictor {path} reads hidden states of width {hidden} but the target's hidden size is "
            f"{target_hidden}: it was trained for another target; {retrain}"
        )
    missing = [n for n in draft_names if n not in names]
    extra = [n for n in names if n not in draft_names]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"knows nothing about {missing}")
        if extra:
            parts.append(f"was trained for drafts the catalogue lacks {extra}")
        raise ModelSetError(f"predictor {path} " + " and ".join(parts) + f"; {retrain}")
