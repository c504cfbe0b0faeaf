"""The benchmark measures a user's own catalogue, as ``memspec_build`` writes it.

Why: ``python -m bench --catalogue PATH`` is how a team measures its model set on its robot's
computer. So the test builds a tiny catalogue with the tool itself (a Qwen2 target with its own
tokenizer, Llama drafts, a predictor; :mod:`builder.tiny_catalogue`) and runs the whole
pipeline on it, real runs included, at the smallest sizes the workload allows: the prompts must
come from the catalogue's own ``heldout/prompts.jsonl``, the predictor's training prompts from
its training report, and the results and report must name the catalogue and have the
documented shape. Timing figures are not checked (they are what ``make bench`` is for).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the ``bench`` package lives at the repository root
sys.path.insert(0, str(REPO / "test"))  # ``builder.tiny_catalogue``

from builder.tiny_catalogue import SUBSET_VOCAB, Built, build_tiny_catalogue  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    # subset drafts (--draft-vocab): the full-vocabulary path is served by every zoo test
    return build_tiny_catalogue(tmp_path_factory.mktemp("user"), evaluate=False, draft_vocab=SUBSET_VOCAB)


def test_bench_runs_on_a_built_catalogue(built: Built, tmp_path: Path) -> None:
    from bench.config import BenchConfig
    from bench.progress import Progress
    from bench.results import load_results, shape_problems
    from bench.run import run
    from bench.split import prompt_hash
    from memspec_ros.runtime import POLICY_NAMES

    catalogue = (built.out / "catalogue.yaml").resolve()
    prompts = (built.out / "heldout" / "prompts.jsonl").resolve()
    # Two held-out documents per domain give two prompts per domain: one each for the calibration
    # session, one each for the evaluation sessions; so one shift every turn, two turns a session.
    cfg = BenchConfig.quick(catalogue=built.out, sessions=2, turns=2, max_new_tokens=8, shift_rates=(1,),
                            cost_repeats=1, check_intervals=(2, 4), budgets=(1, None), ratios=(1.0, 4.0),
                            lengths=(1, 2), catalogue_sizes=(4, 8), out=tmp_path / "results",
                            cache=tmp_path / "cache")
    path = run(cfg, Progress(enabled=False))
    results = load_results(path)

    assert shape_problems(results) == []
    config = results["config"]
    assert config["catalogue"] == {
        "path": str(catalogue), "bundled": False, "model_set": None, "prompts": str(prompts), "home_domain": "robot",
        "domains": {"draft-robot": "robot", "draft-code": "code", "draft-math": "math", "draft-general": "general"}}
    assert config["models"]["target"]["path"] == str((built.out / "target").resolve())
    assert f"--catalogue {built.out.resolve()}" in config["commands"]["python"]
    assert config["commands"]["make"] == f"make bench-quick CATALOGUE={built.out.resolve()}"
    # k and the check interval as the node's configure resolves its defaults (0, auto); this build ran
    # no evaluate, so k keeps 4 and says why (test_speculation_choice covers the modelled choice)
    assert "--k" not in config["commands"]["python"] and config["k"] == 4
    assert config["speculation_chosen_by"].startswith("k auto: 4 (no ") and "run memspec_build evaluate" in \
        config["speculation_chosen_by"]
    assert f"check_interval auto: {config['check_interval']} (" in config["speculation_chosen_by"]
    split = config["split"]
    training = set(json.loads((built.out / "reports" / "predictor.json").read_text())["train_prompt_sha1"])
    assert split["source"].startswith("predictor training report") and split["training_prompts"] == len(training)
    evaluated = [t for s in results["config"]["workload"]["sessions"] for t in s["domains"]]
    assert evaluated[0] == "robot" and len(evaluated) == 4
    for name in (*POLICY_NAMES, "target-only", "hf-assisted"):
        entry = results["policies"][name]
        assert entry["tokens_per_s"] > 0, name
        assert entry.get("outputs_identical") in (True, None), name  # lossless on a Qwen2 target too
    report = (path.parent / "report.md").read_text()
    assert f"Catalogue measured: `{catalogue}`" in report
    assert str(prompts) in report and f"make bench-quick CATALOGUE={built.out.resolve()}" in report
    # held-out prompts whose text the predictor was trained on (boilerplate shared by documents) are dropped
    heldout = {json.loads(line)["prompt"] for line in prompts.read_text().splitlines() if line.strip()}
    assert split["excluded_prompts"] == sum(prompt_hash(p) in training for p in heldout)
