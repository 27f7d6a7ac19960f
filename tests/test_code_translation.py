"""The Chinese edition's code cells speak Chinese, and compute exactly what the English ones do.

A reader of the 中文 edition reads the chapters' code in Chinese: its comments, its functions'
docstrings and the labels it prints (in the cell and in its output) come from
book/locale/zh_CN/LC_MESSAGES/code.po (book/_ext/code_translation.py), while the code, and every number
it printed, is the English edition's, run once for both. Read from the book as built (`make book`); the
translator's own rules are checked on small cells.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

from browser_audit import editions

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import code_translation  # noqa: E402

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")
NUMBER = re.compile(r"[-+]?(?:\d+(?:[.,]\d+)*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?", re.I)
ENGLISH, CHINESE = "en", "zh_CN"


def _cells(page: Path) -> list[dict]:
    """Every code cell of a built page: its code (None where the page hides it) and printed outputs."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    cells = []
    for cell in soup.select("article div.cell"):
        code = cell.select_one("div.cell_input pre")
        outputs = [pre.get_text() for pre in cell.select("div.cell_output div.output.stream pre")]
        cells.append({"code": code.get_text() if code else None, "outputs": outputs})
    return cells


@pytest.fixture(scope="module")
def chapters(built_html) -> dict[str, tuple[list[dict], list[dict]]]:
    """{chapter page: (its English cells, its Chinese cells)} for every page with code cells."""
    folders = editions(built_html)
    assert set(folders) == {ENGLISH, CHINESE}, f"editions built: {sorted(folders)}"
    found = {}
    for page in sorted((folders[ENGLISH] / "book").glob("*.html")):
        english = _cells(page)
        if english:
            found[page.name] = (english, _cells(folders[CHINESE] / "book" / page.name))
    assert len(found) >= 14, f"chapters with code cells: {sorted(found)}"
    return found


def _pairs(chapters):
    for page, (english, chinese) in chapters.items():
        assert len(english) == len(chinese), f"{page}: {len(english)} code cells in English, {len(chinese)} in Chinese"
        for index, (en, zh) in enumerate(zip(english, chinese)):
            yield f"{page} cell {index + 1}", en, zh


def _comments(code: str) -> list[str]:
    return [t.string.lstrip("#").strip() for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type == tokenize.COMMENT]


def _language(comment: str, english_comments: set[str], notation: set[str]) -> str | None:
    """"zh"; "en" for a comment with English words as the English edition has it; None for notation
    (``# (B, T, S)``, ``# h_j = tanh(W x_j + b)``: no words, or kept as it is in the catalog)."""
    han, english = len(HAN.findall(comment)), len(ENGLISH_WORD.findall(comment))
    if han and han >= english:
        return "zh"
    if english and comment in english_comments and comment not in notation:
        return "en"
    return None


def test_the_chinese_editions_code_comments_are_chinese(chapters):
    catalog = code_translation.read_catalog(code_translation.catalog_path(ROOT, CHINESE))
    notation = {text for (context, text), translation in catalog.items() if context == "comment" and translation == text}
    counts = {"en": {"zh": 0, "en": 0}, "zh": {"zh": 0, "en": 0}}
    left = []
    for where, en, zh in _pairs(chapters):
        if en["code"] is None:
            continue
        english_comments = set(_comments(en["code"]))
        for edition, cell in (("en", en), ("zh", zh)):
            for comment in _comments(cell["code"]):
                language = _language(comment, english_comments, notation)
                if language:
                    counts[edition][language] += 1
                    if edition == "zh" and language == "en":
                        left.append(f"{where}: # {comment}")
    english, chinese = counts["en"], counts["zh"]
    assert english["en"] > 200, f"the English edition's comments: {english}"  # the chapters' own, in English
    share = chinese["zh"] / sum(chinese.values())
    assert share >= 0.8, f"{share:.0%} of the comments in Chinese; still English: {left[:10]}"
    assert not left, f"comments still in English in the Chinese edition: {left[:10]}"


def test_the_chinese_editions_code_is_the_english_code(chapters):
    for where, en, zh in _pairs(chapters):
        assert (en["code"] is None) == (zh["code"] is None), where
        if en["code"] is None:
            continue
        compile(zh["code"], where, "exec")
        assert code_translation.code_shape(zh["code"]) == code_translation.code_shape(en["code"]), (
            f"{where}: the Chinese cell computes something else than the English one")


def test_outputs_keep_every_number_and_print_their_labels_in_chinese(chapters):
    catalog = code_translation.read_catalog(code_translation.catalog_path(ROOT, CHINESE))
    labels, translated, missed = 0, 0, []
    for where, en, zh in _pairs(chapters):
        assert len(en["outputs"]) == len(zh["outputs"]), where
        for english, chinese in zip(en["outputs"], zh["outputs"]):
            assert sorted(NUMBER.findall(english)) == sorted(NUMBER.findall(chinese)), (
                f"{where}: the printed numbers differ:\n{english[:300]}\n---\n{chinese[:300]}")
        if en["code"] is None:
            continue
        shown_en, shown_zh = "\n".join(en["outputs"]), "\n".join(zh["outputs"])
        for message in code_translation.extract(en["code"]):
            if message.context != "print":
                continue
            pattern = code_translation.label_pattern(message)
            if not pattern.search(shown_en) or catalog.get(("print", message.text)) == message.text:
                continue  # not shown as written (a table's column, say), or the same in Chinese ("logits")
            labels += 1
            if pattern.search(shown_zh) or not HAN.search(shown_zh):
                missed.append(f"{where}: {message.text!r}")
            else:
                translated += 1
    assert labels > 150, labels
    assert not missed, f"{translated} of {labels} printed labels in Chinese; still English: {missed[:10]}"


# ---- The translator ----------------------------------------------------------------------------------

CELL = '''\
import torch

# Two keys, one query: the
# weights sum to 1.
scores = torch.tensor([2.0, 0.0])  # (S,)
weights = scores.softmax(-1)  # one weight per key


def pool(weights, values):
    """The weighted average of the values."""
    return weights @ values


print("weights", weights, " keys", {"first": 1}["first"])
print(f"largest weight {weights.max():.3f} on key {weights.argmax().item() + 1}")
'''

CATALOG = {
    ("comment", "Two keys, one query: the weights sum to 1."): "两个键、一个查询：权重之和为 1。",
    ("comment", "one weight per key"): "每个键一个权重",
    ("docstring", "The weighted average of the values."): "值的加权平均。",
    ("print", "weights"): "权重",
    ("print", " keys"): " 键",
    ("print", "largest weight {weights.max():.3f} on key {weights.argmax().item() + 1}"):
        "最大权重 {weights.max():.3f} 在键 {weights.argmax().item() + 1} 上",
}
OUTPUT = "weights tensor([0.8808, 0.1192])  keys 1\nlargest weight 0.881 on key 1\n"


def test_the_translator_changes_only_what_the_reader_reads():
    result = code_translation.translate_code(CELL, CATALOG)
    assert not result.missing
    # a run of comments is one message, wrapped again to the run's width
    assert "# 两个键、一个查询：\n# 权重之和为 1。\n" in result.code and "# 每个键一个权重" in result.code
    assert "# (S,)" in result.code  # no words: not a message
    assert '"""值的加权平均。"""' in result.code
    assert 'f"最大权重 {weights.max():.3f} 在键 {weights.argmax().item() + 1} 上"' in result.code
    assert '{"first": 1}["first"]' in result.code  # a key the code looks up stays as it is
    assert code_translation.code_shape(result.code) == code_translation.code_shape(CELL)
    shown, found = code_translation.translate_output(OUTPUT, result.labels)
    assert shown == "权重 tensor([0.8808, 0.1192])  键 1\n最大权重 0.881 在键 1 上\n"
    assert len(found) == 3


def test_a_missing_or_unusable_translation_leaves_the_english_and_says_so():
    for key, bad in [(("comment", "one weight per key"), None),
                     (("print", "largest weight {weights.max():.3f} on key {weights.argmax().item() + 1}"),
                      "最大权重 {weights.max():.2f}"),  # a field changed: the code would print something else
                     (("print", "weights"), '权重"')]:  # the literal's own quote would end it
        catalog = dict(CATALOG)
        if bad is None:
            del catalog[key]
        else:
            catalog[key] = bad
        result = code_translation.translate_code(CELL, catalog)
        assert [(m.context, m.text) for m in result.missing] == [key]
        english = f"# {key[1]}" if key[0] == "comment" else f'"{key[1]}"'
        assert english in result.code, result.code  # as the English edition has it
        compile(result.code, "cell", "exec")


def test_the_catalog_has_every_message_of_the_chapters_code(tmp_path):
    """The catalog the build reads: a translation removed from it is a message the build leaves in
    English and counts (and tests/test_translations.py names)."""
    path = code_translation.catalog_path(ROOT, "zh_CN")
    catalog = code_translation.read_catalog(path)
    sources = [cell for page in sorted((ROOT / "book").glob("*.md")) for cell in code_translation.chapter_cells(page)]
    assert sum(len(code_translation.extract(cell)) for cell in sources) > 400
    assert all(not code_translation.translate_code(cell, catalog).missing for cell in sources)

    from babel.messages.pofile import read_po, write_po

    with path.open("rb") as handle:
        po = read_po(handle)
    removed = next(m for m in po if m.id and m.context == "comment")
    po.delete(removed.id, context=removed.context)
    smaller = tmp_path / "code.po"
    with smaller.open("wb") as handle:
        write_po(handle, po, width=0)
    fewer = code_translation.read_catalog(smaller)
    missing = [m.text for cell in sources for m in code_translation.translate_code(cell, fewer).missing]
    assert missing and set(missing) == {removed.id}


def test_comment_runs_are_rewrapped_to_their_width():
    lines = code_translation.wrap("强制教学：解码器运行之前每个输入都已知，所以一次调用就能处理全部 T 个输入。", 40)
    assert len(lines) > 1 and all(code_translation.display_width(line) <= 40 for line in lines)
    assert not any(line[0] in "，。：" for line in lines)
    assert "".join(lines).replace(" ", "") == "强制教学：解码器运行之前每个输入都已知，所以一次调用就能处理全部T个输入。"
