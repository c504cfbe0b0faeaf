"""Four domain corpora from text on this machine that the bundled zoo never used.

The worked example of ``docs/own_models.md`` needs what a robot team would have: a few
corpora of the topics its robot talks about. Offline, this machine has:

| domain | source |
|---|---|
| changelog | Debian package changelogs (``/usr/share/doc/*/changelog.Debian.gz``) |
| cpp | the C++ headers shipped in torch's wheel (generated ``ATen/ops`` headers skipped) |
| manual | English manual pages (sections 1, 5 and 8), rendered to plain paragraphs by ``man`` |
| perl | Perl modules (``*.pm``) with their POD documentation |

``--languages`` writes the second set of ``docs/own_models.md`` instead: ``manual_en`` (the
English pages above), ``manual_de`` and ``manual_fr`` (the German and French pages, rendered
the same way, without the paragraphs their translators left in English) and ``perl``.

The zoo's corpora are the CPython standard library, Debian licences and copyright files,
sympy problems, a robot dialogue grammar and fortunes: none of these sources. Each corpus is
split by document into a **pretraining** half (to train the example's target, standing in for
the text a real target was pretrained on) and a **build** half (what the team hands to
``memspec_build``), so the drafts are distilled on text the target did not see.

    python examples/own_models/make_corpora.py --out /tmp/own_models
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Source = tuple[list[Path], Callable[[Path], str], int]
"""A domain's files, how to read one, and where to cut a long one."""

MAX_DOC_CHARS = 6000
"""Long files are cut: a corpus of many documents teaches more than a few huge ones."""
MAX_TRANSLATED_DOC_CHARS = 20000
"""Under 200 pages are translated into each language: a tighter cut would leave too little text."""
ENGLISH_WORDS = frozenset({"the", "and", "of", "is", "to", "this", "with", "for", "are", "be"})
"""Common English words: a paragraph of a translated page made of them was left untranslated."""


def _manual(path: Path) -> str:
    """A manual page as text a person writes: one line per paragraph, no justification,
    hyphenation or indentation. Rendered for a terminal, every line starts with 7-14 spaces and
    justified lines carry runs of spaces: text whose tokens are mostly layout, which any draft
    predicts (the first worked example's general draft accepted 0.836 of it, its specialist
    0.837)."""
    env = {**os.environ, "MANWIDTH": "1000", "LANG": "C.UTF-8"}
    rendered = subprocess.run(["man", "--no-justification", "--no-hyphenation", "-l", str(path)],
                              capture_output=True, env=env, timeout=30, check=True)
    text = subprocess.run(["col", "-bx"], input=rendered.stdout, capture_output=True, timeout=30,
                          check=True).stdout.decode("utf-8")
    return "\n".join(re.sub(r" {2,}", " ", line.strip()) for line in text.splitlines())


def _translated_manual(path: Path) -> str:
    """A translated manual page without the paragraphs its translators left in English.

    Many German and French pages translate the headings and the first paragraphs only; kept,
    their English paragraphs would make the language domains overlap the English one."""
    paragraphs = _manual(path).split("\n\n")
    return "\n\n".join(p for p in paragraphs if not _is_english(p))


def _is_english(paragraph: str) -> bool:
    words = re.findall(r"[a-z]+", paragraph.lower())
    return len(words) >= 8 and sum(w in ENGLISH_WORDS for w in words) >= 0.1 * len(words)


def _source_file(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _changelog(path: Path) -> str:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return fh.read()


def _files(languages: bool) -> dict[str, Source]:
    """Each domain's source, in the order that seeds its shuffle (both sets are reproducible)."""
    perl = {p.resolve() for root in ("/usr/share/perl", "/usr/lib/x86_64-linux-gnu/perl", "/usr/share/perl5",
                                     "/usr/lib/x86_64-linux-gnu/perl-base") for p in Path(root).rglob("*.pm")}
    manuals = [p for s in ("man1", "man5", "man8") for p in Path("/usr/share/man", s).glob("*.gz")]
    if not languages:
        import torch  # the wheel's include folder

        headers = [p for p in (Path(torch.__file__).parent / "include").rglob("*.h")
                   if "ATen/ops" not in p.as_posix()]
        return {"changelog": (list(Path("/usr/share/doc").glob("*/changelog.Debian.gz")), _changelog, MAX_DOC_CHARS),
                "cpp": (headers, _source_file, MAX_DOC_CHARS),
                "manual": (manuals, _manual, MAX_DOC_CHARS),
                "perl": (list(perl), _source_file, MAX_DOC_CHARS)}

    def translated(lang: str) -> list[Path]:
        return list(Path("/usr/share/man", lang).rglob("*.gz"))

    return {"manual_en": (manuals, _manual, MAX_DOC_CHARS),
            "manual_de": (translated("de"), _translated_manual, MAX_TRANSLATED_DOC_CHARS),
            "manual_fr": (translated("fr"), _translated_manual, MAX_TRANSLATED_DOC_CHARS),
            "perl": (list(perl), _source_file, MAX_DOC_CHARS)}


def collect(paths: list[Path], read: Callable[[Path], str], max_doc_chars: int, max_chars: int,
            seed: int) -> list[str]:
    """Distinct documents, cut to ``max_doc_chars``, from files in a seeded random order, up to
    ``max_chars``. Files that are not UTF-8 (a few are Latin-1) or fail to render are skipped."""
    paths = sorted(paths)
    random.Random(seed).shuffle(paths)
    docs, seen, total = [], set(), 0
    for path in paths:
        if total >= max_chars:
            break
        try:
            text = read(path).strip()[:max_doc_chars]
        except (UnicodeDecodeError, subprocess.SubprocessError, OSError):
            continue
        digest = hashlib.sha1(text.encode()).hexdigest()
        if len(text) > 200 and digest not in seen:
            seen.add(digest)
            docs.append(text)
            total += len(text)
    return docs


def main(argv: list[str] | None = None) -> int:
    """Write ``<out>/pretraining/<domain>.jsonl`` and ``<out>/corpora/<domain>.jsonl``."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--chars-per-domain", type=int, default=3_000_000)
    ap.add_argument("--languages", action="store_true",
                    help="English, German and French manual pages and Perl modules, in place of the default set")
    args = ap.parse_args(argv)
    for sub in ("pretraining", "corpora"):
        (args.out / sub).mkdir(parents=True, exist_ok=True)
    for seed, (domain, (paths, read, max_doc_chars)) in enumerate(_files(args.languages).items()):
        docs = collect(paths, read, max_doc_chars, args.chars_per_domain, seed)
        if len(docs) < 40:  # e.g. no manual pages installed, or `man` missing
            raise SystemExit(f"{domain}: only {len(docs)} documents found on this machine; need at least 40")
        halves = {"pretraining": docs[0::2], "corpora": docs[1::2]}
        for sub, part in halves.items():
            with open(args.out / sub / f"{domain}.jsonl", "w", encoding="utf-8") as fh:
                for text in part:
                    fh.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        print(f"{domain}: {len(docs)} documents, {sum(map(len, docs)) / 1e6:.2f} M characters "
              f"({len(halves['pretraining'])} for the target, {len(halves['corpora'])} for memspec_build)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
