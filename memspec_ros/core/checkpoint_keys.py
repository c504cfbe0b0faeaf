"""A checkpoint's tensor names as transformers will load them into the model.

The weights check (:mod:`memspec_ros.core.config_sanity`) compares what the files store with
what the config builds. Files and modules do not always use the same names: transformers keeps
a per-architecture conversion table that it applies while loading. Pythia (GPT-NeoX) stores its
head as ``embed_out.weight`` where the module has ``lm_head.weight``; a checkpoint saved from
the bare decoder lacks the ``model.`` / ``transformer.`` prefix; mixture-of-experts checkpoints
store one tensor per expert where the module holds them fused. Comparing raw names would refuse
all of these though ``from_pretrained`` loads them, so the stored names are translated first
with the same table and the same function transformers' loader uses.

A *converter* (merging tensors, as for experts) changes shapes too; the tensors it produces are
only checked for presence, their shapes are the loader's business. A converter that splits one
stored tensor into several is mapped to its first product only (as ``rename_source_key`` does),
so the others read as missing and the weights check refuses such a model; none of the tested
architectures has one. ``rename_source_key`` has taken these arguments since transformers 5.0. Stored tensors
the architecture declares obsolete (``_keys_to_ignore_on_load_unexpected``: the causal-mask
buffers old GPT-2 and Pythia files carry, per-layer rotary ``inv_freq``, ``position_ids``) are
left out, as ``from_pretrained`` leaves them out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import torch
from transformers import PreTrainedModel
from transformers.conversion_mapping import get_model_conversion_mapping
from transformers.core_model_loading import WeightConverter, WeightRenaming, dot_natural_key, rename_source_key


def names_as_loaded(model: PreTrainedModel, expected: Mapping[str, torch.Size],
                    stored_names: Iterable[str]) -> tuple[dict[str, str], set[str]]:
    """Each stored tensor's key in ``model``'s state dict, and the keys a converter makes.

    ``model`` is the module the config builds (a meta-device one will do), ``expected`` its
    state-dict shapes. Returns ``(names, converted)``: ``names`` maps each loaded key to the
    stored name it comes from (for a converted key, one of its sources); ``converted`` holds
    the keys made by merging or splitting stored tensors, whose shape the converter decides.
    """
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    prefix = model.base_model_prefix
    names: dict[str, str] = {}
    converted: set[str] = set()
    obsolete = _obsolete_names(model)
    for key in sorted(stored_names, key=dot_natural_key):  # the loader's order (grouped renames need it)
        name, pattern = rename_source_key(key, renamings, converters, prefix, expected)
        if name not in expected and key in expected:  # as transformers does: only the prefix may apply
            name, pattern = rename_source_key(key, [], [], prefix, expected)
        if name not in expected and obsolete.search(name):
            continue
        if pattern is not None:
            converted.add(name)
        names.setdefault(name, key)
    return names, converted


def _obsolete_names(model: PreTrainedModel) -> re.Pattern[str]:
    """Stored names ``from_pretrained`` ignores when the module has no such tensor."""
    patterns = set(getattr(model, "_keys_to_ignore_on_load_unexpected", None) or ())
    patterns |= {r"rotary_emb\.inv_freq", r"(^|\.)position_ids$"}
    return re.compile("|".join(f"({pattern})" for pattern in patterns))
