"""The small rules ``memspec_build`` rests on: step stamps, corpus forms and splits, verdicts.

Why: a stamp that skipped a step whose inputs changed would serve stale drafts silently; a
split that leaked a document into both halves would overstate acceptance; a verdict the wrong
way round would tell a team to deploy a draft that slows the robot down. Each is cheap to pin
here without training anything.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from memspec_ros.builder.corpora import parse_corpus_arguments, read_corpus, split_documents
from memspec_ros.builder.drafts_step import GENERAL_UNITS, DraftSettings
from memspec_ros.builder.errors import BuildError
from memspec_ros.builder.evaluation import (
    NO_BETTER,
    SLOWER,
    USEFUL,
    advice,
    estimated_speedup,
    render_markdown,
    verdict,
)
from memspec_ros.builder.steps import StepLedger


def test_a_step_reruns_only_when_its_inputs_or_outputs_change(tmp_path: Path) -> None:
    ledger = StepLedger(tmp_path / "steps")
    output = tmp_path / "out.txt"
    runs: list[int] = []

    def work() -> dict[str, int]:
        runs.append(1)
        output.write_text("x")
        return {"n": len(runs)}

    first = ledger.run("s", {"a": 1, "b": [1, 2]}, work, outputs=[output])
    again = ledger.run("s", {"b": [1, 2], "a": 1}, work, outputs=[output])  # same inputs, other key order
    assert not first.skipped and again.skipped and again.result == {"n": 1} and len(runs) == 1
    assert not ledger.run("s", {"a": 2, "b": [1, 2]}, work, outputs=[output]).skipped  # input changed
    output.unlink()
    assert not ledger.run("s", {"a": 2, "b": [1, 2]}, work, outputs=[output]).skipped  # output gone
    assert not StepLedger(tmp_path / "steps", force=True).run("s", {"a": 2, "b": [1, 2]}, work).skipped
    assert len(runs) == 4


def test_a_step_killed_half_way_leaves_no_stamp(tmp_path: Path) -> None:
    ledger = StepLedger(tmp_path)

    def crash() -> dict:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ledger.run("s", {"a": 1}, crash)
    assert ledger.finished("s", "anything") is None and not list(tmp_path.glob("*.json"))


def test_corpus_forms_and_the_split_by_document(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("first doc\nline two\n\n\nsecond doc\n  \nthird doc\n")
    docs = read_corpus("a", tmp_path / "a.txt").documents
    assert docs == ("first doc\nline two", "second doc", "third doc")
    folder = tmp_path / "b"
    (folder / "sub").mkdir(parents=True)
    (folder / "x.txt").write_text("one\n\nstill one\n")
    (folder / "sub" / "y.jsonl").write_text(json.dumps({"body": "two"}) + "\n\n" + json.dumps({"body": "three"}))
    assert read_corpus("b", folder, "body").documents == ("two", "three", "one\n\nstill one")
    many = [f"doc {i}" for i in range(100)]
    train, held = split_documents(many, seed=3)
    assert len(held) == 5 and sorted(train + held) == sorted(many) and not set(train) & set(held)
    assert split_documents(many, seed=3) == (train, held)


def test_corpus_arguments(tmp_path: Path) -> None:
    for name in ("robot.jsonl", "code.txt", "notes.md"):
        (tmp_path / name).write_text("x")
    (tmp_path / "math").mkdir()
    found = parse_corpus_arguments([], tmp_path)
    assert found == {"code": tmp_path / "code.txt", "math": tmp_path / "math", "robot": tmp_path / "robot.jsonl"}
    with pytest.raises(BuildError, match="given twice"):
        parse_corpus_arguments(["robot=other.jsonl"], tmp_path)
    with pytest.raises(BuildError, match="DOMAIN=PATH"):
        parse_corpus_arguments(["robot"], None)
    with pytest.raises(BuildError, match="not usable"):
        parse_corpus_arguments(["bad name=x.txt"], None)
    with pytest.raises(BuildError, match="no corpora given"):
        parse_corpus_arguments([], None)


def test_verdicts() -> None:
    # 3 rounds proposing 4 each, 9 accepted: 12 tokens for 12 draft steps + 3 verifications
    speedup = estimated_speedup(accepted=9, proposed=12, rounds=3, draft_ms=1.0, verify_ms=12.0, target_ms=10.0)
    assert speedup == pytest.approx(12 * 10.0 / (12 * 1.0 + 3 * 12.0))
    assert verdict(0.9, own_acceptance=0.8, general_acceptance=0.1) == SLOWER
    assert verdict(1.5, own_acceptance=0.3, general_acceptance=0.3) == NO_BETTER
    assert verdict(1.5, own_acceptance=0.4, general_acceptance=0.3) == USEFUL
    assert verdict(1.5, own_acceptance=0.4, general_acceptance=None) == USEFUL  # the general draft itself
    assert estimated_speedup(0, 0, 0, 1.0, 1.0, 1.0) == 0.0


def test_advice_names_the_remedy_for_each_cause() -> None:
    def entry(domain: str, verdict_: str, over_general: float | None) -> dict:
        return {"domain": domain, "acceptance": 0.5, "margin": over_general, "margin_over_domain_drafts": 0.3,
                "margin_over_general": over_general, "step_ms": 0.3, "estimated_speedup": 1.5,
                "verdict": verdict_}

    report = {"k": 4, "domains": ["a", "b", "c", "d"], "prompts_per_domain": dict.fromkeys("abcd", 3),
              "definition": "d", "timing_ms": {"target_step_ms": 3.0, "target_verify_ms": 5.0},
              "matrix": {f"draft-{x}": dict.fromkeys("abcd", 0.5) for x in ("a", "b", "c", "d", "general")},
              "drafts": {"draft-a": entry("a", USEFUL, 0.30), "draft-b": entry("b", USEFUL, 0.05),
                         "draft-c": entry("c", NO_BETTER, -0.02), "draft-d": entry("d", SLOWER, 0.2),
                         "draft-general": entry("general", USEFUL, None)}}
    lines = advice(report)
    assert [line.split(":")[0] for line in lines] == ["draft-c", "draft-d", "draft-b (+0.050 on b)"]
    assert "more text" in lines[0] and "memspec_build predictor" in lines[0]  # draft-a needs nothing
    assert "smaller `--draft-shape`" in lines[1]
    assert "--specialists-from scratch --general-share 0.5" in lines[2]
    assert "What to do:" in render_markdown(report)
    # a draft that almost never agrees is slow at any size: the remedy is training, not shrinking
    report["drafts"]["draft-d"]["acceptance"] = 0.05  # 1.2 tokens a round x 3 ms < a 5 ms verification
    rare = advice(report)[1]
    assert rare.startswith("draft-d: (1) it agrees with the target too rarely") and "--time-budget-s" in rare
    assert "smaller `--draft-shape`" in rare and "cannot help" in rare
    # a slow draft already at the smallest shape sizing measures is not told to shrink
    report["drafts"]["draft-d"].update(acceptance=0.5, shape="48x1")
    smallest = advice(report)[1]
    assert smallest.startswith("draft-d: (2)") and "smallest shape" in smallest and "Train longer" in smallest
    # one order of precedence: a slow draft close to the general draft gets the remedy of being slow
    report["drafts"]["draft-d"].update(margin_over_general=0.02, shape="256x2")
    assert [line.split(":")[0] for line in advice(report)] == ["draft-c", "draft-d", "draft-b (+0.050 on b)"]
    report["drafts"] = {"draft-a": report["drafts"]["draft-a"]}
    report["matrix"] = {"draft-a": report["matrix"]["draft-a"]}
    assert advice(report) == [] and "What to do:" not in render_markdown(report)


def test_prompts_are_distinct_when_documents_open_alike() -> None:
    """C headers, changelogs, licences: many documents share their first lines. Every prompt is
    still a different turn (the benchmark needs distinct prompts per domain), cut from the documents."""
    from memspec_ros.builder.prompts import make_prompts

    header = "#pragma once\n// Copyright the authors. Licensed under the BSD licence.\n\n"
    docs = [header + "".join(f"int f{d}_{i}(int x) {{ return x * {i} + {d}; }}\n" for i in range(40))
            for d in range(30)]
    prompts = make_prompts(docs, 24)
    assert len(prompts) == 24 and len(set(prompts)) == 24
    assert all(any(p in d for d in docs) for p in prompts)
    distinct = [f"doc {d}: " + "".join(f"line {i} of {d}\n" for i in range(20)) for d in range(30)]
    first_lines = make_prompts(distinct, 24)
    assert all(p.startswith(f"doc {d}: ") for d, p in enumerate(first_lines))  # unchanged: one opening each


def test_the_time_budget_is_split_in_units_the_general_draft_gets_more_when_it_seeds_the_others() -> None:
    per_domain, per_general = DraftSettings(time_budget_s=700.0).draft_seconds(5)
    assert per_general == GENERAL_UNITS * per_domain and per_general + 5 * per_domain == pytest.approx(700.0)
    per_domain, per_general = DraftSettings(time_budget_s=600.0, specialists_from="scratch").draft_seconds(5)
    assert per_domain == per_general == pytest.approx(100.0)  # the earlier recipe: equal shares


def test_a_base_draft_gets_two_shares_and_the_general_fallback_its_own() -> None:
    settings = DraftSettings(time_budget_s=770.0, specialists_from="base", general_units=0.7)
    per_domain, per_general = settings.draft_seconds(5)
    assert per_domain == pytest.approx(100.0) and per_general == pytest.approx(70.0)
    assert settings.base_seconds(5) == pytest.approx(200.0)  # BASE_UNITS shares
    assert DraftSettings(specialists_from="general").base_seconds(5) == 0.0  # no base in the other recipes


def test_interleaved_timing_times_the_target_and_every_draft() -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from memspec_ros.builder.step_timing import interleaved_step_ms

    def tiny(hidden: int) -> LlamaForCausalLM:
        torch.manual_seed(hidden)
        return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden,
                                            num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                            max_position_embeddings=128)).eval()

    named_like_the_target = {"a": tiny(16), "target_step": tiny(32)}  # draft names never collide with the target's
    step, verify, drafts = interleaved_step_ms(tiny(64), named_like_the_target, k=3, context=8, cycles=3, warmup=1)
    assert step > 0 and verify > 0 and set(drafts) == {"a", "target_step"} and all(v > 0 for v in drafts.values())
    step, verify, drafts = interleaved_step_ms(tiny(64), {}, k=3, context=8, cycles=3, warmup=1)
    assert step > 0 and verify > 0 and drafts == {}


def test_the_general_share_sets_the_general_drafts_time() -> None:
    per_domain, per_general = DraftSettings(time_budget_s=510.0, specialists_from="scratch",
                                            general_units=0.1).draft_seconds(5)
    assert per_domain == pytest.approx(100.0) and per_general == pytest.approx(10.0)


def test_per_domain_draft_shapes() -> None:
    """``--draft-shape DOMAIN=HxL`` sizes one draft apart (a hard domain may deserve a larger draft);
    a bad entry is a BuildError naming the fix, before anything is trained."""
    from memspec_ros.builder.cli import _draft_shapes as parse_option
    from memspec_ros.builder.draft_architecture import parse_shape
    from memspec_ros.builder.drafts_step import _draft_shapes

    assert parse_option(["192x2", "code=256x2", "general=80x2"]) == ("192x2", (("code", "256x2"), ("general", "80x2")))
    assert parse_option([]) == ("", ())
    for bad in (["192x2", "128x2"], ["code=128x2", "code=96x2"], ["=128x2"]):
        with pytest.raises(BuildError, match="--draft-shape"):
            parse_option(bad)
    default = parse_shape("192x2")
    settings = DraftSettings(specialists_from="scratch", domain_shapes=(("code", "256x2"), ("general", "80x2")))
    shapes = _draft_shapes(settings, ["code", "robot", "general"], default)
    assert shapes == {"code": parse_shape("256x2"), "robot": default, "general": parse_shape("80x2")}
    with pytest.raises(BuildError, match="no corpus"):
        _draft_shapes(DraftSettings(specialists_from="scratch", domain_shapes=(("cod", "96x2"),)), ["code"], default)
    with pytest.raises(BuildError, match="--specialists-from scratch"):
        _draft_shapes(DraftSettings(domain_shapes=(("code", "96x2"),)), ["code", "general"], default)
    with pytest.raises(BuildError, match="HIDDENxLAYERS"):
        _draft_shapes(DraftSettings(specialists_from="scratch", domain_shapes=(("code", "big"),)), ["code"], default)


def test_drafts_are_saved_in_a_16_bit_targets_dtype(tmp_path: Path) -> None:
    """A bf16 target's drafts are stored in bf16 (half the bytes of fp32), and still pass the node's checks."""
    import dataclasses

    import torch
    from transformers import AutoModelForCausalLM

    from builder.user_inputs import write_target
    from memspec_ros.builder.draft_architecture import llama_config, parse_shape
    from memspec_ros.builder.drafts_step import DraftSettings, _export_draft
    from memspec_ros.builder.target_folder import check_target_folder

    target = check_target_folder(write_target(tmp_path / "target"))
    assert target.stored_dtype == "float32"
    torch.manual_seed(0)
    draft = AutoModelForCausalLM.from_config(llama_config(
        parse_shape("32x1"), vocab_size=target.logit_width, max_positions=64, bos_token_id=target.bos_token_id,
        eos_token_id=target.eos_token_id, pad_token_id=target.pad_token_id))
    draft.save_pretrained(tmp_path / "checkpoint")
    settings = DraftSettings()
    full = _export_draft(tmp_path / "checkpoint", tmp_path / "fp32", target, "draft-x",
                         dtype=settings.export_dtype(target))
    bf16_target = dataclasses.replace(target, stored_dtype="bfloat16")
    assert settings.export_dtype(bf16_target) == "bfloat16", "as the target is stored"
    half = _export_draft(tmp_path / "checkpoint", tmp_path / "bf16", bf16_target, "draft-x",
                         dtype=settings.export_dtype(bf16_target))
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["dtype"] == "bfloat16"
    assert half["bytes"] < 0.6 * full["bytes"]
    # --save-dtype: an fp32 target's drafts written in bf16 (the default model set's are)
    assert DraftSettings(save_dtype="bfloat16").export_dtype(target) == "bfloat16"
    assert "save_dtype" not in DraftSettings(save_dtype="bfloat16").step_key(), "no training step reruns for it"


def test_a_time_budget_takes_another_step_only_when_it_fits() -> None:
    """A phase stops before a step that would overrun its budget (a 150k-token vocabulary made
    steps 3-4 s, and phases overran by one); the first step always runs; a step budget counts."""
    from memspec_ros.builder.training_loop import TrainSpec

    timed = TrainSpec(10.0, 1e-3, 4, 32, 0)
    assert timed.another_step_fits(0, 0.0, 0.0) and timed.another_step_fits(0, 12.0, 0.0)  # first step
    assert timed.another_step_fits(5, 5.9, 4.0) and not timed.another_step_fits(5, 6.5, 4.0)
    assert not timed.another_step_fits(9, 10.0, 0.0) and timed.another_step_fits(9, 9.8, 0.1)
    counted = TrainSpec(0.0, 1e-3, 4, 32, 0, steps=3)
    assert counted.another_step_fits(2, 100.0, 50.0) and not counted.another_step_fits(3, 0.0, 0.0)


def test_a_build_made_before_subset_drafts_existed_keeps_its_step_keys() -> None:
    """``draft_vocab`` and ``init_layers`` at their defaults are not part of the training steps'
    keys: adding an option must not retrain every earlier build; set, it is (a new subset retrains)."""
    from dataclasses import asdict

    plain = DraftSettings()
    defaults_left_out = ("draft_vocab", "save_dtype", "init_layers")
    assert plain.step_key() == {k: v for k, v in asdict(plain).items() if k not in defaults_left_out}
    assert DraftSettings(draft_vocab=4096).step_key()["draft_vocab"] == 4096
    assert DraftSettings(init_layers=2).step_key()["init_layers"] == 2
