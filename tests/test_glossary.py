"""Every term a chapter introduces with its Chinese name is in the glossary, in both languages."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HAN = "\u4e00-\u9fff"
# A chapter introduces a term as "soft attention (软注意力)" or "(注意力范围, the range of attention)".
INTRODUCED = re.compile(rf"\(([{HAN}]+)[,)]")
# A glossary entry is a line "english words 中文" followed by an indented definition.
ENTRY = re.compile(rf"^([A-Za-z][A-Za-z \-]*?) ([{HAN}]+)†?$", re.MULTILINE)


def glossary_entries() -> dict[str, str]:
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    return {chinese: english for english, chinese in ENTRY.findall(text)}


def test_every_glossary_entry_has_an_english_and_a_chinese_name():
    entries = glossary_entries()
    assert len(entries) >= 25
    assert all(english.strip() for english in entries.values())


def test_every_term_a_chapter_introduces_is_in_the_glossary():
    entries = glossary_entries()
    missing = {}
    for chapter in sorted((ROOT / "book").glob("[0-9]*.md")):
        for term in INTRODUCED.findall(chapter.read_text(encoding="utf-8")):
            if term not in entries:
                missing.setdefault(chapter.name, []).append(term)
    assert missing == {}, f"terms introduced in chapters but missing from book/glossary.md: {missing}"
