"""A user's corpora: reading them, refusing unusable ones, splitting them by document.

Accepted forms, per domain (``--corpus DOMAIN=PATH``, or ``--corpora DIR`` whose entries
``<domain>.txt``, ``<domain>.jsonl`` and ``<domain>/`` name the domains):

* ``.jsonl``: one document per line, its text in a field (``text`` unless told otherwise);
* ``.txt``: documents separated by blank lines (paragraphs: the only document boundary plain
  text has);
* a folder: every ``*.txt`` file in it (recursively) is one document, every ``*.jsonl`` file
  contributes its lines.

The held-out split is by document (95/5, seeded by the domain's name), not by position: a
document is entirely in training or entirely held out, so held-out acceptance is measured on
text no draft, and no predictor, ever saw. A second slice of the training documents (10%,
:func:`split_validation`) is kept from the drafts too: their distillation keeps the checkpoint
that does best on it, and the predictor learns from dialogues cut from it, so neither rewards a
draft for having memorised its training text. Bad input is a :class:`BuildError` naming the file,
the line or byte and the fix, before anything is trained.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memspec_ros.builder.errors import BuildError
from memspec_ros.builder.layout import GENERAL

HELDOUT_FRACTION = 0.05
VALIDATION_FRACTION = 0.10
"""Share of a domain's training documents kept from draft training (at least one document)."""
MIN_DOCUMENTS = 3
"""Two held-out documents (the split keeps at least two) and one to train on."""
_DOMAIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,57}$")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n+")
CHAT_ROLES = ("system", "user", "assistant")

ChatMessages = tuple[tuple[str, str], ...]
"""A conversation as ``(role, content)`` pairs."""
ChatRenderer = Callable[[ChatMessages], str]
"""Renders a whole conversation with the target's chat template (no generation prompt)."""


@dataclass(frozen=True)
class Corpus:
    """One domain's documents as read from the user's files."""

    domain: str
    source: Path
    documents: tuple[str, ...]
    chats: Mapping[str, ChatMessages] = field(default_factory=dict, compare=False)
    """For documents given as chat messages: rendered text -> its messages. Prompts for such a
    document end where an answer begins (:func:`memspec_ros.builder.prompts.chat_prompts`)."""

    @property
    def digest(self) -> str:
        """Hash of the documents' text: what the split and everything after it depend on."""
        h = hashlib.sha256()
        for doc in self.documents:
            h.update(hashlib.sha256(doc.encode()).digest())
        return h.hexdigest()[:16]

    @property
    def characters(self) -> int:
        return sum(map(len, self.documents))


def split_documents(docs: list[str], seed: int) -> tuple[list[str], list[str]]:
    """Shuffle documents with ``seed`` and return ``(train, heldout)`` with a 95/5 split."""
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    n_held = max(2, math.ceil(len(docs) * HELDOUT_FRACTION))
    held = sorted(order[:n_held])
    train = sorted(order[n_held:])
    return [docs[i] for i in train], [docs[i] for i in held]


def split_validation(train: list[str], seed: int) -> tuple[list[str], list[str]]:
    """Split training documents into ``(fit, validation)``: drafts train on ``fit`` only.

    Why: a small domain corpus lets a draft memorise its training text; judged on that text it
    looks better than it is on new text, which is all it sees at run time. The validation
    documents pick each distillation's best checkpoint and make the predictor's training
    dialogues. With a single training document there is nothing to spare: validation is empty.
    """
    if len(train) < 2:
        return list(train), []
    order = list(range(len(train)))
    random.Random(seed + 1).shuffle(order)
    n_val = max(1, math.ceil(len(train) * VALIDATION_FRACTION))
    val = sorted(order[:n_val])
    fit = sorted(order[n_val:])
    return [train[i] for i in fit], [train[i] for i in val]


def domain_seed(domain: str) -> int:
    """A split seed that depends on the domain's name only (stable across runs and machines)."""
    return zlib.crc32(domain.encode())


def write_jsonl(path: Path, docs: Iterable[str], chats: Mapping[str, ChatMessages] | None = None) -> None:
    """Write one ``{"text": ...}`` object per line (with its ``messages`` for a chat document)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chats = chats or {}
    with path.open("w", encoding="utf-8") as fh:
        for doc in docs:
            row: dict[str, object] = {"text": doc}
            if doc in chats:
                row["messages"] = [list(m) for m in chats[doc]]
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_jsonl(path: Path) -> list[str]:
    """Read the ``text`` field of every line of a JSON-lines file this package wrote."""
    return [text for text, _ in read_jsonl_rows(path)]


def read_jsonl_rows(path: Path) -> list[tuple[str, ChatMessages | None]]:
    """Every line of a JSON-lines file this package wrote: its text, and its messages if a chat."""
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [(row["text"], tuple((r, c) for r, c in row["messages"]) if "messages" in row else None) for row in rows]


def parse_corpus_arguments(pairs: list[str], folder: Path | None) -> dict[str, Path]:
    """``{domain: path}`` from ``DOMAIN=PATH`` pairs and/or a folder of per-domain entries."""
    sources: dict[str, Path] = {}
    if folder is not None:
        if not folder.is_dir():
            raise BuildError(f"--corpora {folder} is not a folder: give a folder holding <domain>.txt, "
                             "<domain>.jsonl or <domain>/ entries")
        for entry in sorted(folder.iterdir()):
            if entry.is_dir() or entry.suffix in (".txt", ".jsonl"):
                domain = entry.name if entry.is_dir() else entry.stem
                _add(sources, domain, entry)
        if not sources:
            raise BuildError(f"--corpora {folder} holds no <domain>.txt, <domain>.jsonl or <domain>/ entry")
    for pair in pairs:
        domain, sep, path = pair.partition("=")
        if not sep or not domain or not path:
            raise BuildError(f"--corpus {pair!r} must be DOMAIN=PATH, e.g. --corpus robot=dialogues.jsonl")
        _add(sources, domain, Path(path).expanduser())
    if not sources:
        raise BuildError("no corpora given: name one per domain with --corpus DOMAIN=PATH (or --corpora DIR)")
    return sources


def _add(sources: dict[str, Path], domain: str, path: Path) -> None:
    if not _DOMAIN_RE.match(domain):
        raise BuildError(f"domain name {domain!r} is not usable: 1-58 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit (it becomes the draft's name, draft-<domain>)")
    if domain == GENERAL:
        raise BuildError(f"domain name {GENERAL!r} is reserved for the general draft; rename that corpus, or "
                         "give it as --general-corpus PATH if it is the general draft's own text")
    if domain in sources:
        raise BuildError(f"domain {domain!r} is given twice ({sources[domain]} and {path}); one corpus per domain")
    sources[domain] = path


def read_corpus(domain: str, path: Path, text_field: str = "text", render_chat: ChatRenderer | None = None) -> Corpus:
    """Read one domain's documents; :class:`BuildError` if unreadable, undecodable or empty.

    ``render_chat`` renders ``.jsonl`` lines given as ``messages`` (None: the target has no chat
    template, and such lines are refused).
    """
    chats: dict[str, ChatMessages] = {}
    if not path.exists():
        raise BuildError(f"corpus of domain {domain!r}: {path} does not exist")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".txt", ".jsonl"))
        if not files:
            raise BuildError(f"corpus of domain {domain!r}: folder {path} holds no .txt or .jsonl file")
        docs: list[str] = []
        for f in files:
            docs += _jsonl_documents(f, text_field, render_chat, chats) if f.suffix == ".jsonl" else [_decode(f)]
    elif path.suffix == ".jsonl":
        docs = _jsonl_documents(path, text_field, render_chat, chats)
    elif path.suffix == ".txt":
        docs = _PARAGRAPH_BREAK.split(_decode(path))
    else:
        raise BuildError(f"corpus of domain {domain!r}: {path} is neither .txt, .jsonl nor a folder of them")
    docs = [d for d in docs if d.strip()]
    if not docs:
        raise BuildError(f"corpus of domain {domain!r} ({path}) is empty: it has no text to train on")
    if len(docs) < MIN_DOCUMENTS:
        raise BuildError(
            f"corpus of domain {domain!r} ({path}) has {len(docs)} document(s); at least {MIN_DOCUMENTS} are "
            "needed, since held-out text is split off by document (separate documents by blank lines in a "
            ".txt file, or give one per line of a .jsonl file)")
    docs = [d.strip("\n") if d not in chats else d for d in docs]
    return Corpus(domain=domain, source=path, documents=tuple(docs), chats=chats)


def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BuildError(f"corpus file {path} is not UTF-8 text (undecodable byte at offset {exc.start}): "
                         "convert it, e.g. iconv -f latin1 -t utf-8") from None


def _jsonl_documents(path: Path, text_field: str, render_chat: ChatRenderer | None,
                     chats: dict[str, ChatMessages]) -> list[str]:
    docs = []
    for number, line in enumerate(_decode(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BuildError(f"corpus file {path} line {number} is not JSON ({exc.msg}); "
                             "a .jsonl corpus holds one JSON object per line") from None
        if isinstance(row, dict) and "messages" in row and text_field not in row:
            messages = parse_chat_messages(row["messages"], f"corpus file {path} line {number}")
            if render_chat is None:
                raise BuildError(f"corpus file {path} line {number} is a conversation (messages), but the target's "
                                 "tokenizer has no chat template to render it with: give the text itself in "
                                 f"field {text_field!r}")
            text = render_chat(messages)
            chats[text] = messages
            docs.append(text)
            continue
        if not isinstance(row, dict) or not isinstance(row.get(text_field), str):
            raise BuildError(f"corpus file {path} line {number} has no text field {text_field!r} "
                             "(name the field with --text-field) and no conversation in field 'messages'")
        docs.append(row[text_field])
    return docs


def parse_chat_messages(raw: object, where: str, *, need_answer: bool = True) -> ChatMessages:
    """``messages`` of a corpus line as ``(role, content)`` pairs, checked: the template renders only these.

    ``need_answer``: a corpus conversation must hold an answer to learn; a prompt must not end in one.
    """
    if not isinstance(raw, list) or not raw:
        raise BuildError(f"{where}: messages must be a non-empty list of {{\"role\", \"content\"}} objects")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in CHAT_ROLES or not isinstance(m.get("content"), str):
            raise BuildError(f"{where}: message {i} must be {{\"role\": one of {', '.join(CHAT_ROLES)}, "
                             "\"content\": text}")
        out.append((m["role"], m["content"]))
    if need_answer and not any(role == "assistant" for role, _ in out):
        raise BuildError(f"{where}: the conversation has no assistant message, so there is no answer to learn")
    if not need_answer and out[-1][0] != "user":
        raise BuildError(f"{where}: a prompt's messages must end with the user's message")
    return tuple(out)
