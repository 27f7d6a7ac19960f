"""Serve the built book as a reader's web server should: compressed, with caching headers.

    python scripts/serve_book.py [HTML_DIR] [--port 8000] [--bind 127.0.0.1]

``make book`` writes a gzip copy beside every text file of the build (``page.html.gz`` beside
``page.html``: ``precompress``, called by scripts/build_book.py). This server sends that copy, with
``Content-Encoding: gzip``, to every browser that accepts gzip (all do), and the file itself to any
client that does not. A chapter's first load is then about a third of its size on disk, which on a
phone's network is most of the time the page takes to show. ``python -m http.server`` alone does not
compress: it sends every file whole.

Caching: a URL that carries a version in its query (Sphinx writes ``style.css?v=…`` and
``?digest=…``, and changes it when the file changes) may be kept a year without asking again; anything
else (pages, figures, fonts) is revalidated on each use (``no-cache``, answered 304 when unchanged), so
that a rebuilt book is seen at once.

tests/browser_audit.py's ``serve()`` uses the same handler (under a sub-path), so that the browser tests
and bench/lighthouse_pages.py load the book as a reader's server sends it.
"""

from __future__ import annotations

import argparse
import datetime
import email.utils
import functools
import gzip
import http.server
import os
from pathlib import Path
from urllib.parse import urlsplit

# What a browser fetches as text and gzip shrinks; images, fonts (woff2) and archives are compressed already.
COMPRESSED_SUFFIXES = {".html", ".css", ".js", ".json", ".svg", ".txt", ".xml", ".map", ".ipynb", ".md", ".py",
                       ".inv", ".ttf", ".otf", ".eot"}
# Below this, a gzip copy saves less than a network packet.
SMALLEST = 1024
VERSIONED = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


def _compressible(path: Path) -> bool:
    return path.suffix.lower() in COMPRESSED_SUFFIXES


def precompress(folder: Path) -> tuple[int, int]:
    """Write ``NAME.gz`` beside every compressible file of ``folder`` of at least SMALLEST bytes whose copy is
    missing or older than the file, and delete every ``.gz`` copy whose file is gone. Returns (written, kept).
    The copies are reproducible (gzip level 9, no name or time inside)."""
    written = kept = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".gz":
            source = path.with_suffix("")
            if _compressible(source) and not source.is_file():
                path.unlink()
            continue
        if not _compressible(path):
            continue
        copy = path.with_name(path.name + ".gz")
        stat = path.stat()
        if stat.st_size < SMALLEST:
            copy.unlink(missing_ok=True)
            continue
        if copy.is_file() and copy.stat().st_mtime_ns == stat.st_mtime_ns:
            kept += 1
            continue
        data = gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)
        copy.write_bytes(data)
        os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the copy of this version of the file
        written += 1
    return written, kept


def accepts_gzip(header: str | None) -> bool:
    """Whether an Accept-Encoding header accepts gzip (``gzip;q=0`` refuses it; ``*`` accepts it)."""
    codings = {}
    for part in (header or "").split(","):
        name, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name:
            codings[name.strip().lower()] = q
    if "gzip" in codings:
        return codings["gzip"] > 0
    return codings.get("*", 0) > 0


class BookHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with their precompressed copy where the client accepts it, and caching headers."""

    def send_head(self):
        self._encoding = None
        path = Path(self.translate_path(self.path))
        copy = path.with_name(path.name + ".gz")
        if path.is_dir() or not (path.is_file() and copy.is_file() and accepts_gzip(self.headers.get("Accept-Encoding"))
                                 and copy.stat().st_mtime_ns == path.stat().st_mtime_ns):
            return super().send_head()  # the file itself (or a folder's index.html, or a 404)
        if self._not_modified(path):
            self.send_response(http.server.HTTPStatus.NOT_MODIFIED)
            self.end_headers()
            return None
        self._encoding = "gzip"
        body = open(copy, "rb")
        self.send_response(http.server.HTTPStatus.OK)
        self.send_header("Content-type", self.guess_type(str(path)))
        self.send_header("Content-Length", str(os.fstat(body.fileno()).st_size))
        self.send_header("Last-Modified", self.date_time_string(int(path.stat().st_mtime)))
        self.end_headers()
        return body

    def _not_modified(self, path: Path) -> bool:
        """If-Modified-Since as SimpleHTTPRequestHandler reads it (If-None-Match is not sent: no ETags)."""
        since = self.headers.get("If-Modified-Since")
        if not since or self.headers.get("If-None-Match"):
            return False
        try:
            when = email.utils.parsedate_to_datetime(since)
        except (TypeError, IndexError, OverflowError, ValueError):
            return False
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        return int(path.stat().st_mtime) <= when.timestamp()

    def end_headers(self):
        if getattr(self, "_encoding", None) == "gzip":
            self.send_header("Content-Encoding", "gzip")
        path = urlsplit(self.path)
        if _compressible(Path(path.path)):
            self.send_header("Vary", "Accept-Encoding")
        self.send_header("Cache-Control", VERSIONED if path.query else REVALIDATE)
        super().end_headers()


def handler(directory: Path) -> functools.partial:
    return functools.partial(BookHandler, directory=str(directory))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("html_dir", nargs="?", type=Path, default=root / "_build" / "html")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--bind", default="127.0.0.1", help="the address to listen on (0.0.0.0: every interface)")
    args = parser.parse_args(argv)
    if not (args.html_dir / "index.html").is_file():
        parser.error(f"no built book in {args.html_dir}: run `make book` first")
    written, _ = precompress(args.html_dir)  # a build from before precompression, or edited by hand
    if written:
        print(f"compressed {written} files")
    server = http.server.ThreadingHTTPServer((args.bind, args.port), handler(args.html_dir))
    print(f"Serving the book at http://{args.bind}:{args.port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
