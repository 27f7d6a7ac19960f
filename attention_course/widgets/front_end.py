"""The widgets' front-end code as anywidget gets it: one ES module and one stylesheet per widget.

The front ends share what makes them accessible (``a11y.js``, ``a11y.css``). A widget's module
imports it (``import { radioKeys } from "./a11y.js";``), which Node resolves in the tests; but a page
runs a widget's module from a string, where a relative import has nothing to resolve against. So
``module()`` inlines each such import: the imported file's text, its ``export`` keywords dropped, in
place of the import line. Only this one form of import is allowed, so that nothing is inlined by
guesswork.

A widget speaks the reader's language: ``messages(name)`` gives the translations of every message of
the module ``name`` (the ``t("...")`` and ``N_("...")`` calls of it and of what it inlines), which the
widget sends to its front end (``i18n.js``).
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
_IMPORT = re.compile(r'^import \{ [\w, ]+ \} from "\./([\w-]+\.js)";$', re.M)
_ANY_IMPORT = re.compile(r"^\s*import\b", re.M)


def module(name: str) -> str:
    """The ES module ``name`` (a file beside this one) with its imports of sibling files inlined."""
    text = (HERE / name).read_text(encoding="utf-8")

    def inline(match: re.Match) -> str:
        imported = (HERE / match[1]).read_text(encoding="utf-8")
        if _ANY_IMPORT.search(imported):
            raise ValueError(f"{match[1]} imports in turn; front_end.module inlines one level only")
        return re.sub(r"^export (?=(function|const|class) )", "", imported, flags=re.M).rstrip("\n")

    inlined = _IMPORT.sub(inline, text)
    if _ANY_IMPORT.search(inlined):
        raise ValueError(f"{name}: an import that front_end.module cannot inline (only `import {{ a, b }} from \"./x.js\";`)")
    return inlined


def messages(name: str, extra: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """{language: {message: translation}} for the messages of module ``name`` and ``extra`` ones, in
    every language but English, from the "widgets" catalog. A message without a translation is left
    out (the front end shows it in English); tests/test_translations.py keeps the catalog complete."""
    import io

    from babel.messages.extract import extract

    from attention_course.i18n import LANGUAGES, MissingTranslation, messages as catalog

    # Babel's `extract`, as `make catalogs` runs it (scripts/update_catalogs.py), not the bare
    # `extract_javascript`: for a call with values, t("Step {step}, {word}", {...}), the bare extractor
    # yields every argument as a tuple, and such a message was silently left untranslated in the page.
    # `extract` keeps the message, the call's first argument, as the catalogs have it.
    found = [message for _, message, _, _ in extract(
        "javascript", io.BytesIO(module(name).encode("utf-8")), keywords={"t": None, "N_": None}, comment_tags=())]
    wanted = dict.fromkeys(m for m in [*found, *extra] if isinstance(m, str) and m)
    translated = {}
    for lang in LANGUAGES[1:]:
        try:
            table = catalog("widgets", lang)
        except MissingTranslation:  # no catalog yet: English everywhere
            table = {}
        translated[lang] = {message: table[message] for message in wanted if message in table}
    return translated


def check_language(language: str, error: type[Exception] = ValueError) -> str:
    """A widget's ``language``: "auto" (the page's), or one of the course's languages; else ``error``."""
    from attention_course.i18n import LANGUAGES

    if language != "auto" and language not in LANGUAGES:
        raise error(f"language must be 'auto' or one of {LANGUAGES}, got {language!r}")
    return language


def stylesheet(*names: str) -> str:
    """The stylesheets ``names`` (files beside this one), one after another."""
    return "\n".join((HERE / name).read_text(encoding="utf-8").rstrip("\n") for name in names) + "\n"
