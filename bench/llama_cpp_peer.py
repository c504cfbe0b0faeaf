"""The reference a robot team would otherwise run: llama.cpp on the model's original GGUF file.

On a CPU, llama.cpp (through llama_ros on a robot) is what decodes a small instruct model today.
It runs the model *as shipped*: the 4-bit GGUF weights with its own kernels, where memspec_ros
serves the same weights de-quantized (``models/smollm2/target``). So its greedy output is not the
target's token for token; the report gives its agreement with the target (the share of the
target's tokens it reproduces before its first difference, per turn) instead of a lossless check.

Two configurations: plain decoding, and llama-cpp-python's own n-gram speculation
(``LlamaPromptLookupDecoding``). Both decode every conversation of a session from the trace's
token ids (the chat rendering memspec_ros decodes), greedily (top-k 1), with the same token limits
and end-of-sequence tokens, and keep llama.cpp's KV cache within a conversation (it reuses the
cached prefix of the next turn's ids by itself).

llama-cpp-python is an optional extra: it has no binary wheel for every platform and builds from
source in about 15 minutes on 2 cores (``make llama-cpp``). Without it the benchmark reports
"not installed" for both configurations, never a silent omission.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

from .measures import RunMeasure
from .trace_cache import DialogueTraces

LLAMA_CPP = "llama-cpp"
LLAMA_CPP_PROMPT_LOOKUP = "llama-cpp-prompt-lookup"
CONFIGS = (LLAMA_CPP, LLAMA_CPP_PROMPT_LOOKUP)
INSTALL_HINT = "pip install llama-cpp-python==0.3.36 (builds from source, ~15 minutes on 2 cores): make llama-cpp"


def installed() -> bool:
    """Whether llama-cpp-python can be imported here."""
    return importlib.util.find_spec("llama_cpp") is not None


def version() -> str | None:
    """llama-cpp-python's version, if installed."""
    if not installed():
        return None
    import llama_cpp

    return getattr(llama_cpp, "__version__", "?")


@dataclass
class LlamaCppPeer:
    """One llama.cpp model, plain or with prompt-lookup speculation."""

    gguf: Path
    threads: int
    prompt_lookup_tokens: int = 0
    """``num_pred_tokens`` of ``LlamaPromptLookupDecoding``; 0: plain decoding."""
    n_ctx: int = 4096

    def __post_init__(self) -> None:
        from llama_cpp import Llama

        draft = None
        if self.prompt_lookup_tokens:
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            draft = LlamaPromptLookupDecoding(num_pred_tokens=self.prompt_lookup_tokens)
        self.llm = Llama(model_path=str(self.gguf), n_ctx=self.n_ctx, n_threads=self.threads,
                         n_threads_batch=self.threads, draft_model=draft, verbose=False)

    @property
    def name(self) -> str:
        return LLAMA_CPP_PROMPT_LOOKUP if self.prompt_lookup_tokens else LLAMA_CPP

    def _generate(self, ids: list[int], max_new_tokens: int, eos: set[int]) -> list[int]:
        out: list[int] = []
        for token in self.llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
            out.append(int(token))
            if token in eos or len(out) >= max_new_tokens:
                break
        return out

    def run(self, trace: DialogueTraces, eos: set[int]) -> RunMeasure:
        """Every conversation of the session; time, tokens and agreement with the target's output."""
        wall, tokens, agreed = 0.0, 0, 0
        for conv in trace.conversations:
            self.llm.reset()
            for turn, context in conv.turn_contexts():  # continued with the target's answers
                start = time.perf_counter()
                out = self._generate(context, turn.max_new_tokens, eos)
                wall += time.perf_counter() - start
                tokens += len(out)
                agreed += _common_prefix(out, turn.output_ids)
        target_tokens = sum(len(t.output_ids) for t in trace.turns)
        return RunMeasure(session=trace.name, tokens=tokens, wall_s=wall,
                          agreement=agreed / target_tokens if target_tokens else None)

    def warm_up(self, ids: list[int], eos: set[int]) -> None:
        """One short untimed call: llama.cpp builds its compute graph on first use."""
        self.llm.reset()
        self._generate(ids, 4, eos)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
