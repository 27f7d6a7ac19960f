"""Sphinx extension: the book in two editions, English and 中文, from one source.

The chapters are written once, in English. ``scripts/build_book.py`` (``make book``) builds the English
edition into ``_build/html`` and then each other edition (``course_editions`` in ``_config.yml``) into
its folder below it (``_build/html/zh``), with Sphinx's ``language`` set and the chapters' prose
translated from the gettext catalogs in ``book/locale`` (``make catalogs`` writes them;
``tests/test_translations.py`` holds them complete and current). Both builds use one execution cache,
so the chapters run once for both. This extension does the rest:

- **Twins.** Every page links to the same page of the other edition ("English | 中文", in the article
  header of every page; ``templates/edition-switcher.html``), at the same section: the section ids are
  the English ones in both editions, and ``reader_static/course-reader.js`` carries the reader's place
  (``#section``) across. Every page names its twins for search engines (``<link rel="alternate"
  hreflang>``).
- **Nothing silently left in English.** A translation that Sphinx could not apply (it parsed into
  something other than what it replaces, e.g. a title that begins "2. " read as a list: write "2\\. ")
  is a warning, so the ``-W`` build fails and names the message. Display math is not a message.
  Messages without a translation are counted and reported at the end of the build (the tests fail on
  any). Display math and the glossary's terms (English and Chinese in both editions) are not messages.
- **The glossary, both ways.** In the English edition the entries are sorted by the English term; in
  the Chinese one by the pinyin of the Chinese term, which comes first. Each edition ends the glossary
  with an index in the other order (by Chinese term in pinyin order; by English term), whose entries
  link to the glossary's.
- **What the extensions and the theme write.** The language switcher, the glossary's indexes, glossary
  links' titles, the search field and the reader scripts' labels are translated from the package's
  ``book`` catalog (``attention_course.i18n``); a missing translation there fails the build. The labels
  of Sphinx and of the theme that their own Chinese catalogs lack (or give in traditional characters)
  are in ``locale/zh_CN/LC_MESSAGES/{sphinx,booktheme}.po`` beside this file; the theme's few labels
  written in English in its templates get them through ``templates/`` (toggle buttons, the chapter
  list's landmark).
- **The edition's figures.** Chapters draw each figure in every language at once
  (``attention_course.figures.editions``); MyST-NB, through the course's mime renderer, puts the
  edition's drawing on the page, and a figure drawn in English only is a warning in the other
  editions. The gettext builder sees figures too, so that their alt text is a message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain
from sphinx.util.nodes import extract_messages

from attention_course.i18n import LANGUAGES, language_of, translator
from reader_ux import files_hash

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
# The reader scripts whose labels are translated (their messages: t("...") calls).
TRANSLATED_SCRIPTS = (HERE / "reader_static" / "course-reader.js",)
_SCRIPT_MESSAGE = re.compile(r"""\bt\(\s*"((?:[^"\\]|\\.)*)"\s*[,)]""")
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAS_HAN = re.compile(f"[{HAN}]")


def edition_of(config: Config) -> str:
    """The course language of the edition being built: "en" or "zh"."""
    return language_of(config.language)


def editions(config: Config) -> list[dict]:
    """The editions, in ``course_editions`` order: {"language" (Sphinx's), "lang" (the course's), "path", "label", ...}."""
    listed = []
    for language, settings in config.course_editions.items():
        listed.append({"language": language, "lang": language_of(language), **settings})
    return listed


def configure(app: Sphinx, config: Config) -> None:
    # A change to this extension (what it translates, checks and reorders at read time) re-reads every page.
    config.course_editions_code = files_hash(Path(__file__))
    if not config.course_editions:
        return
    lang = edition_of(config)
    current = next((e for e in editions(config) if e["lang"] == lang), None)
    if current is None:
        raise ValueError(f"language {config.language!r} is not one of course_editions: {list(config.course_editions)}")
    if current.get("title"):
        config.html_title = current["title"]
        config.project = current["title"]
    if current.get("author"):
        config.author = current["author"]
    options = dict(config.html_theme_options)
    tr = translator(lang, "book", strict=True)
    options["search_bar_text"] = tr("Search this book…")
    end = list(options.get("article_header_end") or ["article-header-buttons.html"])
    if "edition-switcher.html" not in end:
        options["article_header_end"] = ["edition-switcher.html", *end]
    config.html_theme_options = options
    # In the Chinese edition a term and its English gloss sit side by side: link the entry once.
    config.glossary_links_once_per_entry = lang != LANGUAGES[0]
    # The scripts' labels, in this edition's language, on every page (a few hundred bytes).
    app.add_js_file(None, body="window.courseMessages = " + json.dumps(script_messages(lang), ensure_ascii=False) + ";",
                    priority=400)


def script_messages(lang: str) -> dict[str, str]:
    """{message: translation} for every label of the reader scripts; {} in English."""
    if lang == LANGUAGES[0]:
        return {}
    tr = translator(lang, "book", strict=True)
    found = []
    for script in TRANSLATED_SCRIPTS:
        found += [json.loads(f'"{m}"') for m in _SCRIPT_MESSAGE.findall(script.read_text(encoding="utf-8"))]
    return {message: tr(message) for message in sorted(set(found))}


def theme_labels(app: Sphinx) -> None:
    """sphinx-book-theme's labels (its "booktheme" catalog) where this book's catalog has its own
    (``locale/<language>/LC_MESSAGES/booktheme.po``: the theme's zh_CN says 列印成 PDF, in traditional
    characters): ours first, the theme's behind it. Sphinx compiles only the "sphinx" catalogs of
    ``locale_dirs`` by itself, and the theme registered its catalog before this extension loaded."""
    import gettext

    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    from sphinx import locale

    source = HERE / "locale" / (app.config.language or "en") / "LC_MESSAGES" / "booktheme.po"
    if not source.is_file():
        return
    compiled = Path(app.doctreedir) / "editions-booktheme.mo"
    with source.open("rb") as handle, compiled.open("wb") as out:
        write_mo(out, read_po(handle))
    with compiled.open("rb") as handle:
        ours = gettext.GNUTranslations(handle)
    key = ("general", "booktheme")
    if key in locale.translators:
        ours.add_fallback(locale.translators[key])
    locale.translators[key] = ours


def mime_priority_for_gettext(app: Sphinx) -> None:
    """The gettext builder has no MyST-NB mime priority of its own: give it HTML's, so that figures (and
    their alt text) are in the catalogs as they are on the page."""
    if app.builder.name != "gettext":
        return
    from myst_nb.core.render import base_render_priority

    html = base_render_priority()["html"]
    app.config.nb_mime_priority_overrides = list(app.config.nb_mime_priority_overrides) + [
        ("gettext", mime, priority) for mime, priority in html.items()
    ]


class NotMessages(SphinxTransform):
    """What is the same in every edition is not a message (before Locale, 20): display math, and the
    glossary's terms (each entry names itself in English and in Chinese in both editions; a translated
    term would name an entry twice)."""

    default_priority = 15

    def apply(self, **kwargs) -> None:
        for block in self.document.findall(nodes.math_block):
            block["translatable"] = False
        for glossary in self.document.findall(addnodes.glossary):
            for term in glossary.findall(nodes.term):
                term["translatable"] = False


class TocCaptions(SphinxTransform):
    """The captions of the table of contents ("Chapters"), which Jupyter Book's toctrees get after
    Sphinx's Locale transform has run (sphinx-external-toc inserts them at priority 100): translated
    here, from the page's catalog, like any other message."""

    default_priority = 101

    def apply(self, **kwargs) -> None:
        if not self.config.course_editions or edition_of(self.config) == LANGUAGES[0]:
            return
        catalog = _merged_catalog(self.env.srcdir, self.config,
                                  docname_to_domain(self.env.docname, self.config.gettext_compact))
        for toctree in self.document.findall(addnodes.toctree):
            caption = toctree.get("caption")
            if caption and catalog.get(caption, "").strip():
                toctree["caption"] = toctree["rawcaption"] = catalog[caption]


class TranslationsApplied(SphinxTransform):
    """After Locale (20), the toctrees' captions (101) and docutils' DocInfo (340, which makes the front
    matter a docinfo, no reader's text): a message whose translation was not applied is a warning;
    untranslated messages are counted."""

    default_priority = 345

    def apply(self, **kwargs) -> None:
        if not self.config.course_editions or edition_of(self.config) == LANGUAGES[0]:
            return
        from sphinx.builders.gettext import MessageCatalogBuilder

        if isinstance(self.app.builder, MessageCatalogBuilder):
            return
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        catalog = _merged_catalog(self.env.srcdir, self.config, domain)
        translations = set(catalog.values())
        untranslated = []
        for node, message in extract_messages(self.document):
            # Sphinx leaves an image whose alt text it translated unmarked: its alt is a translation now.
            # (An empty message, a toctree's missing caption, is nothing to translate.)
            if node.get("translated") or message in translations or not message.strip() or _in_docinfo(node):
                continue
            translation = catalog.get(message, "")
            if not translation.strip():
                untranslated.append(message)
            elif translation != message:
                logger.warning(
                    "editions: the %s translation of this message was not applied (Sphinx parsed it into "
                    "something else; a title that starts with a number and a full stop needs '\\.'): %r",
                    self.config.language, message[:120], location=node, type="editions", subtype="not_applied",
                )
        counts = getattr(self.env, "editions_untranslated", {})
        counts[self.env.docname] = untranslated
        self.env.editions_untranslated = counts


def _in_docinfo(node: nodes.Node) -> bool:
    """Whether ``node`` is part of a page's front matter (jupytext's header), which no reader sees."""
    while node is not None:
        if isinstance(node, nodes.docinfo):
            return True
        node = node.parent
    return False


def _merged_catalog(srcdir, config: Config, domain: str) -> dict[str, str]:
    """The messages Sphinx's Locale transform translates ``domain`` with, merged as it merges them."""
    dirs = [str(Path(srcdir) / directory) for directory in config.locale_dirs]
    catalog, has_catalog = init_locale(dirs, config.language, domain)
    if not has_catalog:
        return {}
    chain = []
    while catalog is not None:
        chain.append(getattr(catalog, "_catalog", None) or {})
        catalog = getattr(catalog, "_fallback", None)
    merged: dict[str, str] = {}
    for table in reversed(chain):
        merged |= {k: v for k, v in table.items() if isinstance(k, str)}
    return merged


def report_untranslated(app: Sphinx, exception) -> None:
    if exception is not None or edition_of(app.config) == LANGUAGES[0]:
        return
    found = {doc: messages for doc, messages in getattr(app.env, "editions_untranslated", {}).items() if messages}
    if found:
        listed = "; ".join(f"{doc} ({len(messages)}: {messages[0][:50]!r}…)" for doc, messages in sorted(found.items()))
        logger.info(f"editions: untranslated messages in the {app.config.language} edition: {listed} "
                    "(run `make catalogs` and translate them in book/locale)")


class FiguresInTheEditionsLanguage(SphinxTransform):
    """In a non-English edition, a figure that came drawn in English only is a warning: its figure
    function must draw every language (``attention_course.figures.editions``)."""

    default_priority = 23

    def apply(self, **kwargs) -> None:
        if not self.config.course_editions or edition_of(self.config) == LANGUAGES[0]:
            return
        from attention_course.figures.editions import FIGURE_EDITIONS_MIME

        for bundle in self.document.findall(nodes.container):
            if bundle.get("nb_element") != "mime_bundle":
                continue
            kinds = {child.get("mime_type") for child in bundle.children}
            if "image/png" in kinds and FIGURE_EDITIONS_MIME not in kinds:
                logger.warning(
                    "editions: this figure was drawn in English only, so the %s edition would show it in "
                    "English: decorate its figure function with @in_every_language and draw its text with tr() "
                    "(attention_course/figures/editions.py)", self.config.language,
                    location=bundle, type="editions", subtype="figure_language",
                )


# ---- The glossary, both ways ---------------------------------------------------------------------

# Readings that pypinyin's dictionary gets wrong for the glossary's terms (重置 "reset" is chóng zhì).
PINYIN_PHRASES = {"重置": [["chóng"], ["zhì"]]}


def pinyin_key(text: str) -> tuple:
    """Sort key of a Chinese term in dictionary (pinyin) order: syllables without tones, then tones."""
    from pypinyin import Style, lazy_pinyin, load_phrases_dict

    load_phrases_dict(PINYIN_PHRASES)

    syllables = lazy_pinyin(text, style=Style.TONE3, neutral_tone_with_five=True, errors="default")
    plain = tuple(re.sub(r"\d", "", s).lower() for s in syllables)
    tones = tuple(int(m.group()) if (m := re.search(r"\d", s)) else 0 for s in syllables)
    return plain, tones, text


def english_key(text: str) -> str:
    """Sort key of an English term, as the glossary sorts it: case, hyphens and spaces ignored."""
    return re.sub(r"[-\u2010-\u2014\s]", "", text.casefold())


def _entry_terms(item: nodes.definition_list_item) -> tuple[list[nodes.term], list[nodes.term]]:
    terms = [child for child in item.children if isinstance(child, nodes.term)]
    chinese = [t for t in terms if _HAS_HAN.search(t.astext())]
    english = [t for t in terms if not _HAS_HAN.search(t.astext())]
    return english, chinese


class GlossaryForEdition(SphinxTransform):
    """In a non-English edition: each entry's Chinese terms first, entries in pinyin order. In every
    edition: an index in the other order after the glossary."""

    default_priority = 22

    def apply(self, **kwargs) -> None:
        if not self.config.course_editions:
            return
        lang = edition_of(self.config)
        tr = translator(lang, "book", strict=True)
        for glossary in list(self.document.findall(addnodes.glossary)):
            lists = list(glossary.findall(nodes.definition_list))
            rows = []  # (English terms, Chinese terms, anchor)
            for dlist in lists:
                items = [c for c in dlist.children if isinstance(c, nodes.definition_list_item)]
                for item in items:
                    english, chinese = _entry_terms(item)
                    if lang != LANGUAGES[0] and chinese:
                        definition = [c for c in item.children if not isinstance(c, nodes.term)]
                        item.children = []
                        item.extend(chinese + english + definition)
                    first = next(c for c in item.children if isinstance(c, nodes.term))
                    rows.append(([t.astext() for t in english], [t.astext() for t in chinese], first["ids"][0]))
                if lang != LANGUAGES[0]:
                    items.sort(key=lambda item: pinyin_key(_entry_terms(item)[1][0].astext())
                               if _entry_terms(item)[1] else ((), (), ""))
                    dlist.children = []
                    dlist.extend(items)
            if lang == LANGUAGES[0]:
                title, section_id = tr("Index by Chinese term (pinyin order)"), "index-by-chinese-term"
                listed = sorted(((zh, en, anchor) for en, chinese, anchor in rows for zh in chinese),
                                key=lambda row: pinyin_key(row[0]))
                listed = [(zh, " · ".join(en), anchor, "zh") for zh, en, anchor in listed]
            else:
                title, section_id = tr("Index by English term"), "index-by-english-term"
                listed = sorted(((en, chinese, anchor) for english, chinese, anchor in rows for en in english),
                                key=lambda row: english_key(row[0]))
                listed = [(en, " · ".join(zh), anchor, "en") for en, zh, anchor in listed]
            glossary.parent.insert(glossary.parent.index(glossary) + 1, self._index(title, section_id, listed))

    def _index(self, title: str, section_id: str, listed: list[tuple[str, str, str, str]]) -> nodes.section:
        section = nodes.section(ids=[section_id], names=[nodes.fully_normalize_name(title)], classes=["glossary-index"])
        section += nodes.title(title, title)
        items = nodes.bullet_list(classes=["glossary-index-list"])
        for shown, other, anchor, lang in listed:
            link = nodes.reference("", shown, internal=True, refid=anchor, classes=["glossary-index-term"])
            paragraph = nodes.paragraph("", "", link, nodes.Text(" "), nodes.inline(other, other, classes=["glossary-index-other"]))
            if lang == "en":
                link["classes"].append("lang-en")
            items += nodes.list_item("", paragraph)
        section += items
        return section


# ---- Twins -----------------------------------------------------------------------------------------

def twin_href(pagename: str, here: dict, there: dict) -> str:
    """The relative link from ``pagename`` in edition ``here`` to the same page in edition ``there``."""
    up = "../" * pagename.count("/")
    if here["path"]:
        up += "../" * len(here["path"].strip("/").split("/"))
    down = there["path"].strip("/") + "/" if there["path"] else ""
    return f"{up}{down}{pagename}.html"


def page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if not app.config.course_editions or app.builder.format != "html":
        return
    lang = edition_of(app.config)
    listed = editions(app.config)
    here = next(e for e in listed if e["lang"] == lang)
    links = []
    for edition in listed:
        href = twin_href(pagename, here, edition)
        links.append({"label": edition["label"], "lang": _html_lang(edition["language"]), "href": href,
                      "current": edition is here})
    context["course_editions"] = links
    tr = translator(lang, "book", strict=True)
    context["course_editions_label"] = tr("Language of this book")
    alternates = "".join(
        f'<link rel="alternate" hreflang="{link["lang"]}" href="{link["href"]}" />\n' for link in links if not link["current"]
    )
    context["metatags"] = context.get("metatags", "") + alternates


def _html_lang(language: str) -> str:
    return language.replace("_", "-")


def setup(app: Sphinx) -> dict:
    # {Sphinx language: {"path": folder below the English build ("" for English), "label": shown in the
    # switcher, "title": the book's title in that language, "author": ...}}
    app.add_config_value("course_editions", {}, "env", [dict])
    app.add_config_value("course_editions_code", "", "env", [str])
    app.connect("config-inited", configure, priority=600)
    app.connect("builder-inited", theme_labels)
    app.connect("builder-inited", mime_priority_for_gettext)
    app.add_transform(NotMessages)
    app.add_transform(TocCaptions)
    app.add_transform(TranslationsApplied)
    app.add_transform(GlossaryForEdition)
    app.add_transform(FiguresInTheEditionsLanguage)
    app.connect("html-page-context", page_context)
    app.connect("build-finished", report_untranslated)
    return {"version": "1", "env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}
