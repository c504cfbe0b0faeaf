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

import statistics
from dataclasses import asdict, dataclass

import torch
from transformers import LlamaForCausalLM, PreTrainedModel

from memspec_ros.builder.draft_architecture import Shape, llama_config
from memspec_ros.builder.machine_load import load_average
from memspec_ros.builder.step_timing import draft_timer, target_timer
from memspec_ros.builder.target_folder import TargetInfo

MIN_RATIO = 8.0
UNSTABLE_SPREAD = 0.25
"""Above this relative spread between rounds the machine's speed moved too much to trust a sizing."""

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
    spread: float = 0.0
    """The largest interquartile spread of any figure over its rounds, relative to its median."""
    unstable: bool = False
    """The spread exceeded :data:`UNSTABLE_SPREAD`: the machine was busy and the choice may be off."""
    load_average: float = 0.0
    """The 1-minute load average when the measurement ended."""
    threads: int = 0
    """torch threads the steps were timed at (0: a sizing recorded before this was); the node warns
    when it decodes at another count, where the draft-to-verification ratio differs."""

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


WINDOW = 4
"""Candidates timed interleaved: the ones around the rule's boundary (all of them when this few)."""


def choose_draft_shape(target_model: PreTrainedModel, target: TargetInfo, k: int, *,
                       candidates: tuple[Shape, ...] = CANDIDATES, rounds: int = 7, reps: int = 8,
                       vocab_size: int | None = None) -> SizingResult:
    """Measure the target and the candidate drafts; return the largest draft meeting the rule.

    Why this way: on a shared machine the speed changes for seconds at a time, and a build that
    measured its candidates one after the other once chose a 96x2 draft because the larger shapes
    happened to fall into busy spells (256x3 2.9 ms, 192x2 9.5 ms, 128x2 4.2 ms, 96x2 0.56 ms).

    1. A quick screen times each candidate once, one at a time (one model in memory at a time: a
       150k-vocabulary candidate is hundreds of MB), to find the rule's boundary.
    2. The :data:`WINDOW` candidates around it, with the target's verification and 1-token step,
       are timed in ``rounds`` rounds, every one once per round (``reps`` calls, their median) in a
       rotating order, so a busy spell lands on all of them. A figure is the lower quartile of its
       rounds (other work only ever adds time).
    3. Step time grows with a draft's size, so a figure far above the robust line through all of
       them (step ms against parameters, Siegel's repeated-median line) is an outlier:
       more than 1.5x its fitted value is replaced by that value. A larger shape that still caught a
       busy spell in most rounds therefore cannot by itself hand the choice to a smaller one. A
       smaller shape's figure is then never above a larger one's.

    The rounds' spread is reported; above :data:`UNSTABLE_SPREAD` (or with an outlier) the result
    is flagged ``unstable`` and the build warns (``--resize`` measures again).
    ``vocab_size`` is the drafts' vocabulary (default: the target's; smaller for subset drafts,
    whose steps are cheaper, so a larger shape may meet the rule)."""
    verify_timer = target_timer(target_model, k + 1)
    screen_verify = verify_timer(reps)
    window = _window(candidates, screen_verify, lambda shape: draft_timer(_draft(shape, target, vocab_size))(reps))
    timers = {"verify": verify_timer, "step": target_timer(target_model, 1)}
    for shape in window:
        torch.manual_seed(0)
        timers[shape.label] = draft_timer(_draft(shape, target, vocab_size))
    samples: dict[str, list[float]] = {name: [] for name in timers}
    labels = [s.label for s in window]
    for r in range(rounds):
        shift = r % len(labels)
        for name in ["verify", "step", *labels[shift:], *labels[:shift]]:
            samples[name].append(timers[name](reps))
    low = {name: _quartile(v) for name, v in samples.items()}
    spread = {name: _spread(v) for name, v in samples.items()}
    sizes = [shape.parameters(vocab_size or target.logit_width) for shape in window]
    robust, outliers = _without_outliers(sizes, [low[label] for label in labels])
    fitted = _monotone(robust)  # the window is largest first
    verify = low["verify"]
    measured: list[dict[str, float | str]] = []
    for shape, ms, raw in zip(window, fitted, (low[label] for label in labels), strict=True):
        measured.append({"shape": shape.label, "draft_step_ms": round(ms, 4), "measured_ms": round(raw, 4),
                         "spread": round(spread[shape.label], 3), "ratio": round(verify / ms, 2)})
    chosen, ratio, chosen_ms = window[-1], verify / fitted[-1], fitted[-1]
    for shape, ms in zip(window, fitted, strict=True):
        if verify / ms >= MIN_RATIO:
            chosen, ratio, chosen_ms = shape, verify / ms, ms
            break
    for row in measured:
        print(f"[sizing] draft {row['shape']}: step {row['draft_step_ms']:.3f} ms (measured {row['measured_ms']:.3f}, "
              f"spread {row['spread']:.0%}), target verify / step = {row['ratio']:.1f}x", flush=True)
    worst = max(spread.values())
    return SizingResult(k=k, target_verify_ms=round(verify, 4), target_step_ms=round(low["step"], 4),
                        measured=measured, chosen=asdict(chosen), draft_step_ms=round(chosen_ms, 4),
                        ratio=round(ratio, 2), ratio_met=ratio >= MIN_RATIO, spread=round(worst, 3),
                        unstable=worst > UNSTABLE_SPREAD or outliers > 0,
                        load_average=round(load_average() or 0.0, 2), threads=torch.get_num_threads())


def _window(candidates: tuple[Shape, ...], verify_ms: float, screen) -> tuple[Shape, ...]:
    """The :data:`WINDOW` candidates (largest first) from the largest that a one-block screen puts
    within twice the rule (``screen(shape)`` -> ms): the boundary lies among them."""
    if len(candidates) <= WINDOW:
        return candidates
    first = len(candidates) - WINDOW
    for i, shape in enumerate(candidates[:first]):
        if verify_ms / screen(shape) >= MIN_RATIO / 2:
            first = i
            break
    return candidates[first:first + WINDOW]


def _without_outliers(sizes: list[int], figures: list[float], limit: float = 1.5) -> tuple[list[float], int]:
    """``figures`` with every one above ``limit`` times the robust line through all of them replaced
    by the line's value; and how many were. The line is Siegel's repeated median (per point, the
    median slope to every other; the median of those): one bad point among four cannot tilt it."""
    per_point = [statistics.median((figures[j] - figures[i]) / (sizes[j] - sizes[i])
                                   for j in range(len(sizes)) if sizes[j] != sizes[i])
                 for i in range(len(sizes)) if any(x != sizes[i] for x in sizes)]
    if len(figures) < 3 or not per_point:
        return list(figures), 0
    slope = max(0.0, statistics.median(per_point))
    intercept = statistics.median(f - slope * x for x, f in zip(sizes, figures, strict=True))
    out, replaced = [], 0
    for x, f in zip(sizes, figures, strict=True):
        line = intercept + slope * x
        if line > 0 and f > limit * line:
            out.append(line)
            replaced += 1
        else:
            out.append(f)
    return out, replaced


def _quartile(values: list[float]) -> float:
    """Lower quartile: busy spells only ever add time, so the low end is the model's own cost."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 4]


def _spread(values: list[float]) -> float:
    """Interquartile range over the median: how much the machine's speed moved during the rounds."""
    ordered = sorted(values)
    n = len(ordered) - 1
    q1, q3, med = ordered[n // 4], ordered[(3 * n + 3) // 4], statistics.median(ordered)
    return (q3 - q1) / med if med > 0 else 0.0


def _monotone(largest_first: list[float]) -> list[float]:
    """Make step times non-increasing from the largest shape down: a smaller shape's figure is never
    above a larger one's (a smaller shape caught in a busy spell gets the larger one's figure)."""
    out, floor = [], float("inf")
    for value in largest_first:
        floor = min(floor, value)
        out.append(floor)
    return out


def fixed_shape(shape: Shape, target_model: PreTrainedModel, target: TargetInfo, k: int,
                vocab_size: int | None = None) -> SizingResult:
    """The user chose the shape (``--draft-shape``): measure it anyway, so the report says the ratio."""
    return choose_draft_shape(target_model, target, k, candidates=(shape,), vocab_size=vocab_size)
