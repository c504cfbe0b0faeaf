"""How many bytes a model occupies once loaded, known before a byte of it is loaded.

The runtime's memory budget is only a bound if it counts what a resident draft really holds:
the module's parameters and buffers *in the compute dtype* (the zoo stores bf16 and computes
in fp32: twice the file), the draft forward's rotary cos/sin tables and its KV cache at full
context (both sized by the position limit, ``max_position_embeddings`` in most configs). The
file's own size says none of that.

The module part is measured, not estimated: the model is built from its config on the meta
device (shapes and dtypes, no storage), which is also where the config is checked against the
weights (:mod:`memspec_ros.core.config_sanity`), so an absurd or tampered config is rejected
before anything is allocated from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel
from transformers.initialization import no_init_weights

from memspec_ros.core.checkpoint_keys import names_as_loaded
from memspec_ros.core.config_sanity import check_config_matches_weights, check_config_sizes
from memspec_ros.core.draft_forward import LlamaDraftForward
from memspec_ros.core.errors import ModelConfigError
from memspec_ros.core.model_build_lock import BUILD_LOCK
from memspec_ros.core.position_limit import context_bound
from memspec_ros.core.safetensors_format import StoredTensor


@dataclass(frozen=True)
class ModelFootprint:
    """Bytes of one loaded draft, by where they live."""

    stored_bytes: int
    """Tensor bytes in the safetensors files: what a load reads, and its transient."""
    module_bytes: int
    """Parameters and buffers of the built module in the compute dtype (tied weights once)."""
    rope_table_bytes: int
    """The draft forward's precomputed rotary cos/sin tables (0 for the generic forward)."""
    kv_cache_bytes: int
    """The draft's KV cache at its position limit (:func:`~memspec_ros.core.position_limit.context_bound`)."""
    converted_tensors: int = 0
    """Module tensors transformers builds by merging or splitting stored ones (fused experts):
    ``from_pretrained`` does that, the runtime's byte-level draft loader does not."""

    @property
    def resident_bytes(self) -> int:
        """Everything a resident draft can hold: what the memory budget counts."""
        return self.module_bytes + self.rope_table_bytes + self.kv_cache_bytes

    @property
    def load_peak_bytes(self) -> int:
        """Upper bound of a load's memory: the module, its tables and the file bytes read.

        The KV cache is not allocated by a load (it grows while decoding), so it is left out.
        """
        return self.module_bytes + self.rope_table_bytes + self.stored_bytes


def meta_model(config: PretrainedConfig, dtype: torch.dtype) -> PreTrainedModel:
    """The module ``config`` builds, on the meta device: every shape and dtype, no storage.

    Call :func:`~memspec_ros.core.config_sanity.check_config_sizes` first: meta tensors cost
    nothing, but each layer is still a Python object.
    """
    with BUILD_LOCK, no_init_weights(), torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=dtype, trust_remote_code=False)


def tied_keys(model: PreTrainedModel) -> set[str]:
    """State-dict keys that share another tensor's storage (a file stores them once)."""
    return set(getattr(model, "all_tied_weights_keys", {}) or {})


def model_footprint(config: PretrainedConfig, stored: dict[str, StoredTensor], source: Path,
                    dtype: torch.dtype = torch.float32) -> ModelFootprint:
    """Check ``config`` against caps and the ``stored`` tensors, then size the loaded draft.

    Raises:
        ModelConfigError: a size field is absurd, or the config does not describe the weights.
    """
    check_config_sizes(config, source)
    model = meta_model(config, dtype)
    expected = {k: t.shape for k, t in model.state_dict().items()}
    names, converted = names_as_loaded(model, expected, stored)
    as_loaded = {name: stored[key] for name, key in names.items()}
    check_config_matches_weights(config, expected, tied_keys(model), as_loaded, source, converted)
    module = sum(t.numel() * t.element_size() for t in model.parameters())
    module += sum(t.numel() * t.element_size() for t in model.buffers())
    positions = context_bound(config)
    head_dim = _head_dim(config)
    element = torch.empty((), dtype=dtype).element_size()
    rope = 2 * positions * head_dim * element if LlamaDraftForward.supports(model) else 0
    kv_heads = int(getattr(config, "num_key_value_heads", None) or getattr(config, "num_attention_heads", 0) or 0)
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    unknown = [name for name, value in (("num_hidden_layers", layers),
                                        ("num_attention_heads", kv_heads), ("head_dim", head_dim)) if not value]
    if unknown:  # a KV cache sized 0 would let the budget admit a draft that does not fit
        raise ModelConfigError(
            f"{source / 'config.json'}: cannot size the KV cache of this {config.model_type!r} model, "
            f"the config gives no {', '.join(unknown)} (under this or its architecture's own name)"
            + (". A model without attention heads (a state-space model such as Mamba) keeps a recurrent "
               "state that cannot take back rejected draft tokens: it cannot serve speculative decoding"
               if "num_attention_heads" in unknown else ""))
    # Every layer counted at full context: an upper bound for sliding-window layers, which hold less.
    kv = 2 * layers * kv_heads * head_dim * positions * element
    return ModelFootprint(stored_bytes=sum(t.nbytes for t in stored.values()), module_bytes=module,
                          rope_table_bytes=rope, kv_cache_bytes=kv, converted_tensors=len(converted))


def _head_dim(config: PretrainedConfig) -> int:
    explicit = getattr(config, "head_dim", None)
    if explicit:
        return int(explicit)
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    return int(hidden) // int(heads) if heads and hidden else 0
