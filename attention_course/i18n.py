"""The course's two languages, and the translations of the text that the package itself draws and shows.

The book is written in English and built in two editions, English and Chinese (中文), from that one
source. Sphinx translates the chapters' prose from the catalogs under ``book/locale``. The text that
the package's own code puts on a page is translated here, from gettext catalogs that ship with the
package, one per *domain*:

- ``figures``: the labels, titles and legends of the figures (``attention_course.figures``);
- ``widgets``: the widgets' interface: labels, buttons, announcements (``attention_course.widgets``);
- ``book``: what the book's Sphinx extensions write on a page (``book/_ext``): the language switcher,
  the glossary's indexes, the titles of glossary links;
- ``grading``: what the grader writes for the instructor: the class report page
  (``attention_course.grading.report_page``).

A catalog is ``attention_course/locale/<catalog language>/LC_MESSAGES/<domain>.po``, written by
``make catalogs`` (``scripts/update_catalogs.py``) and translated by hand. English is the source
language: its "translation" is the message itself. A Chinese message that is missing, empty or fuzzy
is never a silent fall-back to English: a strict translator raises :class:`MissingTranslation`, and a
lenient one (what figures use, so that the English edition and ``make catalogs`` still run the
chapters while a new label waits for its translation) returns the English message and records it in
:func:`untranslated`; a figure drawn with one fails the Chinese edition's build, naming it
(``attention_course.figures.editions``). ``tests/test_translations.py`` checks that every catalog is
complete and up to date with the code.

Messages are plain strings, looked up whole, and found in the sources by ``make catalogs`` as the
arguments of ``tr("...")`` (or ``N_("...")``, for text translated later) in Python and ``t("...")`` in
JavaScript. A message with values in it names them in braces,
``tr("weights at τ = {temperature}").format(temperature=...)``, so that a translation can move them.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Callable, Iterator

__all__ = [
    "CATALOG_LANGUAGE",
    "N_",
    "DOMAINS",
    "LANGUAGES",
    "MissingTranslation",
    "catalog_path",
    "collecting_untranslated",
    "forget_untranslated",
    "language_of",
    "messages",
    "translator",
    "untranslated",
]

LOCALE_DIR = Path(__file__).resolve().parent / "locale"

# The book's editions, in order: the source language first.
LANGUAGES = ("en", "zh")
# Each language's name in gettext's and Sphinx's terms (the catalogs' folder, Sphinx's `language`).
CATALOG_LANGUAGE = {"en": "en", "zh": "zh_CN"}
DOMAINS = ("figures", "widgets", "book", "grading")


class MissingTranslation(LookupError):
    """A message has no translation in its catalog (missing, empty or fuzzy)."""


def language_of(tag: str | None) -> str:
    """The course language of a language tag: "zh", "zh_CN", "zh-CN", "zh-Hans" -> "zh"; None, "en", "en-GB" -> "en"."""
    base = (tag or "en").replace("_", "-").split("-")[0].lower()
    if base not in LANGUAGES:
        raise ValueError(f"the course is written in {', '.join(LANGUAGES)}; {tag!r} is not one of them")
    return base


def catalog_path(domain: str, lang: str) -> Path:
    """Where the catalog of ``domain`` in ``lang`` lives (it need not exist)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown message domain {domain!r}; the course's are {DOMAINS}")
    return LOCALE_DIR / CATALOG_LANGUAGE[language_of(lang)] / "LC_MESSAGES" / f"{domain}.po"


@functools.cache
def messages(domain: str, lang: str) -> dict[str, str]:
    """Every translated message of ``domain`` in ``lang``: {message: translation}. Empty for English.

    Fuzzy and untranslated entries are left out, as gettext itself leaves them out.
    """
    lang = language_of(lang)
    if lang == LANGUAGES[0]:
        return {}
    path = catalog_path(domain, lang)
    if not path.is_file():
        raise MissingTranslation(f"no {lang} catalog for the {domain!r} messages: {path} is missing (run `make catalogs`)")
    return po_messages(path)


def po_messages(path: Path) -> dict[str, str]:
    """{message: translation} of the catalog at ``path`` (a ``.po`` file): its translated, non-fuzzy messages."""
    from babel.messages.pofile import read_po

    with path.open("rb") as handle:
        catalog = read_po(handle)
    return {
        message.id: message.string
        for message in catalog
        if message.id and isinstance(message.id, str) and message.string and not message.fuzzy
    }


_untranslated: dict[tuple[str, str], list[str]] = {}
_collectors: list[list[str]] = []


@contextlib.contextmanager
def collecting_untranslated() -> Iterator[list[str]]:
    """``with collecting_untranslated() as missed:`` — the messages that lenient translators could not
    translate inside the block, in order, each once."""
    found: list[str] = []
    _collectors.append(found)
    try:
        yield found
    finally:
        _collectors.remove(found)


def untranslated(domain: str, lang: str) -> list[str]:
    """The messages of ``domain`` that a lenient translator into ``lang`` could not translate, in the
    order first asked for; :func:`forget_untranslated` empties the record."""
    return list(_untranslated.get((domain, language_of(lang)), []))


def forget_untranslated() -> None:
    _untranslated.clear()


def translator(lang: str, domain: str = "figures", *, strict: bool = False) -> Callable[[str], str]:
    """A function that translates a message of ``domain`` into ``lang`` (the message itself in English).

    For a message the catalog does not translate, a ``strict`` translator raises
    :class:`MissingTranslation`; a lenient one returns the message and records it (:func:`untranslated`).
    """
    lang = language_of(lang)
    if lang == LANGUAGES[0]:
        return _same
    path = catalog_path(domain, lang)
    table = messages(domain, lang) if (strict or path.is_file()) else {}

    def translate(message: str) -> str:
        try:
            return table[message]
        except KeyError:
            if strict:
                raise MissingTranslation(
                    f"no {lang} translation of the {domain} message {message!r} in {path} "
                    "(run `make catalogs`, then translate it there)"
                ) from None
            for missed in (_untranslated.setdefault((domain, lang), []), *_collectors):
                if message not in missed:
                    missed.append(message)
            return message

    return translate


def _same(message: str) -> str:
    return message


def N_(message: str) -> str:
    """Mark ``message`` for the catalogs without translating it (gettext's ``gettext_noop``): for text
    that a caller passes in and a figure translates when it draws, e.g. the names of a figure's series
    (``N_("with attention")``)."""
    return message
