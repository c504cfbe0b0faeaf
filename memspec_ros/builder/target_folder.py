"""The user's target folder: refusing what cannot be served, and placing it in the output.

What is refused, each with a message that says why and what to do:

* no ``config.json`` or no ``*.safetensors`` weights (pickle checkpoints can run code when
  loaded, so the node never loads them; convert with ``save_pretrained``, which writes safetensors);
* models that need ``trust_remote_code``: a config or tokenizer config with ``auto_map``, or a
  ``model_type`` this transformers does not know. Their code would come from the model
  folder, and the node runs with ``trust_remote_code=False`` on principle;
* configs that are not causal language models, and a tokenizer that does not load.

The target is then placed at ``<out>/target`` as hard links to the user's files (no copy, no
extra space; a copy when the output is on another filesystem), because a catalogue's paths must
stay inside its own folder and a symlink would resolve outside it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from memspec_ros.builder.errors import BuildError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "vocab.txt", "merges.txt", "added_tokens.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "chat_template.jinja", "chat_template.json")
"""The files that make up a Hugging Face tokenizer: copied into every draft (verbatim but for
the class name, :func:`pin_tokenizer_class`), so a draft's tokenizer is the target's by
construction."""


@dataclass(frozen=True)
class TargetInfo:
    """What the build needs to know about the target, read once and checked."""

    path: Path
    model_type: str
    logit_width: int
    """Rows of the output layer: every draft's ``vocab_size`` must equal it."""
    hidden_size: int
    max_positions: int
    bos_token_id: int | None
    eos_token_id: int | list[int] | None
    pad_token_id: int | None
    weights_bytes: int
    fingerprint: str
    """Hash of config, tokenizer files and weights (size, head and tail of each file)."""
    stored_dtype: str = "float32"
    """The dtype its weights are saved in (config ``dtype``); drafts are saved in it too when it is
    16-bit, so a bf16 target's catalogue is not padded out by fp32 drafts."""


def check_target_folder(path: Path) -> TargetInfo:
    """Check that ``path`` is a servable target and return its facts; :class:`BuildError` if not."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from memspec_ros.core.errors import ModelLoadError
    from memspec_ros.core.model_loading import load_config, load_tokenizer, weight_files
    from memspec_ros.core.position_limit import context_bound
    from memspec_ros.runtime.model_set_checks import hidden_width, logit_width

    path = path.expanduser().resolve()
    if not path.is_dir():
        raise BuildError(f"target folder {path} does not exist: give the folder of a Hugging Face causal LM "
                         "(config.json, *.safetensors, tokenizer files)")
    raw = _json(path / "config.json", "target config")
    if raw is None:
        raise BuildError(f"target folder {path} has no config.json: it must be a Hugging Face model folder "
                         "(save_pretrained writes one)")
    if "auto_map" in raw:
        raise BuildError(f"target {path} needs trust_remote_code (config.json has auto_map): its model code would "
                         "come from the folder, which memspec_ros never runs; use a model whose architecture "
                         "transformers ships")
    model_type = raw.get("model_type")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise BuildError(f"target {path}: model_type {model_type!r} is not an architecture this transformers "
                         "knows, so it would need trust_remote_code, which memspec_ros refuses; use a model "
                         "transformers ships (or a newer transformers)")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise BuildError(f"target {path}: model_type {model_type!r} is not a causal language model "
                         "(AutoModelForCausalLM cannot load it); the target must generate text")
    tokenizer_config = _json(path / "tokenizer_config.json", "tokenizer config")
    if tokenizer_config is not None and "auto_map" in tokenizer_config:
        raise BuildError(f"target {path}: tokenizer_config.json has auto_map (a tokenizer that needs "
                         "trust_remote_code), which memspec_ros refuses")
    try:
        files = weight_files(path)
    except ModelLoadError as exc:
        raise BuildError(f"target {path} has no *.safetensors weights ({exc}); save it with "
                         "save_pretrained(folder) (safetensors is its default since transformers 4.35)") from None
    try:
        config = load_config(path)
        tok = load_tokenizer(path)
    except ModelLoadError as exc:
        raise BuildError(f"target {path}: {exc}") from None
    text = config.get_text_config()
    positions = context_bound(text)
    eos = tok.eos_token_id if tok.eos_token_id is not None else getattr(text, "eos_token_id", None)
    bos = tok.bos_token_id if tok.bos_token_id is not None else getattr(text, "bos_token_id", None)
    pad = tok.pad_token_id if tok.pad_token_id is not None else getattr(text, "pad_token_id", None)
    if eos is None:
        raise BuildError(f"target {path}: neither its tokenizer nor its config names an end-of-sequence token; "
                         "set eos_token in tokenizer_config.json")
    return TargetInfo(path=path, model_type=str(model_type), logit_width=logit_width(config),
                      hidden_size=hidden_width(config), max_positions=int(positions), bos_token_id=bos,
                      eos_token_id=eos, pad_token_id=pad, weights_bytes=sum(f.stat().st_size for f in files),
                      fingerprint=_fingerprint(path, files, type(tok).__name__),
                      stored_dtype=str(raw.get("dtype") or raw.get("torch_dtype") or "float32"))


def _json(path: Path, what: str) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BuildError(f"{what} {path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BuildError(f"{what} {path} must be a JSON object")
    return data


def _fingerprint(path: Path, weights: list[Path], tokenizer_class: str) -> str:
    """What every build step's inputs key on: the target's files and the tokenizer class they
    load as (a change of how the same files are loaded changes the token arrays: redo them)."""
    h = hashlib.sha256(tokenizer_class.encode())
    for name in ("config.json", *TOKENIZER_FILES):
        if (path / name).is_file():
            h.update(name.encode() + (path / name).read_bytes())
    for f in weights:
        size = f.stat().st_size
        h.update(f"{f.name}:{size}".encode())
        with f.open("rb") as fh:
            h.update(fh.read(1 << 16))
            fh.seek(max(0, size - (1 << 16)))
            h.update(fh.read())
    return h.hexdigest()[:16]


def tokenizer_files(path: Path) -> list[Path]:
    """The target's tokenizer files (what every draft gets a copy of)."""
    return [path / name for name in TOKENIZER_FILES if (path / name).is_file()]


def shares_filesystem(a: Path, b: Path) -> bool:
    """Whether hard links from ``a`` into ``b`` can work (same device); ``b`` may not exist yet."""
    while not b.exists():
        b = b.parent
    return a.stat().st_dev == b.stat().st_dev


def place_target(source: Path, dest: Path) -> str:
    """Put the target's files at ``dest``: hard links where possible, copies otherwise.

    Returns ``"linked"``, ``"copied"`` or ``"in place"`` (``dest`` is ``source``). Only the
    folder's regular files are placed (subfolders are not part of a Hugging Face model).
    """
    if dest.resolve() == source.resolve():
        return "in place"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    how = "linked"
    for f in sorted(source.iterdir()):
        if not f.is_file():
            continue
        try:
            os.link(f, dest / f.name)
        except OSError:
            shutil.copy2(f, dest / f.name)
            how = "copied"
    return how


def pin_tokenizer_class(draft: Path, class_name: str) -> None:
    """Make the draft folder load the tokenizer class the target's folder loads.

    The same tokenizer files do not always load as the same tokenizer: transformers 5 picks
    the class from ``tokenizer_config.json``'s ``tokenizer_class`` and, when that names none,
    from ``config.json``'s ``model_type`` (``load_tokenizer`` reads a folder naming the generic
    class verbatim). A Qwen2 target's tokenizer without a class loads as ``Qwen2Tokenizer``
    (which adds ``<|endoftext|>``) while the same files beside a Llama draft's config load
    without it: one token apart, and the node's vocabulary check refuses the draft. Naming the
    target's class in the draft's copy fixes the class whatever the draft's architecture.
    """
    path = draft / "tokenizer_config.json"
    config = _json(path, "tokenizer config") or {}
    if config.get("tokenizer_class") != class_name:
        config["tokenizer_class"] = class_name
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
