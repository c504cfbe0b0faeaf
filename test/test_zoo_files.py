"""Fast checks of the committed model zoo (no training; loads small models only).

Why these checks: the runtime relies on every draft sharing the target's vocabulary, on
plain Hugging Face loading without remote code and on repository size limits; the zoo is a
``memspec_build`` output folder (``make zoo``), so its reports and held-out files must be
the ones that tool writes and the benchmark reads, and its published character must hold:
each domain's own draft best on its domain by >= 0.10 acceptance, a general draft that is
mediocre everywhere, drafts of different sizes, bf16 on disk.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "models" / "zoo"
HELDOUT = ZOO / "heldout"
DOMAINS = ("robot", "code", "math", "legal", "prose")
MEMBERS = ("target", *(f"draft-{d}" for d in (*DOMAINS, "general")))


@pytest.fixture(scope="module")
def target_tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(ZOO / "target")


@pytest.mark.parametrize("name", MEMBERS)
def test_member_loads_without_remote_code(name: str, target_tokenizer) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path = ZOO / name
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (path / f).is_file(), f"{name} lacks {f}"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                 trust_remote_code=False)
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.get_vocab() == target_tokenizer.get_vocab()
    assert model.config.vocab_size == len(target_tokenizer)
    assert model.get_output_embeddings().weight.dtype == torch.float32
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([[1, 50, 60]])).logits
    assert out.shape == (1, 3, model.config.vocab_size)


def test_sizes_within_limits() -> None:
    total = 0
    for name in MEMBERS:
        for f in (ZOO / name).iterdir():
            size = f.stat().st_size
            assert size < 95e6, f"{f} too large"
            total += size
        config = json.loads((ZOO / name / "config.json").read_text())
        assert config["dtype"] == "bfloat16", f"{name} is stored as {config['dtype']}"
    assert total <= 100e6
    sizes = [(ZOO / f"draft-{d}" / "model.safetensors").stat().st_size for d in (*DOMAINS, "general")]
    assert len(set(sizes)) == len(sizes), "drafts must differ in file size"
    assert not any(p.is_relative_to(ZOO / "work") for p in _tracked(ZOO)), "models/zoo/work is make zoo's scratch"


def _tracked(folder: Path) -> list[Path]:
    import subprocess
    out = subprocess.run(["git", "ls-files", str(folder)], cwd=ROOT, capture_output=True, text=True)
    return [ROOT / line for line in out.stdout.splitlines()]


def test_catalogue_lists_every_member() -> None:
    cat = yaml.safe_load((ZOO / "catalogue.yaml").read_text())
    assert cat["target"] == "target" and cat["predictor"] == "predictor.safetensors"
    assert {d["name"] for d in cat["drafts"]} == set(MEMBERS) - {"target"}
    assert {d["domain"] for d in cat["drafts"]} == {*DOMAINS, "general"}


def test_acceptance_matrix_diagonal_margin() -> None:
    """``memspec_build evaluate``'s record: in every domain's column that domain's own draft is the
    best by >= 0.10, and the general draft accepts less than every domain's own draft."""
    res = json.loads((ZOO / "reports" / "evaluation.json").read_text())
    matrix = res["matrix"]
    assert set(matrix) == set(MEMBERS) - {"target"}
    for d in DOMAINS:
        own = matrix[f"draft-{d}"][d]
        others = [row[d] for name, row in matrix.items() if name != f"draft-{d}"]
        assert own - max(others) >= 0.10, f"{d}: own {own} vs best other {max(others)}"
        assert matrix["draft-general"][d] < own


def test_speed_ratio_recorded() -> None:
    """Measured by ``memspec_build``: the target's 5-token verification costs >= 8x every draft's step
    (interleaved timing in ``evaluate``)."""
    res = json.loads((ZOO / "reports" / "evaluation.json").read_text())
    verify = res["timing_ms"]["target_verify_ms"]
    assert res["k"] == 4 and verify / max(res["draft_step_ms"].values()) >= 8.0


def test_heldout_files() -> None:
    prompts = [json.loads(line) for line in (HELDOUT / "prompts.jsonl").open()]
    for d in DOMAINS:
        path = HELDOUT / f"{d}.jsonl"
        # memspec_build keeps whole held-out documents; a rebuild whose split holds much more
        # text than this one (496 kB of code) should be looked at before it is committed
        assert path.stat().st_size <= 600_000
        docs = [json.loads(line)["text"] for line in path.open()]
        mine = [p["prompt"] for p in prompts if p["domain"] == d]
        assert len(mine) >= 20
        assert all(any(p in doc for doc in docs) for p in mine), "prompt not from held-out"


def test_tokenizer_round_trip(target_tokenizer) -> None:
    text = "def f(x):\n    if x:\n\t\treturn  {'a': 1}\n\n\nUSER: Go 2.5 m — naïve ✓\n"
    ids = target_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert target_tokenizer.decode(ids) == text
    for tok in (target_tokenizer.bos_token, target_tokenizer.eos_token,
                target_tokenizer.pad_token):
        assert tok is not None


def test_every_member_carries_the_same_tokenizer_files_and_chat_template() -> None:
    """One tokenizer, copied into every model dir: byte-identical files, chat template included."""
    template = (ROOT / "training" / "chat_template.jinja").read_text()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        contents = {name: (ZOO / name / f).read_bytes() for name in MEMBERS}
        assert len(set(contents.values())) == 1, f"{f} differs between members"
    assert json.loads((ZOO / "target" / "tokenizer_config.json").read_text())["chat_template"] == template


def test_chat_template_renders_the_robot_corpus_format(target_tokenizer) -> None:
    """Messages render as training/corpora/robot.py writes dialogues ("USER: ...\\nROBOT: ...\\n"),
    and the generation prompt tokenises as the corpus does ("ROBOT", ":", then the answer's " Okay")."""
    from training.corpora.robot import build_documents

    messages = [{"role": "system", "content": "You are a warehouse robot."},
                {"role": "user", "content": "Go to the lab"},
                {"role": "assistant", "content": " Okay. Navigating to the lab.\n[cmd] navigate_to goal=\"lab\""},
                {"role": "user", "content": "Stop!"}]
    text = target_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("You are a warehouse robot.\nUSER: Go to the lab\nROBOT: Okay. Navigating to the lab.\n"
                    "[cmd] navigate_to goal=\"lab\"\nUSER: Stop!\nROBOT:")
    doc = build_documents(seed=1, n_docs=1)[0]
    first_user, first_robot = doc.split("\n")[0], doc.split("\n")[1]
    rendered = target_tokenizer.apply_chat_template(
        [{"role": "user", "content": first_user.removeprefix("USER: ")}], tokenize=False, add_generation_prompt=True)
    assert rendered == f"{first_user}\nROBOT:"
    prompt_ids = target_tokenizer(rendered, add_special_tokens=False)["input_ids"]
    corpus_ids = target_tokenizer(f"{first_user}\n{first_robot}", add_special_tokens=False)["input_ids"]
    assert corpus_ids[:len(prompt_ids)] == prompt_ids, "the generation prompt must tokenise as the corpus does"
    with pytest.raises(Exception, match="unknown role"):
        target_tokenizer.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)
