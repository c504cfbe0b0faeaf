"""``training.smollm2.answers --count DOMAIN=N``: per-domain corpus sizes, and a clear error for a bad one."""

from __future__ import annotations

import pytest

from training.smollm2.answers import conversations, domain_counts, main, stale_corpora


def test_counts_name_known_domains() -> None:
    assert domain_counts(["chat=600", "howto=450"]) == {"chat": 600, "howto": 450}
    assert domain_counts([]) == {}


@pytest.mark.parametrize("spec", ["poetry=10", "chat", "chat=0", "chat=many"])
def test_a_bad_count_names_the_domains(spec) -> None:
    with pytest.raises(SystemExit, match=r"expected DOMAIN=N .*commands"):
        domain_counts([spec])


def test_a_larger_count_keeps_the_smaller_plans_first_questions() -> None:
    """The answers of a 300-conversation build stay cached for a larger one: its first questions are the same."""
    small, large = conversations("math", 50, 0), conversations("math", 80, 0)
    assert [c[0] for c in large[:50]] == [c[0] for c in small]


def test_corpora_of_other_domains_in_the_output_folder_are_refused(tmp_path) -> None:
    """``memspec_build --corpora`` reads every file of the folder: a domain left from another grammar (the
    kitchen domain of a trial build) would be built as a draft too, so it is named, not mixed in."""
    (tmp_path / "kitchen.jsonl").write_text("{}\n")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "math.jsonl").write_text("{}\n")
    assert stale_corpora(tmp_path) == ["kitchen.jsonl", "notes.txt"]
    assert stale_corpora(tmp_path / "missing") == []
    with pytest.raises(SystemExit, match=r"kitchen\.jsonl, notes\.txt, which are not .*another --out"):
        main(["--out", str(tmp_path), "--target", str(tmp_path / "no-target")])


def test_general_questions_are_none_of_the_domains() -> None:
    """The general draft's corpus (``--general``) asks outside every domain: none of its questions is a
    question any domain's grammar asks, so the specialists' margins over it are read on text it never saw."""
    from training.smollm2.prompts import DOMAINS, GENERAL_TOPICS, questions

    general = {q for plan in conversations(GENERAL_TOPICS, 300, 0) for q in plan}
    assert len(general) >= 300
    for domain in DOMAINS:
        assert not general & set(questions(domain, 2000, 0))


@pytest.mark.parametrize("args", [["--general", "-1"], ["--general-out", "{out}/general.jsonl"]])
def test_a_general_corpus_in_the_corpora_folder_or_a_negative_count_is_refused(tmp_path, args) -> None:
    """``memspec_build --corpora`` would build a ``general.jsonl`` inside the folder as a domain (and refuse
    the reserved name): the general conversations go beside the folder."""
    out = tmp_path / "corpora"
    with pytest.raises(SystemExit, match=r"--general"):
        main(["--out", str(out), "--target", str(tmp_path / "no-target"), *[a.format(out=out) for a in args]])


def test_an_opener_keeps_the_pronoun_capital() -> None:
    """An opener lower-cases the question's first letter ("Hey, what is ..."), but not the pronoun: the
    target answers "Hey, I feel tired today." as people type it, not "Hey, i feel ..."."""
    import re

    from training.smollm2.prompts import questions

    asked = questions("chat", 900, 0) + questions("math", 3000, 0)
    assert not [q for q in asked if re.search(r"(^|[ ,:])i ", q)]
    assert [q for q in asked if re.match(r"(Hey|Robot|Quick question|I was wondering)[,:] I ", q)]
