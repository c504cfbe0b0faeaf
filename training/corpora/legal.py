"""Legal corpus: Debian's common licences plus every installed package's copyright file.

The raw text (~17 MB) is mostly the same GPL/BSD paragraphs repeated per package, so we
deduplicate by whitespace-normalised paragraph across the whole corpus; a document is what
remains of one file.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

COMMON_LICENSES = Path("/usr/share/common-licenses")
DOC_ROOT = Path("/usr/share/doc")
MIN_DOC_CHARS = 200
MAX_TOTAL_BYTES = 3_000_000


def _source_files() -> list[Path]:
    """Licence texts first (the canonical wording), then per-package copyright files."""
    files = sorted(p for p in COMMON_LICENSES.iterdir() if p.is_file())
    files += sorted(p for p in DOC_ROOT.glob("*/copyright") if p.is_file())
    return files


def build_documents(seed: int = 0) -> list[str]:
    """Return deduplicated licence/copyright documents (deterministic order)."""
    del seed
    seen: set[str] = set()
    docs: list[str] = []
    total = 0
    for path in _source_files():
        text = path.read_text(encoding="utf-8", errors="replace").replace("\t", "    ")
        kept: list[str] = []
        for para in text.split("\n\n"):
            key = hashlib.sha1(" ".join(para.split()).lower().encode()).hexdigest()
            if not para.strip() or key in seen:
                continue
            seen.add(key)
            kept.append(para.strip("\n"))
        doc = "\n\n".join(kept).strip() + "\n"
        if len(doc) >= MIN_DOC_CHARS:
            docs.append(doc)
            total += len(doc)
        if total >= MAX_TOTAL_BYTES:
            break
    return docs
