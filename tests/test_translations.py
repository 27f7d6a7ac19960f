"""The Chinese edition's translations are complete and stay complete.

Every catalog (the chapters' in book/locale, their code cells' in book/locale/zh_CN/LC_MESSAGES/code.po,
the package's in attention_course/locale) has a translation
for every message, none fuzzy, each keeping its source's markup and set in Chinese typography
(scripts/check_translations.py). And every catalog matches its source as it is now: a chapter, a
figure label, a code cell's comment or a widget string that changed without `make catalogs` fails here, naming what is missing
and what is left over.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repo_scripts import script

ROOT = Path(__file__).resolve().parents[1]
BOOK_CATALOGS = ROOT / "book" / "locale" / "zh_CN" / "LC_MESSAGES"
CODE_CATALOG = BOOK_CATALOGS / "code.po"
PACKAGE_CATALOGS = ROOT / "attention_course" / "locale" / "zh_CN" / "LC_MESSAGES"


check_translations = script("check_translations")
update_catalogs = script("update_catalogs")


def _read(path: Path):
    from babel.messages.pofile import read_po

    with path.open("rb") as handle:
        return read_po(handle)


def _ids(catalog) -> set[str]:
    return {message.id for message in catalog if message.id and isinstance(message.id, str)}


CATALOGS = check_translations.catalogs(ROOT)


def _page_catalogs() -> dict[str, Path]:
    """{page: its catalog} of the chapters' prose (the code cells' catalog is not a page's)."""
    return {p.relative_to(BOOK_CATALOGS).with_suffix("").as_posix(): p for p in BOOK_CATALOGS.rglob("*.po")
            if p != CODE_CATALOG}


def test_every_page_and_domain_has_a_catalog():
    pages = set(_page_catalogs())
    assert {"book/index", "book/glossary", "book/02-soft-hard", "book/exercises/soft-hard"} <= pages
    assert CODE_CATALOG.is_file()
    assert {p.stem for p in PACKAGE_CATALOGS.glob("*.po")} == {"figures", "widgets", "book", "grading", "exercises"}
    # and the code cells' catalog, and the supplement to Sphinx's and the theme's own catalogs (book/_ext/locale)
    assert CODE_CATALOG in CATALOGS
    assert len(CATALOGS) == len(pages) + 1 + 5 + 2


@pytest.mark.parametrize("catalog", CATALOGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_message_is_translated_faithfully_and_set_in_chinese_typography(catalog):
    problems = check_translations.check_catalog(catalog)
    assert not problems, "\n".join(map(str, problems))


def test_the_chapters_catalogs_hold_exactly_the_chapters_messages():
    # The messages Sphinx's gettext builder would extract, read from the English build's doctrees (`make test`
    # builds the book first; a page whose doctree is older than its source fails here).
    stale = {}
    pages = update_catalogs.built_book_messages(ROOT)
    pos = _page_catalogs()
    assert set(pos) == set(pages), f"catalogs without a page: {sorted(set(pos) - set(pages))}; pages without a catalog: {sorted(set(pages) - set(pos))}"
    for page, source in pages.items():
        translated = _ids(_read(pos[page]))
        if source != translated:
            stale[page] = {"new or changed in the chapter": sorted(source - translated)[:5],
                           "no longer in the chapter": sorted(translated - source)[:5]}
    assert not stale, f"run `make catalogs` and translate: {stale}"


def test_the_books_templates_messages_are_translated_with_the_themes_labels():
    # The book's HTML templates (book/_ext/templates) name some of the theme's buttons in _(): their
    # messages must be in the supplement to Sphinx's and the theme's catalogs.
    templates = update_catalogs.template_messages(ROOT)
    assert {"Toggle primary sidebar", "Main"} <= templates
    supplement = _ids(_read(ROOT / "book" / "_ext" / "locale" / "zh_CN" / "LC_MESSAGES" / "sphinx.po"))
    assert templates <= supplement, f"not in book/_ext/locale/zh_CN/LC_MESSAGES/sphinx.po: {sorted(templates - supplement)}"


def test_the_code_cells_catalog_holds_exactly_the_messages_of_the_chapters_code_cells():
    # Their comments, docstrings and printed labels (book/_ext/code_translation.py), by kind.
    def keyed(catalog) -> set[tuple[str, str]]:
        return {(m.context, m.id) for m in catalog if m.id and isinstance(m.id, str)}

    source, translated = keyed(update_catalogs.code_template(ROOT)), keyed(_read(CODE_CATALOG))
    assert len(source) > 400
    assert source == translated, (f"run `make catalogs` and translate: new or changed in the code cells "
                                  f"{sorted(source - translated)[:5]}; no longer there {sorted(translated - source)[:5]}")


def test_the_packages_catalogs_hold_exactly_the_messages_of_its_code():
    stale = {}
    for domain, template in update_catalogs.package_templates(ROOT).items():
        source, translated = _ids(template), _ids(_read(PACKAGE_CATALOGS / f"{domain}.po"))
        if source != translated:
            stale[domain] = {"new or changed in the code": sorted(source - translated),
                             "no longer in the code": sorted(translated - source)}
    assert not stale, f"run `make catalogs` and translate: {stale}"


def test_the_package_marks_its_messages_so_that_they_can_be_found():
    # tr(f"...") or tr("..." + x) cannot be looked up whole, nor found by `make catalogs`; nor can a
    # message passed to a translator that is not called tr (translator(lang)("...")).
    pattern = re.compile(r"""\b(?:tr|N_)\(\s*(?:f["']|["'][^"']*["']\s*[+%])|\bt\(\s*`|\btranslator\([^()]*\)\(""")
    sources = [*ROOT.glob("attention_course/figures/*.py"), *ROOT.glob("attention_course/widgets/*.[pj][ys]"),
               *ROOT.glob("book/_ext/*.py"), *ROOT.glob("book/_ext/reader_static/*.js")]
    offending = [f"{p.relative_to(ROOT)}:{n}" for p in sources
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not offending, f"messages built at run time (use a {{placeholder}} and .format()): {offending}"


# ---- The checker itself: it must catch what a reviewer would ----------------------------------------

@pytest.mark.parametrize(
    "translation, what",
    [
        ("软注意力(soft attention)会看所有的键.", "ASCII parentheses"),
        ("使用softmax计算权重。", "no space between Chinese and a Latin word"),
        ("权重 $a_j$ 之和为1。", "no space between Chinese and a Latin word"),
        ("注意力 ，然后求和。", "a space beside full-width punctuation"),
        ("中 文", "a space between Chinese characters"),
        ("**用时：**约 35 分钟", "emphasis"),
        ("它是“软注意力”, 也是全局的。", "ASCII , ; : ! ?"),
        ('所谓"软注意力"。', "ASCII quotes"),
    ],
)
def test_the_checker_catches_english_typography_in_chinese(translation, what):
    found = check_translations.typography_problems(translation, "")
    assert any(what in problem for problem in found), found


@pytest.mark.parametrize(
    "translation",
    ["**软注意力**（soft attention）会看所有的键。", "权重 $a_j$ 之和为 1，见式 {eq}`eq-x`。", "如{numref}`fig-a` 所示。",
     "第 2\\. 节", "输出 (0.755, 0.335) 是 $v_1$ 与 $v_2$ 的混合。", "“汤姆 追逐 杰瑞”是译文。", "**用时**：约 35 分钟"],
)
def test_the_checker_accepts_chinese_typography(translation):
    assert check_translations.typography_problems(translation, "") == []


def test_the_checker_catches_lost_markup_and_the_notes_terms():
    source = "**Soft attention** weighs $v_j$ with `softmax`, see {eq}`eq-soft` and {doc}`04-three-stages`."
    lost = check_translations.markup_problems(source, "**软注意力**用 softmax 给 $v_i$ 加权，见 {doc}`第 4 章 <04-three-stages>`。")
    assert any("math" in p for p in lost) and any("inline code" in p for p in lost) and any("roles" in p for p in lost)
    assert check_translations.term_problems(source, "**柔性注意力**……")
    assert not check_translations.term_problems("See {doc}`05-encoder-decoder`.", "见 {doc}`第 5 章 <05-encoder-decoder>`。")
