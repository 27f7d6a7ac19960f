"""The book as a reader's web server sends it (scripts/serve_book.py): the gzip copies the build writes, sent
to browsers that accept them with the right type and headers, the file itself to any other client, and
caching that never shows a reader a stale page. tests/test_every_page.py checks the same in a browser, on
every page of the real build."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import http.server
import os
import threading
from pathlib import Path

import pytest

from repo_scripts import script

serve_book = script("serve_book")

CSS = ("body { color: black; }\n" * 200).encode()  # 4.6 KB, compressible
HTML = ("<!DOCTYPE html><html><body>" + "<p>attention</p>" * 300 + "</body></html>").encode()


@pytest.fixture
def book(tmp_path) -> Path:
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "style.css").write_bytes(CSS)
    (tmp_path / "_static" / "tiny.js").write_bytes(b"let a = 1;\n")
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "figure.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(5000))
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "chapter.html").write_bytes(HTML)
    (tmp_path / "index.html").write_bytes(HTML)
    return tmp_path


@contextlib.contextmanager
def served(folder: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet.for_folder(folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(serve_book.BookHandler):
    def log_message(self, *args):
        pass

    @classmethod
    def for_folder(cls, folder: Path):
        return lambda *args, **kwargs: cls(*args, directory=str(folder), **kwargs)


def get(port: int, path: str, **headers) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path, headers={k.replace("_", "-"): v for k, v in headers.items()})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def test_the_build_writes_a_gzip_copy_of_each_text_file_worth_it(book):
    assert serve_book.precompress(book) == (3, 0)  # the stylesheet and the two pages
    assert gzip.decompress((book / "_static" / "style.css.gz").read_bytes()) == CSS
    assert gzip.decompress((book / "book" / "chapter.html.gz").read_bytes()) == HTML
    assert not (book / "_static" / "tiny.js.gz").exists()  # smaller than a packet already
    assert not (book / "_images" / "figure.png.gz").exists()  # compressed already
    # Unchanged files are not compressed again; a changed one is, and a copy whose file is gone goes.
    assert serve_book.precompress(book) == (0, 3)
    (book / "_static" / "style.css").write_bytes(CSS + b"p { margin: 0; }\n")
    (book / "index.html").unlink()
    assert serve_book.precompress(book) == (1, 1)
    assert gzip.decompress((book / "_static" / "style.css.gz").read_bytes()).endswith(b"p { margin: 0; }\n")
    assert not (book / "index.html.gz").exists()


def test_a_browser_gets_the_gzip_copy_with_the_files_type(book):
    serve_book.precompress(book)
    with served(book) as port:
        status, headers, body = get(port, "/book/chapter.html", Accept_Encoding="gzip, deflate, br")
        assert status == 200
        assert headers["content-encoding"] == "gzip"
        assert headers["content-type"].startswith("text/html")
        assert int(headers["content-length"]) == len(body) < len(HTML) / 5
        assert gzip.decompress(body) == HTML
        assert headers["vary"] == "Accept-Encoding"

        status, headers, body = get(port, "/_static/style.css?v=1234", Accept_Encoding="gzip")
        assert (headers["content-encoding"], headers["content-type"]) == ("gzip", "text/css")
        assert gzip.decompress(body) == CSS


def test_a_client_that_refuses_gzip_gets_the_file_itself(book):
    serve_book.precompress(book)
    with served(book) as port:
        for accept in [None, "identity", "gzip;q=0, br", "br"]:
            status, headers, body = get(port, "/book/chapter.html", **({"Accept_Encoding": accept} if accept else {}))
            assert (status, body) == (200, HTML), accept
            assert "content-encoding" not in headers, accept
        # A copy older than its file (a page edited after the build) is never sent for it.
        (book / "book" / "chapter.html").write_bytes(HTML + b"\n")
        status, headers, body = get(port, "/book/chapter.html", Accept_Encoding="gzip")
        assert "content-encoding" not in headers and body == HTML + b"\n"


def test_caching_keeps_versioned_files_and_revalidates_the_rest(book):
    serve_book.precompress(book)
    with served(book) as port:
        _, headers, _ = get(port, "/_static/style.css?v=1234", Accept_Encoding="gzip")
        assert headers["cache-control"] == "public, max-age=31536000, immutable"
        for path in ["/book/chapter.html", "/_images/figure.png", "/_static/tiny.js"]:
            _, headers, _ = get(port, path, Accept_Encoding="gzip")
            assert headers["cache-control"] == "no-cache", path
        # Revalidation: unchanged since the reader's copy, 304 and no body, gzipped or not.
        modified = os.path.getmtime(book / "book" / "chapter.html")
        since = http.server.BaseHTTPRequestHandler.date_time_string(None, int(modified) + 1)
        for accept in ["gzip", "identity"]:
            status, _, body = get(port, "/book/chapter.html", Accept_Encoding=accept, If_Modified_Since=since)
            assert (status, body) == (304, b""), accept
        earlier = http.server.BaseHTTPRequestHandler.date_time_string(None, int(modified) - 3600)
        status, headers, body = get(port, "/book/chapter.html", Accept_Encoding="gzip", If_Modified_Since=earlier)
        assert status == 200 and gzip.decompress(body) == HTML


def test_the_built_book_has_its_gzip_copies(built_html):
    """`make book` wrote a fresh gzip copy beside every text file of both editions that is worth one."""
    missing, stale = [], []
    for path in built_html.rglob("*"):
        if (path.is_file() and path.suffix in serve_book.COMPRESSED_SUFFIXES
                and path.stat().st_size >= serve_book.SMALLEST):
            copy = path.with_name(path.name + ".gz")
            if not copy.is_file():
                missing.append(path.relative_to(built_html).as_posix())
            elif copy.stat().st_mtime_ns != path.stat().st_mtime_ns:
                stale.append(path.relative_to(built_html).as_posix())
    assert (missing, stale) == ([], [])
    assert (built_html / "zh" / "book" / "04-three-stages.html.gz").is_file()
