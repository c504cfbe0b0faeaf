"""Choosing the draft size this machine can afford for this target.

Speculative decoding pays k draft steps for one target verification of k + 1 tokens; it only
wins when a draft step is much cheaper than that verification. The rule used here: the
target's (k+1)-token verify must cost at least :data:`MIN_RATIO` (8) draft steps, measured on
the machine the build runs on (the node runs there too, or on one like it), with the forward
each side really uses (the target's transformers forward with a KV cache; the draft's lean
proposer forward). Among the candidate shapes, largest first, the first that meets the rule is
chosen: a larger draft accepts more, and the rule bounds what it may cost. If none meets it
(a target so small that even the smallest draft is not 8x cheaper) the smallest is chosen and
the report says speculation will barely pay; ``evaluate`` then shows it in its verdicts.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from transformers import LlamaForCausalLM, PreTrainedModel

from memspec_ros.builder.draft_architecture import Shape, llama_config
from memspec_ros.builder.step_timing import draft_step_ms, step_ms
from memspec_ros.builder.target_folder import TargetInfo

MIN_RATIO = 8.0

CANDIDATES: tuple[Shape, ...] = (
    Shape(hidden=512, layers=4, heads=8, kv_heads=8, intermediate=1376),
    Shape(hidden=384, layers=4, heads=6, kv_heads=6, intermediate=1024),
    Shape(hidden=320, layers=3, heads=5, kv_heads=5, intermediate=864),
    Shape(hidden=256, layers=3, heads=4, kv_heads=4, intermediate=688),
    Shape(hidden=256, layers=2, heads=4, kv_heads=4, intermediate=688),
    Shape(hidden=192, layers=2, heads=4, kv_heads=4, intermediate=512),
    Shape(hidden=160, layers=2, heads=4, kv_heads=4, intermediate=432),
    Shape(hidden=128, layers=2, heads=4, kv_heads=4, intermediate=352),
    Shape(hidden=96, layers=2, heads=3, kv_heads=3, intermediate=256),
    Shape(hidden=64, layers=2, heads=2, kv_heads=2, intermediate=176),
    Shape(hidden=48, layers=1, heads=2, kv_heads=2, intermediate=128),
)
"""Largest first. Shallow (per-layer overhead dominates a small model's step on a CPU)."""


@dataclass(frozen=True)
class SizingResult:
    """The measurement and the choice, as printed and stamped."""

    k: int
    target_verify_ms: float
    """The target's forward of k + 1 tokens on a 96-token KV cache."""
    target_step_ms: float
    """The target's 1-token step (target-only decoding's cost per token)."""
    measured: list[dict[str, float | str]]
    """Per candidate tried: shape label, draft step ms and verify / step ratio."""
    chosen: dict[str, int | bool]
    draft_step_ms: float
    """The chosen draft's 1-token step."""
    ratio: float
    ratio_met: bool

    @property
    def shape(self) -> Shape:
        return Shape(**self.chosen)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> SizingResult:
        return cls(**data)

    def summary(self) -> str:
        verdict = "meets" if self.ratio_met else "does NOT meet"
        return (f"target verify of {self.k + 1} tokens {self.target_verify_ms:.2f} ms, 1-token step "
                f"{self.target_step_ms:.2f} ms; chosen draft {self.shape.label}: step {self.draft_step_ms:.2f} ms, "
                f"ratio {self.ratio:.1f}x ({verdict} the {MIN_RATIO:.0f}x rule)")


def _draft(shape: Shape, target: TargetInfo, vocab_size: int | None) -> PreTrainedModel:
    config = llama_config(shape, vocab_size=vocab_size or target.logit_width,
                          max_positions=min(target.max_positions, 4096),
                          bos_token_id=target.bos_token_id, eos_token_id=target.eos_token_id,
                          pad_token_id=target.pad_token_id)
    return LlamaForCausalLM(config).eval()


def choose_draft_shape(target_model: PreTrainedModel, target: TargetInfo, k: int, *,
                       candidates: tuple[Shape, ...] = CANDIDATES, reps: int = 20,
                       vocab_size: int | None = None) -> SizingResult:
    """Measure the target and candidate drafts; return the largest draft meeting the rule.

    ``vocab_size`` is the drafts' vocabulary (default: the target's; smaller for subset drafts,
    whose steps are cheaper, so a larger shape may meet the rule)."""
    # On a shared machine a burst of other work inflates a measurement; the target is measured
    # before and after the candidates and the lower figure kept, which can only make the rule stricter.
    verify = step_ms(target_model, k + 1, reps=reps)
    single = step_ms(target_model, 1, reps=reps)
    draft_ms: list[tuple[Shape, float]] = []
    for shape in candidates:
        torch.manual_seed(0)
        ms = draft_step_ms(_draft(shape, target, vocab_size), reps=reps)
        draft_ms.append((shape, ms))
        print(f"[sizing] draft {shape.label}: step {ms:.3f} ms, target verify / step = {verify / ms:.1f}x",
              flush=True)
        if verify / ms >= MIN_RATIO:
            break
    verify = min(verify, step_ms(target_model, k + 1, reps=reps))
    measured: list[dict[str, float | str]] = []
    chosen, ratio, chosen_ms = candidates[-1], 0.0, 0.0
    for shape, ms in draft_ms:
        measured.append({"shape": shape.label, "draft_step_ms": round(ms, 4), "ratio": round(verify / ms, 2)})
        chosen, ratio, chosen_ms = shape, verify / ms, ms
        if ratio >= MIN_RATIO:
            break
    return SizingResult(k=k, target_verify_ms=round(verify, 4), target_step_ms=round(single, 4),
                        measured=measured, chosen=asdict(chosen), draft_step_ms=round(chosen_ms, 4),
                        ratio=round(ratio, 2),
                        ratio_met=ratio >= MIN_RATIO)


def fixed_shape(shape: Shape, target_model: PreTrainedModel, target: TargetInfo, k: int,
                reps: int = 20, vocab_size: int | None = None) -> SizingResult:
    """The user chose the shape (``--draft-shape``): measure it anyway, so the report says the ratio."""
    return choose_draft_shape(target_model, target, k, candidates=(shape,), reps=reps, vocab_size=vocab_size)
