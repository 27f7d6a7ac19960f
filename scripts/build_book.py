"""Build the book in every edition: English into BOOK/_build/html, each other edition into its folder below it.

    python scripts/build_book.py [BOOK] [--edition LANGUAGE ...] [--builder gettext --out DIR]

The editions are ``course_editions`` in ``BOOK/_config.yml`` (``sphinx.config``); ``make book`` runs
this for all of them. Each is a Jupyter Book 1.x build (``jupyter_book.sphinx.build_sphinx``, what
``jupyter-book build`` calls) with warnings as errors, and every edition uses the same execution
cache, ``BOOK/_build/.jupyter_cache``: the English build runs the chapters, the others find every
notebook there and run nothing. Then every text file of the build gets a gzip copy beside it
(``page.html.gz``), which scripts/serve_book.py, or any server that sends precompressed files, serves
to browsers. Exit status: 0 when every edition built, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import yaml

from serve_book import precompress


def course_editions(book: Path) -> dict[str, dict]:
    config = yaml.safe_load((book / "_config.yml").read_text(encoding="utf-8"))
    editions = (config.get("sphinx", {}).get("config", {}) or {}).get("course_editions") or {"en": {"path": ""}}
    return dict(editions)


def build(book: Path, language: str, path: str, builder: str = "html", out: Path | None = None) -> int:
    from jupyter_book.sphinx import build_sphinx

    build_dir = book / "_build"
    suffix = "" if not path else "-" + path.replace("/", "-")
    output = out or (build_dir / "html" / path if path else build_dir / "html")
    doctrees = build_dir / (f".doctrees{suffix}" if builder == "html" else f".doctrees-{builder}")
    overrides = {
        "external_toc_path": str(book / "_toc.yml"),
        "latex_individualpages": False,
        "language": language,
        # One cache for every edition (unset, MyST-NB would keep one beside each output folder).
        "nb_execution_cache_path": str(build_dir / ".jupyter_cache"),
    }
    return build_sphinx(
        book, output, noconfig=True, path_config=str(book / "_config.yml"), confoverrides=overrides,
        doctreedir=doctrees, builder=builder, warningiserror=True, keep_going=True,
        # The catalogs are written from a fresh read (cheap: the chapters come from the execution cache),
        # so that a change to an extension that decides what is a message is never missed.
        freshenv=builder == "gettext",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("book", nargs="?", default=".", type=Path, help="the book's root folder (with _config.yml)")
    parser.add_argument("--edition", action="append", metavar="LANGUAGE",
                        help="build only this edition (a key of course_editions; repeatable)")
    parser.add_argument("--builder", default="html", choices=["html", "gettext"],
                        help="gettext: write the message catalogs (.pot) of the English source into --out")
    parser.add_argument("--out", type=Path, help="output folder (the gettext builder's)")
    args = parser.parse_args(argv)
    book = args.book.resolve()
    editions = course_editions(book)
    if args.builder == "gettext":
        if args.out is None:
            parser.error("--builder gettext needs --out")
        first = next(iter(editions))
        status = build(book, first, "", builder="gettext", out=args.out.resolve())
        if isinstance(status, BaseException):
            traceback.print_exception(status, file=sys.stderr)
        return 0 if status == 0 else 1
    wanted = args.edition or list(editions)
    unknown = [e for e in wanted if e not in editions]
    if unknown:
        parser.error(f"unknown edition(s) {unknown}; _config.yml has {list(editions)}")
    for language in wanted:
        settings = editions[language]
        start = time.perf_counter()
        status = build(book, language, settings.get("path", ""))
        if status != 0:
            if isinstance(status, BaseException):  # what went wrong, a failing cell's traceback included
                traceback.print_exception(status, file=sys.stderr)
            print(f"\nThe {settings.get('label', language)} edition did not build.", file=sys.stderr)
            return 1
        print(f"{settings.get('label', language)} edition built in {time.perf_counter() - start:.0f} s.")
    # A gzip copy beside every text file, for a server that sends it (scripts/serve_book.py, nginx's gzip_static).
    written, kept = precompress(book / "_build" / "html")
    print(f"Compressed copies: {written} written, {kept} unchanged.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
