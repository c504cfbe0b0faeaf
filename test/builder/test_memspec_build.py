"""``memspec_build`` end to end on a user's own (tiny, non-Llama) target and corpora.

Why: the tool's promise is that a team's target and text become a catalogue the node accepts
and serves losslessly, without the repository's training/ folder. So the test runs the three
subcommands as a user would (tiny budgets), then applies the node's own checks
(``load_catalogue_file``, ``check_draft``, ``check_predictor``) and a greedy speculative
generation with a built draft, which must equal the target's own greedy output. Each user
mistake must end with exit code 2 and a message naming the fix; a rerun must skip finished steps.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from memspec_ros.builder.cli import main
from memspec_ros.builder.corpora import read_corpus

from .tiny_catalogue import DRAFTS_TINY, PREDICTOR_TINY, SUBSET_VOCAB, Built, build_tiny_catalogue, corpus_args

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """drafts -> predictor -> evaluate, once for the module."""
    return build_tiny_catalogue(tmp_path_factory.mktemp("user"))


def test_the_catalogue_passes_the_nodes_checks_and_serves_losslessly(built: Built) -> None:
    from transformers import LlamaForCausalLM

    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import load_causal_lm, load_config, load_tokenizer
    from memspec_ros.core.proposer import DraftProposer
    from memspec_ros.runtime.catalogue_file import load_catalogue_file
    from memspec_ros.runtime.model_set_checks import check_draft, check_predictor

    cat = load_catalogue_file(built.out)
    assert cat.target == (built.out / "target").resolve()
    assert {d.domain for d in cat.drafts} == {"robot", "code", "math", "general"}
    assert cat.predictor == (built.out / "predictor.safetensors").resolve()
    tok, config = load_tokenizer(cat.target), load_config(cat.target)
    for entry in cat.drafts:
        check_draft(tok, config, entry)
        assert load_config(entry.path).model_type == "llama"  # a Llama draft for a Qwen2 target
    check_predictor(cat.predictor, config, cat.draft_names)

    target = load_causal_lm(cat.target)
    engine = SpeculativeEngine(target, tok)
    draft = load_causal_lm(cat.draft("draft-robot").path)
    assert isinstance(draft, LlamaForCausalLM) and draft.config.vocab_size == target.config.vocab_size
    for prompt in ("USER: bring the red cup from the lab\nROBOT:", "def add_3(x, y):"):
        reference = engine.target_greedy(prompt, 24)
        state = engine.generate(prompt, DraftProposer(draft, "draft-robot"), k=4, max_new_tokens=24)
        assert state.output_ids == reference, prompt


def test_layout_heldout_split_and_reports(built: Built) -> None:
    out = built.out
    # the target is hard-linked into the folder (no copy), with its own files
    assert (out / "target" / "model.safetensors").stat().st_ino == (built.target / "model.safetensors").stat().st_ino
    for domain in ("robot", "code", "math"):
        held = [json.loads(line)["text"] for line in (out / "heldout" / f"{domain}.jsonl").open()]
        train = [json.loads(line)["text"] for line in (out / "work" / "corpora" / f"{domain}.train.jsonl").open()]
        val = [json.loads(line)["text"] for line in (out / "work" / "corpora" / f"{domain}.validation.jsonl").open()]
        assert len(held) == 2 and len(val) == 3 and len(train) == 25  # by document: 95/5, then 90/10 of the 95
        # each document in exactly one part (compared as multisets: the tiny corpora repeat some documents)
        documents = read_corpus(domain, built.corpora[domain]).documents
        assert Counter(held) + Counter(val) + Counter(train) == Counter(documents)
        # the target's continuations of validation prefixes, which pick each KL phase's best weights
        assert (out / "work" / "validation" / f"{domain}.npy").exists()
        tokenizer_json = (out / f"draft-{domain}" / "tokenizer.json").read_bytes()
        assert tokenizer_json == (built.target / "tokenizer.json").read_bytes()  # copied verbatim
    # the general draft is trained from scratch; the domain drafts start from it (no pretraining of their own)
    checkpoints = out / "work" / "checkpoints"
    assert (checkpoints / "draft-general" / "pretrain" / "model.safetensors").exists()
    assert not (checkpoints / "draft-robot" / "pretrain").exists()
    assert (checkpoints / "draft-robot" / "distill-corpus" / "model.safetensors").exists()
    assert "3 domain drafts x" in built.drafts_log and "from the general draft" in built.drafts_log
    stats = json.loads((checkpoints / "draft-robot" / "distill-corpus" / "train_stats.json").read_text())
    assert stats["validation_best"] >= max(stats["validation_start"], stats["validation_end"])
    assert stats["validation_checks"] >= 2 and "keeping the best" in built.drafts_log
    prompts = [json.loads(line) for line in (out / "heldout" / "prompts.jsonl").open()]
    assert {p["domain"] for p in prompts} == {"robot", "code", "math"}
    heldout_text = {d: (out / "heldout" / f"{d}.jsonl").read_text() for d in ("robot", "code", "math")}
    assert all(json.dumps(p["prompt"])[1:-1] in heldout_text[p["domain"]] for p in prompts)  # cut from held-out
    sizing = json.loads((out / "reports" / "sizing.json").read_text())
    assert sizing["target_verify_ms"] > 0 and sizing["measured"]
    assert "[sizing] target verify of 5 tokens" in built.drafts_log and "chosen draft hidden" in built.drafts_log
    # the recipe beside what each phase reached: margins differ between seeds of one recipe
    recipe = json.loads((out / "reports" / "drafts.json").read_text())
    assert recipe["settings"]["seed"] == 0 and recipe["settings"]["specialists_from"] == "general"
    assert set(recipe["drafts"]) == {"draft-robot", "draft-code", "draft-math", "draft-general"}
    general, robot = recipe["drafts"]["draft-general"], recipe["drafts"]["draft-robot"]
    assert list(general["phases"]) == ["pretrain", "distill-corpus", "distill-continuations", "export"]
    assert list(robot["phases"]) == ["distill-corpus", "distill-continuations", "export"]
    assert robot["phases"]["distill-corpus"]["steps"] > 0 and general["budget_s"] > robot["budget_s"]
    predictor = json.loads((out / "reports" / "predictor.json").read_text())
    assert predictor["validation"]["examples"] > 0 and 0.0 <= predictor["validation"]["top1"] <= 1.0
    # its training dialogues come from documents no draft trained on
    assert predictor["training_documents"] == {d: f"work/corpora/{d}.validation.jsonl"
                                               for d in ("robot", "code", "math")}
    # the benchmark keeps these training prompts out of its workload, if the report is this predictor's
    assert predictor["train_prompt_sha1"]
    assert predictor["predictor_sha1"] == hashlib.sha1((out / "predictor.safetensors").read_bytes()).hexdigest()
    report = json.loads((out / "reports" / "evaluation.json").read_text())
    assert set(report["matrix"]) == {"draft-robot", "draft-code", "draft-math", "draft-general"}
    assert all(set(row) == {"robot", "code", "math"} for row in report["matrix"].values())
    verdicts = {e["verdict"] for e in report["drafts"].values()}
    assert verdicts <= {"useful", "no better than the general draft", "slower than target-only"}
    assert "margin" in report["drafts"]["draft-robot"] and report["timing_ms"]["target_verify_ms"] > 0
    robot = report["drafts"]["draft-robot"]  # the margin is the smaller of its two readings
    assert robot["margin"] == min(robot["margin_over_domain_drafts"], robot["margin_over_general"])
    assert "| draft-robot | robot |" in (out / "reports" / "evaluation.md").read_text()
    # which prompts it scored on, relative to the folder (memspec_build's own held-out split here)
    assert report["prompts"] == "heldout/prompts.jsonl"
    assert "held-out prompts from `heldout/prompts.jsonl`" in (out / "reports" / "evaluation.md").read_text()
    # rounds of every k on each draft's own domain, for the node's automatic k; at the report's k
    # they are the acceptance the matrix shows
    by_k = report["own_rounds_by_k"]["draft-robot"]
    assert sorted(map(int, by_k)) == list(range(1, 9))
    accepted, proposed, rounds = by_k[str(report["k"])]
    assert round(accepted / proposed, 4) == report["matrix"]["draft-robot"]["robot"] and rounds > 0
    assert set(report["own_rounds_by_k"]) == set(report["matrix"])


def test_subset_drafts_predict_the_frequent_tokens_and_stay_lossless(tmp_path_factory) -> None:
    """``--draft-vocab``: one token map for all drafts (the most frequent training tokens, EOS
    always among them) shipped in every draft folder; the drafts have that many logits plus
    'other'; the node's checks accept them, evaluate scores them through their maps, and
    speculation with one is the target's own greedy output."""
    from memspec_ros.core.engine import SpeculativeEngine
    from memspec_ros.core.model_loading import load_causal_lm, load_config, load_tokenizer
    from memspec_ros.core.proposer import DraftProposer
    from memspec_ros.core.token_map import load_token_map
    from memspec_ros.runtime.catalogue_file import load_catalogue_file
    from memspec_ros.runtime.model_set_checks import check_draft, check_predictor

    built = build_tiny_catalogue(tmp_path_factory.mktemp("subset"), draft_vocab=SUBSET_VOCAB)
    cat = load_catalogue_file(built.out)
    tok, config = load_tokenizer(cat.target), load_config(cat.target)
    maps = {entry.name: load_token_map(entry.path) for entry in cat.drafts}
    first = maps["draft-general"]
    assert first is not None and first.other == SUBSET_VOCAB and first.target_vocab_size == config.vocab_size
    assert all(m is not None and m.draft_to_target.tolist() == first.draft_to_target.tolist() for m in maps.values())
    assert tok.eos_token_id in first.draft_to_target.tolist()
    assert f"[vocab] the drafts predict {SUBSET_VOCAB} of the target's {config.vocab_size} tokens" in built.drafts_log
    for entry in cat.drafts:
        check_draft(tok, config, entry)
        assert load_config(entry.path).vocab_size == SUBSET_VOCAB + 1
    check_predictor(cat.predictor, config, cat.draft_names)
    report = json.loads((built.out / "reports" / "evaluation.json").read_text())
    assert set(report["matrix"]) == set(cat.draft_names)
    engine = SpeculativeEngine(load_causal_lm(cat.target), tok)
    entry = cat.draft("draft-robot")
    draft = DraftProposer(load_causal_lm(entry.path), entry.name, maps[entry.name])
    for prompt in ("USER: bring the red cup from the lab\nROBOT:", "def add_3(x, y):"):
        assert engine.generate(prompt, draft, k=4, max_new_tokens=24).output_ids == engine.target_greedy(prompt, 24)


def test_specialists_grown_from_a_base_draft_that_is_not_shipped(built: Built, tmp_path: Path, capsys) -> None:
    """``--specialists-from base``: a base draft at the specialists' shape learns every domain and
    each domain draft grows from it (no pretraining of its own); the base is not exported nor in
    the catalogue; the general draft is a fallback trained from scratch at its own shape. The
    report names the base's budget and phases; a domain given its own shape is refused."""
    from memspec_ros.core.model_loading import load_config
    from memspec_ros.runtime.catalogue_file import load_catalogue_file

    out = tmp_path / "base_build"
    args = ["drafts", "--target", str(built.target), *corpus_args(built.corpora), "--out", str(out), *DRAFTS_TINY,
            "--specialists-from", "base", "--draft-shape", "32x2", "--draft-shape", "general=16x1"]
    assert main(args) == 0, capsys.readouterr().err
    log = capsys.readouterr().out
    assert "a base draft of all domains (not shipped)" in log and "from the base draft:" in log
    checkpoints = out / "work" / "checkpoints"
    assert (checkpoints / "draft-_base" / "pretrain" / "model.safetensors").exists()
    assert (checkpoints / "draft-general" / "pretrain" / "model.safetensors").exists()  # the fallback: from scratch
    assert not (checkpoints / "draft-robot" / "pretrain").exists()
    assert not (out / "draft-_base").exists()
    assert {d.name for d in load_catalogue_file(out).drafts} == {"draft-robot", "draft-code", "draft-math",
                                                                  "draft-general"}
    assert load_config(out / "draft-robot").hidden_size == 32 and load_config(out / "draft-general").hidden_size == 16
    recipe = json.loads((out / "reports" / "drafts.json").read_text())
    assert recipe["settings"]["specialists_from"] == "base" and recipe["settings"]["base_units"] == 2.0
    base, robot = recipe["base"], recipe["drafts"]["draft-robot"]
    assert base["shipped"] is False and base["shape"]["hidden"] == 32
    assert list(base["phases"]) == ["pretrain", "distill-corpus", "distill-continuations"]
    assert list(robot["phases"]) == ["distill-corpus", "distill-continuations", "export"]
    assert base["budget_s"] == pytest.approx(2 * robot["budget_s"], abs=0.1)
    assert recipe["drafts"]["draft-general"]["budget_s"] == pytest.approx(robot["budget_s"], abs=0.1)
    refused = main([*args[:-4], "--draft-shape", "32x2", "--draft-shape", "robot=48x2"])
    err = capsys.readouterr().err
    assert refused == 2 and "the base draft's shape" in err, err


def test_a_general_corpus_is_the_general_drafts_own_text(built: Built, tmp_path: Path, capsys) -> None:
    """``--general-corpus``: the general draft trains on that text alone (the fallback for turns
    outside every domain), the domain drafts on their own; it is no domain (not in the manifest's
    domains, no domain draft, no held-out prompts), its tokens join the subset, and the recipe and
    catalogue say what it was. The same file as a domain's corpus, or a domain named ``general``,
    is refused with the fix."""
    from memspec_ros.core.model_loading import load_tokenizer
    from memspec_ros.core.token_map import load_token_map
    from memspec_ros.runtime.catalogue_file import load_catalogue_file

    out = tmp_path / "general_build"
    domains = ["--corpus", f"code={built.corpora['code']}", "--corpus", f"math={built.corpora['math']}"]
    args = ["drafts", "--target", str(built.target), *domains, "--out", str(out), *DRAFTS_TINY,
            "--draft-vocab", str(SUBSET_VOCAB), "--general-corpus", str(built.corpora["robot"])]
    assert main(args) == 0, capsys.readouterr().err
    recipe = json.loads((out / "reports" / "drafts.json").read_text())
    assert recipe["settings"]["general_corpus"] == str(built.corpora["robot"])
    assert recipe["drafts"]["draft-general"]["texts"] == ["general"]
    assert recipe["drafts"]["draft-code"]["texts"] == ["code"]
    manifest = json.loads((out / "work" / "corpora" / "manifest.json").read_text())
    assert [d["domain"] for d in manifest["domains"]] == ["code", "math"]
    assert manifest["general_corpus"]["source"] == str(built.corpora["robot"])
    cat = load_catalogue_file(out)
    assert cat.draft_names == ["draft-code", "draft-math", "draft-general"]
    assert "robot.jsonl" in cat.draft("draft-general").description
    prompts = [json.loads(line)["domain"] for line in (out / "heldout" / "prompts.jsonl").read_text().splitlines()]
    assert set(prompts) == {"code", "math"}
    tok = load_tokenizer(built.target)

    def counts(texts: list[str]) -> Counter:
        return Counter(i for text in texts for i in tok.encode(text, add_special_tokens=False))

    robot = counts([json.loads(line)["text"] for line in built.corpora["robot"].read_text().splitlines()])
    others = counts([built.corpora["code"].read_text(), *(p.read_text() for p in built.corpora["math"].iterdir())])
    robot_only = [i for i, _ in robot.most_common() if i not in others]
    assert robot_only and robot_only[0] in load_token_map(out / "draft-general").draft_to_target.tolist()
    capsys.readouterr()
    same = main([*args[:-1], str(built.corpora["code"])])
    err = capsys.readouterr().err
    assert same == 2 and "also a domain's corpus" in err, err
    assert "--general-corpus" in _drafts_error(tmp_path, built.target,
                                               [*domains, "--corpus", f"general={built.corpora['robot']}"], capsys)


def test_a_second_run_skips_every_finished_step(built: Built, capsys) -> None:
    assert main(["drafts", "--target", str(built.target), *corpus_args(built.corpora), "--out", str(built.out),
                 *DRAFTS_TINY]) == 0
    log = capsys.readouterr().out
    assert "] done {" not in log and "[export]" not in log and "[split]" not in log  # nothing trained or written
    for step in ("sizing", "split-robot", "draft-general-pretrain", "draft-robot-distill-corpus",
                 "draft-general-distill-continuations", "draft-math-export"):
        assert f"[{step}] finished before with the same inputs: skipped" in log, step
    assert "predictor" in (built.out / "catalogue.yaml").read_text()  # nothing changed: the predictor stays
    assert main(["predictor", "--out", str(built.out), *PREDICTOR_TINY]) == 0
    assert "[predictor] finished before with the same inputs: skipped" in capsys.readouterr().out


def test_a_deleted_predictor_is_trained_again(built: Built, tmp_path: Path, capsys) -> None:
    """The catalogue still names the predictor file; ``predictor`` must rebuild it, not refuse."""
    copy = tmp_path / "copy"
    shutil.copytree(built.out, copy)
    (copy / "predictor.safetensors").unlink()
    assert main(["predictor", "--out", str(copy), *PREDICTOR_TINY]) == 0, capsys.readouterr().err
    assert "validation (held-out dialogues)" in capsys.readouterr().out
    assert (copy / "predictor.safetensors").is_file()


def _drafts_error(tmp_path: Path, target: Path, corpora_args: list[str], capsys) -> str:
    code = main(["drafts", "--target", str(target), *corpora_args, "--out", str(tmp_path / "out"), *DRAFTS_TINY])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("memspec_build drafts: error: ") and err.count("\n") == 1, err
    return err


def test_unusable_corpora_are_refused_with_the_fix(built: Built, tmp_path: Path, capsys) -> None:
    good = ["--corpus", f"robot={built.corpora['robot']}"]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    assert "is empty" in _drafts_error(tmp_path, built.target, [*good, "--corpus", f"code={empty}"], capsys)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 au lait\n\nna\xefve\n\nd\xe9j\xe0 vu\n".encode("latin-1"))
    err = _drafts_error(tmp_path, built.target, [*good, "--corpus", f"code={latin}"], capsys)
    assert "not UTF-8" in err and "iconv" in err
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "a"}\n{"body": "b"}\n')
    err = _drafts_error(tmp_path, built.target, [*good, "--corpus", f"code={bad_json}"], capsys)
    assert "line 2 has no text field 'text'" in err and "--text-field" in err
    assert "does not exist" in _drafts_error(tmp_path, built.target, [*good, "--corpus", "code=/nonexistent.txt"],
                                             capsys)
    assert "reserved" in _drafts_error(tmp_path, built.target, [*good, "--corpus", f"general={latin}"], capsys)
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a b\n\nc d\n\ne f\n\ng h\n")
    err = _drafts_error(tmp_path, built.target, [*good, "--corpus", f"code={tiny}", "--draft-shape", "48x1"], capsys)
    assert "only" in err and "training tokens" in err and "--seq-len" in err


def test_unservable_targets_are_refused_with_the_fix(built: Built, tmp_path: Path, capsys) -> None:
    corpus = corpus_args(built.corpora)

    def variant(name: str, edit) -> Path:
        folder = tmp_path / name
        shutil.copytree(built.target, folder)
        edit(folder)
        return folder

    def set_config(**changes):
        def edit(folder: Path) -> None:
            config = json.loads((folder / "config.json").read_text())
            config.update(changes)
            (folder / "config.json").write_text(json.dumps(config))
        return edit

    no_weights = variant("no-weights", lambda f: (f / "model.safetensors").rename(f / "pytorch_model.bin"))
    err = _drafts_error(tmp_path, no_weights, corpus, capsys)
    assert "no *.safetensors weights" in err and "save_pretrained(folder)" in err
    remote = variant("remote", set_config(auto_map={"AutoModelForCausalLM": "modeling_x.XForCausalLM"}))
    assert "trust_remote_code" in _drafts_error(tmp_path, remote, corpus, capsys)
    unknown = variant("unknown", set_config(model_type="my_secret_arch"))
    err = _drafts_error(tmp_path, unknown, corpus, capsys)
    assert "'my_secret_arch'" in err and "trust_remote_code" in err
    assert "does not exist" in _drafts_error(tmp_path, tmp_path / "nothing-here", corpus, capsys)

    def as_jamba(folder: Path) -> None:  # Mamba layers: a recurrent state, refused before any training
        from transformers import JambaConfig, JambaForCausalLM
        config = json.loads((folder / "config.json").read_text())
        jamba = JambaForCausalLM(JambaConfig(
            vocab_size=config["vocab_size"], hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, attn_layer_period=2, attn_layer_offset=1,
            num_experts=1, mamba_d_state=4, eos_token_id=config.get("eos_token_id")))
        (folder / "model.safetensors").unlink()
        jamba.save_pretrained(folder)
    err = _drafts_error(tmp_path, variant("jamba", as_jamba), corpus, capsys)
    assert "'jamba' model cannot take back rejected draft tokens" in err and "Mamba" in err
    assert not list((tmp_path / "out").glob("draft-*")), "refused before a draft was trained"


def test_too_little_disk_space_is_refused_before_writing(built: Built, tmp_path: Path, capsys, monkeypatch) -> None:
    import shutil as shutil_module

    real = shutil_module.disk_usage
    monkeypatch.setattr("memspec_ros.builder.disk_space.shutil.disk_usage",
                        lambda path: real(path)._replace(free=10 << 20))
    err = _drafts_error(tmp_path, built.target, corpus_args(built.corpora), capsys)
    assert "not enough disk space" in err and "MB free" in err
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_predictor_and_evaluate_need_a_draft_build_first(tmp_path: Path, capsys) -> None:
    for command in ("predictor", "evaluate"):
        assert main([command, "--out", str(tmp_path)]) == 2
        assert "run `memspec_build drafts" in capsys.readouterr().err


def test_console_script_is_declared_and_every_subcommand_has_help() -> None:
    setup = (REPO / "setup.py").read_text()
    assert '"memspec_build = memspec_ros.builder.cli:main"' in setup
    for command in ([], ["drafts"], ["predictor"], ["evaluate"]):
        done = subprocess.run([sys.executable, "-m", "memspec_ros.builder", *command, "--help"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "usage: memspec_build" in done.stdout, done.stderr
    assert "--time-budget-s" in done.stdout and "--force" in done.stdout
