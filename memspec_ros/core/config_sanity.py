"""Checking a model's ``config.json`` before anything is allocated from it.

A config decides how much memory building a model takes: ``max_position_embeddings`` sizes
the draft forward's rotary tables and KV cache, the other sizes the weights. It is also a file
we were merely pointed at, so a typo or a tampered value (``max_position_embeddings: 1e8``
asks for ~50 GB of rotary tables) must become a clear error naming the file and the field,
not an out-of-memory kill. Two checks:

* :func:`check_config_sizes`: every size field is a positive integer under a documented cap
  (:data:`SIZE_CAPS`). This is all there is for fields the weights do not show
  (``max_position_embeddings``), and it keeps even a model built on the meta device (no
  memory, but one Python object per layer) cheap.
* :func:`check_config_matches_weights`: the module the config builds (on the meta device)
  has exactly the tensors the safetensors files store, shape for shape; a mismatch names the
  size fields whose values produced the wrong dimensions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from transformers import CONFIG_MAPPING, PretrainedConfig

from memspec_ros.core.errors import ModelConfigError
from memspec_ros.core.safetensors_format import StoredTensor

SIZE_CAPS: dict[str, int] = {
    "max_position_embeddings": 1 << 20,
    "max_seq_len": 1 << 20,
    "hidden_size": 1 << 16,
    "intermediate_size": 1 << 18,
    "num_hidden_layers": 1 << 10,
    "num_attention_heads": 1 << 10,
    "num_key_value_heads": 1 << 10,
    "head_dim": 1 << 12,
    "vocab_size": 1 << 21,
}
"""Upper bounds on a config's size fields, each about 8x the largest released decoder's value
(1M-token contexts, 16k hidden, 128 layers, 256k vocabularies); far beyond what a robot's
drafts need, far below what would exhaust a machine before the weights are even compared."""


def check_config_sizes(config: PretrainedConfig | Mapping[str, object], source: Path) -> None:
    """Raise :class:`ModelConfigError` naming ``source`` and the field if a size is absurd.

    ``config`` may be the raw ``config.json`` mapping, checked before transformers parses it
    (its own validators reject some values with messages that do not name the file). Fields a
    config does not have (``None``) are skipped: not every architecture has all.
    """
    if isinstance(config, Mapping):
        names = _file_field_names(config)

        def get(name: str) -> object:
            return config.get(names.get(name, name))
    else:
        names = dict(getattr(config, "attribute_map", None) or {})

        def get(name: str) -> object:
            return getattr(config, name, None)
    for field, cap in SIZE_CAPS.items():
        value = get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
            shown = field if field not in names else f"{names[field]} ({field})"
            raise ModelConfigError(
                f"{source}: field {shown!r} is {value!r}; it must be an integer in [1, {cap}] "
                "(fix the config or use another model)"
            )
    heads, kv_heads = get("num_attention_heads"), get("num_key_value_heads")
    if heads is not None and kv_heads is not None and kv_heads > heads:
        raise ModelConfigError(f"{source}: field 'num_key_value_heads' is {kv_heads}, more than "
                               f"num_attention_heads {heads}")


def _file_field_names(raw: Mapping[str, object]) -> dict[str, str]:
    """The names ``raw``'s architecture stores the size fields under, where they differ.

    GPT-2 writes ``n_embd``, ``n_layer``, ``n_head``, ``n_positions``; its config class maps the
    common names onto them (``attribute_map``), which is read here so a raw file is checked
    under the names it really uses. An unknown ``model_type`` keeps the common names
    (``AutoConfig`` then refuses it with its own message).
    """
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        return {}
    return dict(getattr(CONFIG_MAPPING[model_type], "attribute_map", None) or {})


def check_config_matches_weights(config: PretrainedConfig, expected: Mapping[str, torch.Size],
                                 tied: set[str], stored: Mapping[str, StoredTensor], source: Path,
                                 converted: frozenset[str] | set[str] = frozenset()) -> None:
    """Raise :class:`ModelConfigError` unless the config's module has exactly the stored tensors.

    ``expected`` is the state dict shapes of the module built from ``config`` (meta device),
    ``tied`` the keys that share another tensor's storage (a file need not store them).
    ``stored`` is keyed by the names the loader gives the tensors
    (:func:`~memspec_ros.core.checkpoint_keys.names_as_loaded`); keys in ``converted`` are made
    by merging or splitting stored tensors, so only their presence is checked.
    """
    missing = [k for k in expected if k not in stored and k not in tied]
    unexpected = [k for k in stored if k not in expected]
    wrong = [k for k in expected if k in stored and k not in converted and tuple(expected[k]) != stored[k].shape]
    if not (missing or unexpected or wrong):
        return
    details = [f"{k} is {list(expected[k])} by the config but {list(stored[k].shape)} in the weights"
               for k in wrong[:3]]
    if missing:
        details.append(f"the config has tensors the weights lack ({', '.join(missing[:3])})")
    if unexpected:
        details.append(f"the weights have tensors the config lacks ({', '.join(unexpected[:3])})")
    raise ModelConfigError(
        f"{source / 'config.json'} does not describe the weights in {source}: {'; '.join(details)}. "
        f"Suspect fields: {_suspects(config, expected, stored, wrong, missing, unexpected)}"
    )


def _suspects(config: PretrainedConfig, expected: Mapping[str, torch.Size], stored: Mapping[str, StoredTensor],
              wrong: list[str], missing: list[str], unexpected: list[str]) -> str:
    """Size fields whose values explain the mismatch (a dimension equal to the field's value)."""
    fields = {f: getattr(config, f, None) for f in SIZE_CAPS}
    suspects: list[str] = []
    for key in wrong:
        for got, want in zip(expected[key], stored[key].shape, strict=False):
            if got != want:
                suspects += [f for f, v in fields.items() if v == got and f not in suspects]
    if (missing or unexpected) and "num_hidden_layers" in fields and "num_hidden_layers" not in suspects:
        suspects.append("num_hidden_layers")
    if not suspects:
        return "the architecture itself (model_type / architectures)"
    return ", ".join(f"{f}={fields[f]}" for f in suspects)
