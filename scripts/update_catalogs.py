"""Update the translation catalogs from the English sources (`make catalogs`).

    python scripts/update_catalogs.py [BOOK]

Two kinds of catalog, both gettext ``.po`` files in git, both updated the same way (sphinx-intl's
merge: a new message is added untranslated, a changed one keeps its old translation marked *fuzzy*
for the translator to check, a removed one is dropped):

- the chapters' prose, one catalog per page: ``book/locale/<language>/LC_MESSAGES/<page>.po``, from
  the ``.pot`` files that Sphinx's gettext builder writes (``scripts/build_book.py --builder gettext``;
  it uses the execution cache, so figures' alt texts are messages too);
- the chapters' code cells (their comments, docstrings and printed labels, which the Chinese edition
  shows translated: ``book/_ext/code_translation.py``), one catalog for every chapter:
  ``book/locale/<language>/LC_MESSAGES/code.po``, extracted from the chapters' sources (no build);
- the assignments' notebooks (``solutions/*/*.ipynb``): their instructions, the comments and the visible
  tests' messages, one catalog for all: ``attention_course/locale/<language>/LC_MESSAGES/exercises.po``
  (``release`` writes each Chinese notebook from it);
- the text the package's code draws or shows (``attention_course.i18n``): figure labels, the widgets'
  interface and what the book's extensions write, one catalog per domain:
  ``attention_course/locale/<language>/LC_MESSAGES/<domain>.po``, extracted with Babel from the calls
  ``tr("...")`` and ``N_("...")`` in Python and ``t("...")`` and ``N_("...")`` in JavaScript.

Then translate every entry that is new (empty) or fuzzy (remove the ``fuzzy`` flag once checked);
``tests/test_translations.py`` fails until none is left and every catalog matches its source.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRANSLATED = ("zh_CN",)  # the catalog languages besides the English source
BOOK_LOCALE = Path("book") / "locale"
PACKAGE_LOCALE = Path("attention_course") / "locale"
# Where each domain's messages are: (glob below the repository root, Babel extraction method).
PACKAGE_SOURCES = {
    "figures": [("attention_course/figures/*.py", "python")],
    "widgets": [("attention_course/widgets/*.py", "python"), ("attention_course/widgets/*.js", "javascript")],
    "book": [("book/_ext/*.py", "python"), ("book/_ext/reader_static/*.js", "javascript")],
    "grading": [("attention_course/grading/report_page.py", "python"), ("attention_course/grading/student_check.py", "python"),
                ("attention_course/grading/verdicts.py", "python"),
                ("attention_course/grading/feedback_pages.py", "python")],
}
KEYWORDS = {"python": {"tr": None, "N_": None}, "javascript": {"t": None, "N_": None}}
# The code cells' catalog, beside the pages' (book/_ext/code_translation.py).
CODE_CATALOG = "code.po"
# What Sphinx's gettext builder writes for the messages of the HTML templates (book/_ext/templates).
TEMPLATES_POT = "sphinx.pot"
# No wrapping: one message, one line, so that a diff shows which messages changed.
LINE_WIDTH = 0


def package_templates(root: Path = ROOT) -> dict:
    """{domain: babel Catalog} of the messages the package's sources use, as extracted now."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_file

    templates = {}
    for domain, sources in PACKAGE_SOURCES.items():
        catalog = Catalog(project="attention-course", domain=domain)
        for pattern, method in sources:
            for path in sorted(root.glob(pattern)):
                for _, message, _, _ in extract_from_file(method, str(path), keywords=KEYWORDS[method],
                                                          comment_tags=(), options={}):
                    if isinstance(message, str) and message:
                        catalog.add(message)
        if domain == "grading":  # the checks' descriptions: sentences of data, not tr() calls
            sys.path.insert(0, str(root))
            from attention_course.grading.checks import descriptions

            for message in descriptions():
                catalog.add(message)
        templates[domain] = catalog
    return templates


def code_template(root: Path = ROOT):
    """The babel Catalog of the messages in the code cells of the book's pages, as they are now."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import code_translation

    pages = sorted((root / "book").rglob("*.md"))
    return code_translation.template([(p.relative_to(root).as_posix(), p) for p in pages
                                      if "_build" not in p.parts and not p.name.startswith(".")])


def exercise_template(root: Path = ROOT):
    """The babel Catalog of the assignments' messages (domain ``exercises``), as extracted now from the solution
    notebooks: their markdown, and the comments and messages of their given code
    (``attention_course.grading.notebook_translation``), each located by notebook and cell."""
    import nbformat
    from babel.messages.catalog import Catalog

    sys.path.insert(0, str(root))
    from attention_course.grading.notebook_translation import DOMAIN, messages

    catalog = Catalog(project="attention-course", domain=DOMAIN)
    for path in sorted(root.glob("solutions/*/*.ipynb")):
        for message, where in messages(nbformat.read(path, as_version=4)):
            catalog.add(message, locations=[(f"{path.relative_to(root).as_posix()}#{where}", None)])
    return catalog


def update_exercise_catalogs(root: Path = ROOT) -> None:
    """The assignments' catalogs, one per translated language (what ``release`` writes each
    ``<notebook>.<language>.ipynb`` from)."""
    from attention_course.grading.notebook_translation import DOMAIN

    for language in TRANSLATED:
        path = root / PACKAGE_LOCALE / language / "LC_MESSAGES" / f"{DOMAIN}.po"
        print(f"{path.relative_to(root)}: {_merge(path, exercise_template(root), language)}")


def write_book_templates(book: Path, out: Path) -> None:
    """Sphinx's gettext builder: one .pot per page of ``book`` into ``out``."""
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py"), str(book),
                             "--builder", "gettext", "--out", str(out)])
    if result.returncode != 0:
        sys.exit("the gettext build failed")


def built_book_messages(root: Path = ROOT) -> dict[str, set[str]]:
    """{page: its messages}, as Sphinx's gettext builder would extract them, read from the doctrees the English
    HTML build keeps (``_build/.doctrees``, which ``make book`` brings up to date) instead of a second run of
    Sphinx over the book (a minute of CPU): the same reader, transforms and execution cache made them, and the
    gettext builder extracts its messages from them in the same way (``sphinx.util.nodes.extract_messages``:
    the page's, then its tables of contents'). A page whose doctree is missing, or older than its source, is
    an error: build the book first."""
    import pickle

    import yaml
    from sphinx import addnodes
    from sphinx.util.nodes import extract_messages

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]] + [entry for part in toc.get("parts", []) for entry in _toc_files(part.get("chapters", []))]
    doctrees = root / "_build" / ".doctrees"
    messages = {}
    for page in pages:
        source, doctree_path = root / f"{page}.md", doctrees / f"{page}.doctree"
        if not doctree_path.is_file() or doctree_path.stat().st_mtime < source.stat().st_mtime:
            raise FileNotFoundError(f"{doctree_path.relative_to(root)} is missing or older than its page: "
                                    "build the book first (make book)")
        doctree = pickle.loads(doctree_path.read_bytes())
        found = {message for _node, message in extract_messages(doctree) if message}
        for toctree in doctree.findall(addnodes.toctree):
            found |= {message for _node, message in extract_messages(toctree) if message}
        messages[page] = found
    return messages


def _toc_files(entries: list) -> list[str]:
    return [file for entry in entries for file in [entry["file"], *_toc_files(entry.get("sections", []))]]


def template_messages(root: Path = ROOT) -> set[str]:
    """The messages of the book's HTML templates (``book/_ext/templates``), as Sphinx's gettext builder extracts
    them into ``sphinx.pot``: Jinja's i18n extraction of every ``_()``/``gettext()`` call."""
    import jinja2

    environment = jinja2.Environment(extensions=["jinja2.ext.i18n"])
    messages = set()
    for template in sorted((root / "book" / "_ext" / "templates").glob("*.html")):
        for _line, _function, message in environment.extract_translations(template.read_text(encoding="utf-8")):
            messages |= {m for m in (message if isinstance(message, tuple) else (message,)) if isinstance(m, str) and m}
    return messages


def book_pots(pot_dir: Path) -> list[Path]:
    """The pages' templates among what the gettext builder wrote: not ``sphinx.pot``, the messages of the
    book's own HTML templates, which are translated with the theme's labels in book/_ext/locale."""
    return sorted(p for p in pot_dir.rglob("*.pot") if p.relative_to(pot_dir) != Path(TEMPLATES_POT))


def _merge(po_path: Path, template, language: str) -> str:
    """Merge ``template`` into the catalog at ``po_path`` (created if missing); what happened."""
    from sphinx_intl import catalog as sphinx_intl_catalog

    po_path.parent.mkdir(parents=True, exist_ok=True)
    if po_path.exists():
        catalog = sphinx_intl_catalog.load_po(str(po_path))
        before = {m.id for m in catalog if m.id}
        sphinx_intl_catalog.update_with_fuzzy(catalog, template)
        after = {m.id for m in catalog if m.id}
        if before == after:
            return "unchanged"
        sphinx_intl_catalog.dump_po(str(po_path), catalog, width=LINE_WIDTH, ignore_obsolete=True)
        return f"+{len(after - before)} -{len(before - after)}"
    template.locale = language
    template.project, template.version = "attention-course", ""
    template.copyright_holder = template.last_translator = "The attention course authors"
    template.language_team = f"{language} (the attention course)"
    template.fuzzy = False
    sphinx_intl_catalog.dump_po(str(po_path), template, width=LINE_WIDTH, ignore_obsolete=True)
    return "created"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("book", nargs="?", default=".", type=Path)
    parser.add_argument("--package-only", action="store_true",
                        help="only the package's catalogs (figures, widgets, book): no gettext build")
    parser.add_argument("--code-only", action="store_true",
                        help="only the code cells' catalog (book/locale/*/LC_MESSAGES/code.po): no gettext build")
    args = parser.parse_args(argv)
    book = args.book.resolve()

    from sphinx_intl import catalog as sphinx_intl_catalog

    if args.code_only:
        for language in TRANSLATED:
            path = book / BOOK_LOCALE / language / "LC_MESSAGES" / CODE_CATALOG
            print(f"{path.relative_to(book)}: {_merge(path, code_template(book), language)}")
        return 0
    pot_dir = book / "_build" / "gettext"
    if not args.package_only:
        write_book_templates(book, pot_dir)
    for language in TRANSLATED if not args.package_only else ():
        locale = book / BOOK_LOCALE / language / "LC_MESSAGES"
        pots = book_pots(pot_dir)
        for pot in pots:
            name = pot.relative_to(pot_dir).with_suffix(".po")
            print(f"{BOOK_LOCALE / language / 'LC_MESSAGES' / name}: "
                  f"{_merge(locale / name, sphinx_intl_catalog.load_po(str(pot)), language)}")
        path = locale / CODE_CATALOG
        print(f"{path.relative_to(book)}: {_merge(path, code_template(book), language)}")
        pages = {pot.relative_to(pot_dir).with_suffix(".po") for pot in pots} | {Path(CODE_CATALOG)}
        for orphan in sorted(p for p in locale.rglob("*.po") if p.relative_to(locale) not in pages):
            orphan.unlink()
            print(f"{orphan.relative_to(book)}: removed (the page is gone)")
    for language in TRANSLATED:
        for domain, template in package_templates(ROOT).items():
            path = ROOT / PACKAGE_LOCALE / language / "LC_MESSAGES" / f"{domain}.po"
            print(f"{path.relative_to(ROOT)}: {_merge(path, template, language)}")
    update_exercise_catalogs(ROOT)
    print("\nNow translate the new (empty) and fuzzy entries; `make test` checks that none is left.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
