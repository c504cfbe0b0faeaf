"""``training.smollm2.heldout``: fresh questions for ``memspec_build evaluate --prompts``, none a corpus asks."""

from __future__ import annotations

import json

import pytest

from memspec_ros.builder.corpora import parse_chat_messages
from training.smollm2.answers import conversations
from training.smollm2.heldout import heldout_questions, main
from training.smollm2.prompts import DOMAINS, SYSTEM_PROMPT


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_no_question_of_a_corpus_plan_is_held_out(domain) -> None:
    """Every question of a 300-conversation corpus (first and follow-up turns) stays out of the held-out set."""
    asked = {q for plan in conversations(domain, 300, 0) for q in plan}
    fresh = heldout_questions(domain, 60, exclude_up_to=300)
    assert len(fresh) == len(set(fresh)) == 60
    assert not asked & set(fresh)


def test_the_file_is_what_evaluate_reads(tmp_path) -> None:
    out = tmp_path / "q.jsonl"
    assert main(["--out", str(out), "--per-domain", "5"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["domain"] for r in rows] == [d for d in DOMAINS for _ in range(5)]
    for number, row in enumerate(rows, 1):
        messages = parse_chat_messages(row["messages"], f"line {number}", need_answer=False)
        assert messages[0] == ("system", SYSTEM_PROMPT) and messages[1][0] == "user"


def test_a_grammar_that_runs_out_is_a_clear_error(tmp_path) -> None:
    out = tmp_path / "q.jsonl"
    with pytest.raises(SystemExit, match=r"ran out of fresh questions.*--per-domain"):
        main(["--out", str(out), "--per-domain", "60", "--exclude-up-to", "2000"])
    assert not out.exists()
