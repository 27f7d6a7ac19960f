"""`make book` (README command 1) fails loudly: a failing cell, a Sphinx warning or stray stderr stops the build.

Each test builds a throwaway copy of the book; the real build is never touched.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OVERVIEW = Path("book") / "01-overview.md"

pytestmark = pytest.mark.slow


def _copy_book(tmp_path: Path) -> Path:
    """A copy of the book's configuration, its extensions and the overview chapter (the rest would only cost time)."""
    book = tmp_path / "book-copy"
    (book / "book").mkdir(parents=True)
    shutil.copy2(ROOT / "_config.yml", book / "_config.yml")
    # The pages the overview links to (its map of the notes), as one-line stubs, so its links resolve.
    linked = sorted(set(re.findall(r"\{doc\}`(?:[^`<]*<)?([\w-]+)>?`", (ROOT / OVERVIEW).read_text())) - {OVERVIEW.stem})
    for stem in linked:
        (book / "book" / f"{stem}.md").write_text(f"# {stem}\n")
    entries = "".join(f"  - file: book/{stem}\n" for stem in [OVERVIEW.stem, *linked])
    (book / "_toc.yml").write_text(f"format: jb-book\nroot: book/index\nchapters:\n{entries}")
    (book / "book" / "index.md").write_text(f"# A throwaway copy\n\nSee {{doc}}`{OVERVIEW.stem}`.\n")
    shutil.copytree(ROOT / "book" / "_ext", book / "book" / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / OVERVIEW, book / OVERVIEW)
    shutil.copytree(ROOT / "attention_course", book / "attention_course", ignore=shutil.ignore_patterns("__pycache__"))
    (book / "web").symlink_to(ROOT / "web")  # the npm packages the offline assets come from
    return book


def _make_book(book: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "book", f"BOOK={book}"],
        capture_output=True, text=True, timeout=600,
    )


def _append_cell(book: Path, source: str) -> None:
    chapter = book / OVERVIEW
    chapter.write_text(chapter.read_text() + f"\n```{{code-cell}} ipython3\n{source}\n```\n")


def test_a_failing_cell_makes_the_build_fail(tmp_path):
    book = _copy_book(tmp_path)
    _append_cell(book, 'raise RuntimeError("a deliberately failing cell")')
    result = _make_book(book)
    assert result.returncode != 0
    log = result.stdout + result.stderr
    assert "a deliberately failing cell" in log
    assert "The book is built" not in log


def test_stderr_from_a_cell_makes_the_build_fail(tmp_path):
    # A harmless-looking warning in a chapter is noise on the reader's page: it fails the build too.
    book = _copy_book(tmp_path)
    _append_cell(book, 'import warnings\nwarnings.warn("a stray warning")')
    result = _make_book(book)
    assert result.returncode != 0
    assert "stderr" in (result.stdout + result.stderr).lower()


def test_a_sphinx_warning_makes_the_build_fail(tmp_path):
    book = _copy_book(tmp_path)
    chapter = book / OVERVIEW
    chapter.write_text(chapter.read_text() + "\nSee {doc}`a-chapter-that-does-not-exist`.\n")
    result = _make_book(book)
    assert result.returncode != 0
    assert "a-chapter-that-does-not-exist" in result.stdout + result.stderr


def test_a_formula_that_cannot_be_typeset_makes_the_build_fail(tmp_path):
    # The math is drawn at build time (book/_ext/book_math.py): a TeX error or an unknown command must stop
    # the build, not leave raw TeX (or MathJax's red error box) in the page.
    book = _copy_book(tmp_path)
    chapter = book / OVERVIEW
    chapter.write_text(chapter.read_text() + "\nA formula with a typo: $\\softmaks(x)$, and one unclosed: $x^{2$.\n")
    result = _make_book(book)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "cannot typeset '\\\\softmaks(x)' (Undefined control sequence \\softmaks) in book/01-overview.html" in log
    assert "cannot typeset 'x^{2'" in log
    assert "The book is built" not in log


def test_the_unchanged_copy_builds_and_reexecutes_only_when_the_package_changes(tmp_path):
    # The control for the three tests above: the copy itself is a good book.
    book = _copy_book(tmp_path)
    first = _make_book(book)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert (book / "_build" / "html" / "book" / "01-overview.html").is_file()
    assert "Executing notebook" in first.stdout

    # Both editions are built, and the chapter executed once, for both.
    assert (book / "_build" / "html" / "zh" / "book" / "01-overview.html").is_file()
    assert first.stdout.count("Executing notebook") == 1, first.stdout[-3000:]

    unchanged = _make_book(book)
    assert unchanged.returncode == 0
    assert "Executing notebook" not in unchanged.stdout  # the execution cache holds

    # The chapter's own text is unchanged, but the package it calls is not: its outputs may differ now.
    module = book / "attention_course" / "glimpse.py"
    module.write_text(module.read_text() + "\n# an edit to the package\n")
    after_edit = _make_book(book)
    assert after_edit.returncode == 0
    assert after_edit.stdout.count("Executing notebook") == 1  # by the English edition, for both


def test_a_translation_that_sphinx_cannot_apply_makes_the_build_fail(tmp_path):
    # "1. 概述" parses as a list, not as the title it translates: the Chinese page would silently keep
    # the English title. The Chinese build is -W like the English one: it fails and names the message.
    book = _copy_book(tmp_path)
    catalog = book / "book" / "locale" / "zh_CN" / "LC_MESSAGES" / "book" / "01-overview.po"
    catalog.parent.mkdir(parents=True)
    title = re.search(r"^# (.+)$", (book / OVERVIEW).read_text(), re.M).group(1)
    catalog.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        f'msgid "{title}"\nmsgstr "1. 概述：注意力从何而来"\n',
        encoding="utf-8",
    )
    result = _make_book(book)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "was not applied" in log and title[:30] in log, log[-3000:]
    assert "edition did not build" in log
