"""A load's peak memory stays within the draft's resident size plus one copy of its file bytes.

Measured with the kernel's RSS high-water mark (``VmHWM``, reset by writing 5 to
``/proc/self/clear_refs``): tracemalloc does not see torch's allocations. Before loads parsed
safetensors as views, a load copied the read buffer into ``bytes`` and parsed that into a
state dict before copying it into the module; for this draft (bf16 file 26.6 MiB, fp32 module
53.3 MiB) that path measured 90.5 MiB. Now the peak is the module plus the file once:
measured 82.2 MiB, bound 86 MiB.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from memspec_ros.core.model_loading import inspect_footprint
from memspec_ros.runtime import BackgroundLoader, Budget, Catalogue, DraftPool, StorageModel, make_materializer

from .rt_tiny_zoo import build_tokenizer

# Page-granular RSS, Python objects made by the load (module tree, proposer) and the
# allocator's own bookkeeping: a few MiB whatever the draft's size, so a fixed 6 MiB.
TOLERANCE_BYTES = 6 * 2**20


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def test_load_peak_is_resident_size_plus_file_bytes(tmp_path: Path) -> None:
    tok = build_tokenizer(tmp_path / "tok")
    config = LlamaConfig(vocab_size=len(tok), hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(tmp_path / "draft-big", safe_serialization=True)
    tok.save_pretrained(tmp_path / "draft-big")
    catalogue = Catalogue.from_dirs({"draft-big": tmp_path / "draft-big"})
    spec = catalogue.get("draft-big")
    assert spec.stored_bytes > 20 * 2**20  # big enough that the tolerance is small next to it
    pool = DraftPool(catalogue, Budget.unlimited())
    loader = BackgroundLoader(pool, make_materializer(catalogue), StorageModel())
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark to the current RSS
        before = _status_kib("VmRSS") * 1024
        assert loader.request("draft-big").wait(60) and pool.resident() == ["draft-big"]
        peak = _status_kib("VmHWM") * 1024 - before
    finally:
        loader.close()
    footprint = inspect_footprint(spec.path)
    bound = footprint.load_peak_bytes + TOLERANCE_BYTES  # module + rotary tables + file bytes once
    print(f"\nload peak {peak / 2**20:.1f} MiB; module {footprint.module_bytes / 2**20:.1f} MiB, "
          f"file {spec.stored_bytes / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB")
    assert peak <= bound
