"""One thing, one Chinese term: the terms the Chinese edition settled on stay settled.

scripts/check_translations.py's ``CHOSEN_TERMS`` names, for each thing that Chinese texts call by several
names, the one the edition uses (hidden state 隐状态, greedy decoding 贪心解码, context vector 上下文向量,
a Jupyter notebook "Notebook", widget 交互组件, visible tests 可见测试) and the variants it rejected.
Here: a catalog whose translations drift to a rejected variant fails the check, by name; where the
English itself names a variant (a chapter quoting the notes' 隐含层节点状态, "greedy search"), the
translation may name it too; every catalog of the course passes; and the glossary gives the terms
with their alternatives.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repo_scripts import script

ROOT = Path(__file__).resolve().parents[1]


check_translations = script("check_translations")

# (English, a translation that drifted, the drifted word the check must name)
DRIFTED = [
    ("The encoder's hidden state $h_j$ has read $x_1, \\dots, x_j$.", "编码器的隐含层节点状态 $h_j$ 已经读过 $x_1, \\dots, x_j$。", "隐含层节点状态"),
    ("Each step updates the hidden state.", "每一步都更新隐藏状态。", "隐藏状态"),
    ("This is **greedy decoding**: it never reconsiders a word.", "这就是**贪心搜索**（greedy decoding）：一个词写下就不再改。", "贪心搜索"),
    ("Its context vector $C_i$ sums the states.", "它的中间语义表示 $C_i$ 把各个状态加起来。", "中间语义表示"),
    ("Download the notebook from its page.", "请从作业页面下载笔记本。", "笔记本"),
    ("Each assignment is a Jupyter notebook.", "每份作业都是一个 Jupyter 记事本。", "记事本"),
    ("The widget below puts the keys in a plane.", "下面的控件把键放在一个平面上。", "控件"),
    ("The widget computes in the page.", "这个小部件直接在网页中计算。", "小部件"),
    ("Its visible tests tell you what is wrong.", "其中公开的测试会告诉你哪里出了错。", "公开的测试"),
]


def _catalog(path: Path, pairs: list[tuple[str, str]]) -> Path:
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    catalog = Catalog(locale="zh_CN")
    for source, translation in pairs:
        catalog.add(source, translation)
    with path.open("wb") as handle:
        write_po(handle, catalog, width=0)
    return path


def test_a_catalog_that_drifts_to_a_rejected_variant_fails_naming_it(tmp_path, capsys):
    path = _catalog(tmp_path / "drifted.po", [(english, drifted) for english, drifted, _ in DRIFTED])
    problems = check_translations.check_catalog(path)
    for english, _, word in DRIFTED:
        assert any(p.message == english and repr(word) in p.what for p in problems), (word, [str(p) for p in problems])
    assert check_translations.main([str(path)]) == 1
    assert "隐含层节点状态" in capsys.readouterr().out


@pytest.mark.parametrize("catalog, term, drifted", [
    ("book/locale/zh_CN/LC_MESSAGES/book/06-attention-decoder.po", "隐状态", "隐含层节点状态"),
    ("book/locale/zh_CN/LC_MESSAGES/book/exercises/index.po", " Notebook", "笔记本"),
])
def test_a_real_catalog_retranslated_with_a_rejected_variant_fails(tmp_path, catalog, term, drifted):
    text = (ROOT / catalog).read_text(encoding="utf-8")
    assert check_translations.check_catalog(ROOT / catalog) == []
    drifted_catalog = tmp_path / Path(catalog).name
    drifted_catalog.write_text(text.replace(term, drifted), encoding="utf-8")
    problems = check_translations.check_catalog(drifted_catalog)
    assert len([p for p in problems if repr(drifted) in p.what]) >= 2, [str(p) for p in problems]


def test_the_same_sentences_with_the_editions_terms_pass(tmp_path):
    settled = [
        ("The encoder's hidden state $h_j$ has read $x_1, \\dots, x_j$.", "编码器的隐状态 $h_j$ 已经读过 $x_1, \\dots, x_j$。"),
        ("This is **greedy decoding**: it never reconsiders a word.", "这就是**贪心解码**（greedy decoding）：一个词写下就不再改。"),
        ("Its context vector $C_i$ sums the states.", "它的上下文向量 $C_i$ 把各个状态加起来。"),
        ("Download the notebook from its page.", "请从作业页面下载 Notebook。"),
        ("The widget below puts the keys in a plane.", "下面的交互组件把键放在一个平面上。"),
        ("Its visible tests tell you what is wrong.", "其中的可见测试会告诉你哪里出了错。"),
    ]
    assert check_translations.check_catalog(_catalog(tmp_path / "settled.po", settled)) == []


@pytest.mark.parametrize("source, translation", [
    # The English names the notes' word: the translation may name it as well.
    ("a **hidden state** (隐含层节点状态, also called 隐状态) $h_j$", "**隐状态**（hidden state，笔记称为隐含层节点状态）$h_j$"),
    # "greedy search" is what the English says.
    ("Greedy search takes the best word at every step.", "贪心搜索在每一步都取最好的词。"),
    # 控件 is a control; it is only the wrong word for the widget itself.
    ("Move the sliders: each control changes one number.", "拖动滑块：每个控件改变一个数。"),
    # A laptop is not a notebook; code is not prose.
    ("It runs on a laptop.", "它能在笔记本电脑上运行。"),
    ("Open `notebook.ipynb` in JupyterLab.", "在 JupyterLab 中打开 `notebook.ipynb`。"),
])
def test_what_the_english_itself_says_is_not_drift(source, translation):
    assert check_translations.term_problems(source, translation) == []


def test_where_the_english_names_the_thing_the_translation_must_use_the_term():
    found = check_translations.term_problems("Pick an output step in the widget.", "在组件中选一个输出步。")
    assert found == ["the source says 'widget': the translation should use 交互组件"]


def test_every_catalog_of_the_course_uses_the_editions_terms():
    from babel.messages.pofile import read_po

    named = {term.name: 0 for term in check_translations.CHOSEN_TERMS}
    problems = []
    for path in check_translations.catalogs(ROOT):
        with path.open("rb") as handle:
            for message in read_po(handle):
                if not (isinstance(message.id, str) and message.id and message.string):
                    continue
                problems += [f"{path.name}: {p}" for p in check_translations.term_problems(message.id, message.string)]
                for term in check_translations.CHOSEN_TERMS:
                    named[term.name] += bool(re.search(term.english, message.id, re.I))
    assert problems == []
    # The rules bite: the catalogs' English names every one of the things.
    assert all(count > 0 for count in named.values()), named


def test_the_glossary_gives_the_terms_and_their_alternatives():
    glossary = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    body = glossary.split("```{glossary}\n", 1)[1].split("\n```", 1)[0]
    entries = {}
    for block in re.split(r"\n\s*\n", body.strip("\n")):
        lines = block.splitlines()
        terms = [line.strip() for line in lines if not line[:1].isspace()]
        entries[terms[0]] = (terms, " ".join(line.strip() for line in lines if line[:1].isspace()))
    terms, definition = entries["hidden state"]
    assert {"隐状态", "隐含层节点状态"} <= set(terms) and "隐状态 is the usual one, and the Chinese edition's" in definition
    terms, definition = entries["greedy decoding"]
    assert terms.index("贪心解码") < terms.index("贪心搜索") and "贪心解码 is the Chinese edition's term" in definition
    terms, definition = entries["context vector"]
    assert {"上下文向量", "上下文变量"} <= set(terms) and "《动手学深度学习》 calls it 上下文变量" in definition
    terms, _ = entries["similarity score"]
    assert "分数" in terms
