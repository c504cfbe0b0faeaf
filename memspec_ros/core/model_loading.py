"""Loading tokenizers, targets and drafts from local directories, safely.

Why so strict:
  * Weights come only from ``*.safetensors``. Pickle-based checkpoints (``.bin``, ``.pt``,
    ``.pkl``...) can run arbitrary code when unpickled; a robot should never do that with a
    file it was merely pointed at. A directory offering only those is refused, with a
    message that says so, instead of being loaded "just this once".
  * ``trust_remote_code=False`` and ``local_files_only=True`` always: no code from the
    model directory, no network.
  * ``allowed_roots`` confines loading to known directories (after resolving symlinks and
    ``..``), because model paths arrive as ROS parameters and requests.

Besides the usual ``from_pretrained`` path, this module exposes the two halves a background
loader needs to control I/O itself (e.g. to emulate an edge device's slow storage):
:func:`build_empty_model` and :func:`load_state_from_bytes`. :func:`weights_nbytes` reads the
size of a model from the safetensors header without touching the tensor data, and
:func:`inspect_footprint` what it will occupy once loaded, after checking its config.

Configs are checked before anything is built from them (:mod:`memspec_ros.core.config_sanity`):
sizes under documented caps, and the module the config describes must have exactly the stored
tensors, so a tampered ``config.json`` is an error naming the file and field, not an
out-of-memory kill or a silently half-random model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TokenizersBackend,
)
from transformers.initialization import no_init_weights
from transformers.utils import logging as hf_logging

from memspec_ros.core.checkpoint_keys import names_as_loaded
from memspec_ros.core.config_sanity import check_config_sizes
from memspec_ros.core.errors import (
    ModelLoadError,
    UnsafeModelFileError,
    VocabularyMismatchError,
)
from memspec_ros.core.model_build_lock import BUILD_LOCK
from memspec_ros.core.model_footprint import ModelFootprint, model_footprint
from memspec_ros.core.safetensors_format import read_stored_tensors, tensor_views
from memspec_ros.core.token_map import TOKEN_MAP_FILE

PathArg = str | PathLike[str]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
"""Weight-file suffixes that imply pickle deserialisation; never loaded."""

_SPECIAL_TOKEN_ATTRS = ("bos_token", "eos_token", "unk_token", "pad_token")

hf_logging.disable_progress_bar()


def configure_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count (process-wide) when ``threads`` is given.

    Small models at batch 1 are dominated by per-op overhead, where extra threads often
    cost more in synchronisation than they gain; callers pick the count explicitly.
    """
    if threads is None:
        return
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)


def resolve_model_dir(path: PathArg, allowed_roots: Sequence[PathArg] | None = None) -> Path:
    """Resolve ``path`` to an existing directory, confined to ``allowed_roots`` if given.

    The check is done on the fully resolved path (symlinks followed, ``..`` collapsed), so
    neither ``root/../elsewhere`` nor a symlink pointing out of a root gets through.
    """
    raw = Path(path).expanduser()
    try:
        resolved = raw.resolve(strict=True)
    except (FileNotFoundError, RuntimeError) as exc:
        raise ModelLoadError(f"model directory {str(raw)!r} does not exist") from exc
    if allowed_roots is not None:
        roots = [Path(r).expanduser().resolve() for r in allowed_roots]
        if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
            raise ModelLoadError(
                f"model path {str(raw)!r} resolves to {str(resolved)!r}, which is outside the "
                f"allowed roots {[str(r) for r in roots]}; refusing to load it"
            )
    if not resolved.is_dir():
        raise ModelLoadError(f"model path {str(resolved)!r} is not a directory")
    return resolved


def weight_files(model_dir: PathArg) -> list[Path]:
    """Return the safetensors weight files of a model directory, as ``from_pretrained`` picks them.

    ``model.safetensors``, else the shards ``model.safetensors.index.json`` lists, else every
    ``*.safetensors`` file but a subset draft's token map. Why not simply every file: Mistral's
    repositories ship ``consolidated.safetensors`` (their own format) beside the transformers
    shards, and a draft folder may hold ``token_map.safetensors``; counted as weights, either
    makes the config check refuse a good model.

    Raises:
        UnsafeModelFileError: only pickle-based weight files are present.
        ModelLoadError: no weight files at all, or an index naming a missing shard.
    """
    directory = Path(model_dir)
    if (directory / "model.safetensors").is_file():
        return [directory / "model.safetensors"]
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted({str(f) for f in json.loads(index.read_text())["weight_map"].values()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelLoadError(f"{index} is not a readable shard index ({exc})") from exc
        outside = [s for s in shards if Path(s).name != s]  # a shard is a file of this folder, nothing else
        if outside:
            raise ModelLoadError(f"{index} names shards outside its folder: {', '.join(outside[:3])}")
        missing = [s for s in shards if not (directory / s).is_file()]
        if missing:
            raise ModelLoadError(f"{index} names shards that are missing: {', '.join(missing[:3])}")
        return [directory / s for s in shards]
    safe = sorted(p for p in directory.glob("*.safetensors") if p.name != TOKEN_MAP_FILE)
    if safe:
        return safe
    pickled = sorted(p.name for p in directory.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES)
    if pickled:
        raise UnsafeModelFileError(
            f"{str(directory)!r} only has pickle-based weights ({', '.join(pickled)}). Loading "
            "them could execute arbitrary code, so memspec_ros only loads *.safetensors; "
            "convert the checkpoint (load it once and save_pretrained(folder): safetensors is the default)"
        )
    raise ModelLoadError(f"{str(directory)!r} contains no *.safetensors weight file")


def weights_nbytes(model_dir: PathArg, allowed_roots: Sequence[PathArg] | None = None) -> int:
    """Bytes of tensor data a model stores, read from the safetensors headers only.

    This is what a loader has to move from storage (the load's transient); what the model
    occupies once loaded is :func:`inspect_footprint`'s ``resident_bytes``.
    """
    directory = resolve_model_dir(model_dir, allowed_roots)
    return sum(t.nbytes for t in read_stored_tensors(weight_files(directory)).values())


def inspect_footprint(model_dir: PathArg, *, dtype: torch.dtype = torch.float32,
                      allowed_roots: Sequence[PathArg] | None = None) -> ModelFootprint:
    """Check a model's config against its weights and size it loaded in ``dtype``.

    Reads ``config.json`` and the safetensors headers only; the module is built on the meta
    device. Raises ``ModelConfigError`` (a ``ModelLoadError``) naming the file and field of an
    absurd or mismatched config.
    """
    directory = resolve_model_dir(model_dir, allowed_roots)
    stored = read_stored_tensors(weight_files(directory))
    return model_footprint(load_config(directory), stored, directory, dtype)


GENERIC_TOKENIZER_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"})
"""``tokenizer_class`` values that mean "the pipeline in tokenizer.json, as it is"."""


def load_tokenizer(
    path: PathArg, *, allowed_roots: Sequence[PathArg] | None = None
) -> PreTrainedTokenizerBase:
    """Load the tokenizer stored in ``path`` (no remote code, no network).

    A folder whose ``tokenizer_config.json`` names the generic class (what saving a tokenizer
    trained with the ``tokenizers`` library writes, and what Llama 3 ships) is loaded exactly as
    its ``tokenizer.json`` says. Why not ``AutoTokenizer`` there: transformers 5 then picks the
    class of the model's family from ``config.json`` (``Qwen2Tokenizer`` for a Qwen2 target),
    and that class rebuilds its own normaliser, pre-tokeniser and decoder over the file's
    vocabulary: a Qwen2 target with its own SentencePiece-style tokenizer was served one token
    per character with the spaces lost, text it was never trained on.
    """
    directory = resolve_model_dir(path, allowed_roots)
    try:
        if (directory / "tokenizer.json").is_file() and _tokenizer_class(directory) in GENERIC_TOKENIZER_CLASSES:
            return TokenizersBackend.from_pretrained(str(directory), local_files_only=True)
        return AutoTokenizer.from_pretrained(
            str(directory), local_files_only=True, trust_remote_code=False
        )
    except Exception as exc:
        raise ModelLoadError(f"could not load a tokenizer from {str(directory)!r}: {str(exc).rstrip('.')}"
                             f"{_sentencepiece_hint(directory)}") from exc


def _sentencepiece_hint(directory: Path) -> str:
    """What to do when a SentencePiece-only tokenizer cannot be converted here (else empty).

    Such a folder (``tokenizer.model``, no ``tokenizer.json``: OpenLLaMA, many Llama 2
    fine-tunes) is converted on load, which needs ``sentencepiece`` and ``protobuf``; without
    them transformers tries its other readers and reports the last one's complaint (tiktoken).
    """
    import importlib.util

    def importable(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # its parent package is missing
            return False

    if (directory / "tokenizer.json").is_file() or not (directory / "tokenizer.model").is_file():
        return ""
    missing = [package for package, module in (("sentencepiece", "sentencepiece"), ("protobuf", "google.protobuf"))
               if not importable(module)]
    if not missing:
        return ""
    return (f". This tokenizer is a SentencePiece model (tokenizer.model, no tokenizer.json); converting it "
            f"needs {' and '.join(missing)}: `pip install {' '.join(missing)}` (requirements.txt lists them), or "
            "write its tokenizer.json once where they are installed: AutoTokenizer.from_pretrained(folder)"
            ".save_pretrained(folder)")


def _tokenizer_class(directory: Path) -> str | None:
    """``tokenizer_class`` from ``tokenizer_config.json``; None if absent or unreadable."""
    try:
        value = json.loads((directory / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def load_config(path: PathArg, *, allowed_roots: Sequence[PathArg] | None = None) -> PretrainedConfig:
    """Load a model's ``config.json`` (cheap; lets a loader build the module before reading weights)."""
    directory = resolve_model_dir(path, allowed_roots)
    raw = _raw_config(directory)
    if raw is not None:
        check_config_sizes(raw, directory / "config.json")
    try:
        config = AutoConfig.from_pretrained(str(directory), local_files_only=True, trust_remote_code=False)
    except Exception as exc:
        raise ModelLoadError(f"could not read the model config in {str(directory)!r}: {exc}") from exc
    check_config_sizes(config, directory / "config.json")
    return config


def _raw_config(directory: Path) -> dict | None:
    """``config.json`` as plain JSON, or None when absent or unparsable (AutoConfig then says why)."""
    try:
        raw = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def load_causal_lm(
    path: PathArg,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    threads: int | None = None,
    allowed_roots: Sequence[PathArg] | None = None,
) -> PreTrainedModel:
    """Load a causal language model (target or draft) from a local safetensors directory.

    Weights stored in bf16/fp16 are converted to ``dtype``; the model is returned in eval
    mode on ``device``.
    """
    configure_threads(threads)
    directory = resolve_model_dir(path, allowed_roots)
    # Refuses pickle-only / empty directories and configs that do not describe the weights
    # (from_pretrained would randomly initialise what the file lacks) before any allocation.
    inspect_footprint(directory, dtype=dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(directory),
            dtype=dtype,
            local_files_only=True,
            trust_remote_code=False,
            use_safetensors=True,
        )
    except Exception as exc:
        raise ModelLoadError(f"could not load a causal LM from {str(directory)!r}: {exc}") from exc
    return model.to(device).eval()


def check_vocab_compatible(
    target_tokenizer: PreTrainedTokenizerBase,
    draft_tokenizer: PreTrainedTokenizerBase,
    draft_name: str,
) -> None:
    """Raise :class:`VocabularyMismatchError` naming ``draft_name`` unless the vocabularies match.

    Compares the full token -> id map (added tokens included) and the special tokens, since
    a draft that disagrees on either would propose ids that mean something else to the target.
    """
    target_vocab = target_tokenizer.get_vocab()
    draft_vocab = draft_tokenizer.get_vocab()
    if target_vocab != draft_vocab:
        if len(target_vocab) != len(draft_vocab):
            reason = f"vocabulary size {len(draft_vocab)} != target's {len(target_vocab)}"
        else:
            differing = sorted(
                tok for tok in set(target_vocab) | set(draft_vocab)
                if target_vocab.get(tok) != draft_vocab.get(tok)
            )
            examples = ", ".join(
                f"{tok!r}: draft {draft_vocab.get(tok)} vs target {target_vocab.get(tok)}"
                for tok in differing[:3]
            )
            reason = f"{len(differing)} tokens map to different ids (e.g. {examples})"
        raise VocabularyMismatchError(draft_name, reason)
    for attr in _SPECIAL_TOKEN_ATTRS:
        target_special = getattr(target_tokenizer, attr, None)
        draft_special = getattr(draft_tokenizer, attr, None)
        if str(target_special) != str(draft_special):
            raise VocabularyMismatchError(
                draft_name, f"{attr} is {draft_special!r} but the target's is {target_special!r}"
            )


def load_draft_model(
    path: PathArg,
    target_tokenizer: PreTrainedTokenizerBase,
    *,
    name: str | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    allowed_roots: Sequence[PathArg] | None = None,
) -> PreTrainedModel:
    """Load a draft model after checking that its tokenizer matches the target's.

    ``name`` (default: the directory name) is what error messages call the draft.
    """
    directory = resolve_model_dir(path, allowed_roots)
    draft_name = name or directory.name
    check_vocab_compatible(target_tokenizer, load_tokenizer(directory), draft_name)
    return load_causal_lm(directory, dtype=dtype, device=device)


def build_empty_model(
    config: PretrainedConfig,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> PreTrainedModel:
    """Build a model from its config with *uninitialised* weights, ready for a state load.

    Random initialisation would cost ~10x more than the allocation itself and is wasted
    when the weights are about to be overwritten. Config-derived buffers (e.g. rotary
    frequencies) are still computed normally.
    """
    with BUILD_LOCK, no_init_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, trust_remote_code=False)
    return model.to(device).eval()


def load_state_from_bytes(model: PreTrainedModel,
                          blobs: bytes | bytearray | Iterable[bytes | bytearray]) -> PreTrainedModel:
    """Copy weights from raw safetensors file contents (one blob per shard) into ``model``.

    The caller reads the files itself (at whatever pace it wants); this function only
    parses and copies, converting dtypes as needed. The tensors are views of the blobs, not
    copies, so the load holds the blobs and the module and nothing else of that size. Every
    parameter and persistent buffer must be covered except weights tied to another (e.g.
    ``lm_head`` tied to the embeddings), which are re-tied afterwards. Stored names are
    translated as ``from_pretrained`` translates them (Pythia's ``embed_out``, a missing base
    prefix: :mod:`memspec_ros.core.checkpoint_keys`).

    Raises:
        ModelLoadError: a blob is not valid safetensors, tensors are missing/unexpected, or
            the checkpoint needs tensors merged or split on load (fused experts), which only
            ``from_pretrained`` does.
    """
    if isinstance(blobs, (bytes, bytearray, memoryview)):
        blobs = [blobs]
    stored: dict[str, torch.Tensor] = {}
    for blob in blobs:
        stored.update(tensor_views(blob))
    expected = {k: t.shape for k, t in model.state_dict().items()}
    names, converted = names_as_loaded(model, expected, stored)
    if converted:
        stored.clear()
        raise ModelLoadError(f"weights do not fit the model: {sorted(converted)[:3]} must be built from several "
                             "stored tensors (e.g. fused experts), which the background loader does not do; "
                             "use a dense model as a draft (a target may be of any kind)")
    state = {name: stored[key] for name, key in names.items()}
    stored.clear()
    try:
        with torch.no_grad():
            result = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # shape mismatches
        raise ModelLoadError(f"weights do not fit the model: {exc}") from exc
    finally:
        state.clear()  # drop the views so the caller's blobs can be freed right away
    tied = set(getattr(model, "all_tied_weights_keys", {}) or {})
    missing = [key for key in result.missing_keys if key not in tied]
    if missing or result.unexpected_keys:
        raise ModelLoadError(
            f"weights do not fit the model: missing {missing[:5]}, unexpected "
            f"{result.unexpected_keys[:5]}"
        )
    model.tie_weights()
    return model.eval()
