"""Export trained checkpoints as the committed zoo: bf16 safetensors + tokenizer + catalogue.

Weights are stored in bf16 to keep the repository small (the runtime loads them as fp32);
each directory is a self-contained Hugging Face model dir (config, weights, tokenizer), so
``AutoModelForCausalLM`` / ``AutoTokenizer`` load it with ``trust_remote_code=False``.
Also writes the committed held-out documents and prompts used by benchmarks.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml
from transformers import LlamaForCausalLM

from memspec_ros.runtime.catalogue_file import DraftEntry, write_catalogue_file
from training.corpora.build import corpus_path
from training.corpora.split import read_jsonl, write_jsonl
from training.heldout import HELDOUT_DOC_BUDGET, MAX_DOC_CHARS, make_prompts
from training.members import DRAFT_NAMES, TARGET_CHECKPOINT
from training.paths import CHECKPOINT_DIR, DOMAINS, HELDOUT_DIR, ZOO_DIR
from training.tokenizer import CHAT_TEMPLATE, load_tokenizer


def _member_sources() -> dict[str, tuple[Path, str]]:
    """Map zoo name -> (checkpoint to export, domain label)."""
    members = {"target": (CHECKPOINT_DIR / TARGET_CHECKPOINT, "all")}
    for name in DRAFT_NAMES:
        ckpt = CHECKPOINT_DIR / f"distilled-{name}"
        if not (ckpt / "model.safetensors").exists():
            ckpt = CHECKPOINT_DIR / f"draft-{name}"
        members[f"draft-{name}"] = (ckpt, name)
    return members


def export_models() -> list[dict[str, object]]:
    """Write every zoo dir in bf16 and return catalogue entries."""
    tok = load_tokenizer()
    tok.chat_template = CHAT_TEMPLATE  # the robot corpus's dialogue format, for goals that send messages
    entries: list[dict[str, object]] = []
    for name, (ckpt, domain) in _member_sources().items():
        model = LlamaForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
        params = sum(p.numel() for p in model.parameters())
        out = ZOO_DIR / name
        model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        size = (out / "model.safetensors").stat().st_size
        entries.append({
            "name": name, "path": f"models/zoo/{name}", "domain": domain,
            "params": params, "weights_bytes": size, "dtype_on_disk": "bfloat16",
            "hidden_size": model.config.hidden_size, "layers": model.config.num_hidden_layers,
            "source_checkpoint": ckpt.name,
        })
        print(f"[export] {name}: {params / 1e6:.2f}M params, {size / 1e6:.2f} MB", flush=True)
    return entries


def export_heldout() -> None:
    """Write size-capped held-out documents per domain plus the prompt set."""
    HELDOUT_DIR.mkdir(parents=True, exist_ok=True)
    prompts: list[dict[str, str]] = []
    for domain in DOMAINS:
        kept: list[str] = []
        budget = HELDOUT_DOC_BUDGET
        for doc in read_jsonl(corpus_path(domain, "heldout")):
            doc = doc[:MAX_DOC_CHARS]
            if budget - len(doc) < 0:
                break
            kept.append(doc)
            budget -= len(doc)
        write_jsonl(HELDOUT_DIR / f"{domain}.jsonl", kept)
        prompts += [{"domain": domain, "prompt": p} for p in make_prompts(kept)]
    with (HELDOUT_DIR / "prompts.jsonl").open("w", encoding="utf-8") as fh:
        for row in prompts:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def export_all() -> None:
    """Export models, the catalogue file, the build record (zoo.yaml) and held-out data."""
    entries = export_models()
    with (ZOO_DIR / "zoo.yaml").open("w", encoding="utf-8") as fh:
        yaml.safe_dump({"tokenizer": "shared (identical files in every model dir)",
                        "load_dtype": "float32", "models": entries}, fh, sort_keys=False)
    # The predictor is trained after export (scripts/train_predictor.py adds it to the file).
    drafts = [DraftEntry(name=str(e["name"]), path=ZOO_DIR / str(e["name"]), domain=str(e["domain"]))
              for e in entries if e["name"] != "target"]
    predictor = ZOO_DIR / "predictor.safetensors"
    write_catalogue_file(ZOO_DIR, target=ZOO_DIR / "target", drafts=drafts,
                         predictor=predictor if predictor.exists() else None,
                         header="The bundled model set; format: docs/catalogue.md.")
    export_heldout()
