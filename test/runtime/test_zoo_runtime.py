"""The runtime on the real bundled zoo (skipped, with the reason, while the zoo is absent).

Short on purpose (two turns of a few tokens): the tiny-model tests cover the mechanics; this
checks that the real drafts load through the loader, that the predictor file fits the zoo, and
that the headline properties hold with real models - lossless output and no stalls for memspec.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memspec_ros.bundled_models import bundled_zoo_root

ZOO = bundled_zoo_root()


@pytest.fixture(scope="module")
def zoo():
    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import load_causal_lm, load_tokenizer
    from memspec_ros.runtime import Catalogue, load_catalogue_file

    torch.set_num_threads(1)
    models = load_catalogue_file(ZOO)
    engine = SpeculativeEngine(load_causal_lm(models.target), load_tokenizer(models.target))
    return engine, Catalogue.from_file(models)


def _turns():
    from memspec_ros.runtime import Turn

    return [Turn("USER: robot, please go to the kitchen and", 12, "robot"),
            Turn("def parse_args(argv):\n    ", 12, "code")]


def _reference(engine) -> list[list[int]]:
    session, outs = None, []
    for t in _turns():
        session = engine.run_turn(session, t.prompt, t.max_new_tokens)
        outs.append(list(session.output_ids))
    return outs


def test_catalogue_and_vocabulary(zoo) -> None:
    from memspec_ros.runtime import load_catalogue_file
    from memspec_ros.runtime.model_set_checks import check_draft, check_predictor

    engine, catalogue = zoo
    assert len(catalogue) >= 5
    assert len({s.size_bytes for s in catalogue}) > 1, "drafts differ in size"
    models = load_catalogue_file(ZOO)
    for entry in models.drafts:
        check_draft(engine.tokenizer, engine.target.config, entry)
    check_predictor(models.predictor, engine.target.config, models.draft_names)


@pytest.mark.parametrize("policy", ["reactive", "memspec"])
def test_real_zoo_lossless_and_memspec_does_not_stall(zoo, policy) -> None:
    from memspec_ros.runtime import Budget, DraftRuntime, RuntimeConfig, StorageModel, make_policy

    engine, catalogue = zoo
    predictor = ZOO / "predictor.safetensors"
    if policy == "memspec" and not predictor.exists():
        pytest.fail(f"no predictor at {predictor} (`make zoo` builds it: memspec_build predictor)")
    mean = sum(s.stored_bytes for s in catalogue) / len(catalogue)
    storage = StorageModel(bandwidth_bytes_per_s=mean / 0.08)  # ~80 ms per load, a few rounds
    pol = make_policy(policy, predictor=predictor if policy == "memspec" else None, draft_names=catalogue.names)
    with DraftRuntime(engine, catalogue, Budget.drafts(2), pol, RuntimeConfig(storage=storage)) as rt:
        rt.warm_up()
        reports = rt.run_dialogue(_turns())
        assert [r.output_ids for r in reports] == _reference(engine)
        assert rt.pool.peak_bytes <= rt.pool.budget_bytes
        if policy == "memspec":
            assert rt.statistics().stall_s == 0.0


def test_predictor_file_matches_the_zoo(zoo) -> None:
    from memspec_ros.runtime import DraftPredictor

    engine, catalogue = zoo
    path = Path(ZOO / "predictor.safetensors")
    if not path.exists():
        pytest.fail(f"no predictor at {path} (`make zoo` builds it: memspec_build predictor)")
    pred = DraftPredictor.load(path, catalogue.names)
    assert pred.hidden_size == engine.target.config.hidden_size
    assert path.stat().st_size < 512 * 1024


def test_auto_threads_time_runtime_rounds_within_the_budget(zoo) -> None:
    """``num_threads: 0``: rounds timed through a runtime with one draft that fits the budget, at every
    candidate count; the chosen count is one of them, torch is left at it, and the measuring runtime is gone."""
    from memspec_ros.core.thread_tuning import candidate_thread_counts
    from memspec_ros.runtime import Budget, make_materializer
    from memspec_ros.runtime.thread_choice import choose_threads

    engine, catalogue = zoo
    try:
        choice = choose_threads(engine, catalogue, Budget.drafts(1), make_materializer(catalogue), 4)
        counts = candidate_thread_counts()
        assert sorted(choice.round_s) == counts and all(0 < s < 1.0 for s in choice.round_s.values())
        assert choice.threads in counts and torch.get_num_threads() == choice.threads
        alone = choose_threads(engine, catalogue, Budget.bytes(1), make_materializer(catalogue), 4)
        assert alone.threads in counts  # no draft fits: target-only rounds are timed instead
    finally:
        torch.set_num_threads(1)
