"""Prose corpus: the Debian ``fortunes`` / ``fortunes-min`` packages (one fortune = one document).

Install with ``apt-get install -y fortunes fortunes-min``. ASCII-art files are dropped, and
so is any single fortune that is mostly punctuation (drawings hidden in other files).
"""
from __future__ import annotations

from pathlib import Path

FORTUNE_DIR = Path("/usr/share/games/fortunes")
SKIP_FILES: frozenset[str] = frozenset({"ascii-art"})
MIN_CHARS = 40


def _is_prose(text: str) -> bool:
    """Reject drawings: require a majority of letters/spaces among non-newline chars."""
    body = text.replace("\n", "")
    if len(body) < MIN_CHARS:
        return False
    wordy = sum(ch.isalpha() or ch == " " for ch in body)
    return wordy / len(body) > 0.75


def build_documents(seed: int = 0) -> list[str]:
    """Return every prose fortune, file by file in sorted order."""
    del seed
    if not FORTUNE_DIR.is_dir():
        raise FileNotFoundError(
            f"{FORTUNE_DIR} missing: run `apt-get install -y fortunes fortunes-min`"
        )
    docs: list[str] = []
    for path in sorted(FORTUNE_DIR.rglob("*")):
        if not path.is_file() or path.suffix in {".dat", ".u8"} or path.name in SKIP_FILES:
            continue
        if "off" in path.relative_to(FORTUNE_DIR).parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace").replace("\t", "    ")
        for chunk in text.split("\n%\n"):
            chunk = chunk.strip("%\n").rstrip()
            if _is_prose(chunk):
                docs.append(chunk + "\n")
    return docs
