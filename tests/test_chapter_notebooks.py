"""Run it yourself: every chapter page offers its notebook, and the notebook runs clean.

A reader of either edition finds, under each chapter's title, a link "Download this chapter as a Jupyter
notebook (.ipynb)" (下载本章的 Jupyter Notebook（.ipynb）) to a notebook served from the build
(book/_ext/chapter_notebooks.py). Read from the book as built (`make book`):

- every chapter page of both editions links to its notebook, in the page's language, with an ordinary
  link; in Chromium a reader reaches it with Tab and Enter downloads the notebook;
- each notebook is valid, holds no outputs, and is the chapter's code; the Chinese one computes exactly
  what the English one does, and its prose is the Chinese page's;
- `scripts/write_notebooks.py` (`make lab`) writes the same notebooks;
- every English notebook, as downloaded, executes in the course's environment (nbclient, the venv's
  own Python kernel, in an empty folder as a reader's download would be) without an error and without a
  line on stderr. The chapters run in parallel kernels, and their trained models come from the build's
  model cache (_build/.model_cache), so this costs about what one build's execution does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import sys
import time
from pathlib import Path

import pytest

from browser_audit import editions

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "scripts"))

import chapter_notebooks  # noqa: E402
import code_translation  # noqa: E402

ENGLISH, CHINESE = "en", "zh_CN"
LABELS = {ENGLISH: "Download this chapter as a Jupyter notebook (.ipynb)",
          CHINESE: "下载本章的 Jupyter Notebook（.ipynb）"}
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
# Kernels at once: the chapters train on one thread each and wait on little else.
PARALLEL = max(2, min(4, os.cpu_count() or 2))


def _chapter_names() -> list[str]:
    from chapter_notebooks import is_chapter

    return sorted(p.stem for p in (ROOT / "book").glob("*.md") if is_chapter(p))


CHAPTERS = _chapter_names()


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


@pytest.fixture(scope="module")
def folders(built_html) -> dict[str, Path]:
    found = editions(built_html)
    assert set(found) == {ENGLISH, CHINESE}, f"editions built: {sorted(found)}"
    return found


def test_every_chapter_is_a_notebook():
    assert len(CHAPTERS) >= 14, CHAPTERS
    assert "02-soft-hard" in CHAPTERS and "index" not in CHAPTERS and "glossary" not in CHAPTERS


@pytest.mark.parametrize("edition", [ENGLISH, CHINESE])
def test_each_chapter_page_links_to_its_notebook(folders, edition):
    from bs4 import BeautifulSoup

    for name in CHAPTERS:
        page = folders[edition] / "book" / f"{name}.html"
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        links = soup.select("article a.chapter-notebook-link")
        assert len(links) == 1, f"{page}: {len(links)} notebook links"
        link = links[0]
        # An <a href> is in the tab order and opens with Enter; its name is its text.
        assert link.get("href") and link.get("tabindex") is None, link
        assert link.get_text(" ", strip=True) == LABELS[edition], link
        assert link.get("download") == f"{name}.ipynb"
        target = (page.parent / link["href"]).resolve()
        assert target == (folders[edition] / "notebooks" / f"{name}.ipynb").resolve(), link["href"]
        assert target.is_file(), f"{page}: {link['href']} is not in the build"
        # right under the chapter's title, before anything else it says
        heading = soup.select_one("article h1")
        assert heading.find_next("p") is link.parent, f"{page}: the link is not under the title"
    # a page that is not a chapter offers none
    for other in ("index", "glossary"):
        page = folders[edition] / "book" / f"{other}.html"
        assert "chapter-notebook-link" not in page.read_text(encoding="utf-8"), page


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_notebooks_are_the_chapters_code_without_outputs_in_each_language(folders, name):
    import jupytext
    import nbformat

    source = jupytext.read(ROOT / "book" / f"{name}.md", fmt="md:myst")
    english, chinese = (_read(folders[e] / "notebooks" / f"{name}.ipynb") for e in (ENGLISH, CHINESE))
    for notebook in (english, chinese):
        nbformat.validate(notebook)
        assert notebook.metadata.kernelspec.name == "python3"
        assert "jupytext" not in notebook.metadata  # no pairing with a .md the reader does not have
        assert [c.cell_type for c in notebook.cells] == [c.cell_type for c in source.cells]
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
    assert [c.id for c in english.cells] == [c.id for c in chinese.cells]  # the same cells, the same ids
    code = [(c, e, z) for c, e, z in zip(source.cells, english.cells, chinese.cells) if c.cell_type == "code"]
    assert code, name
    for cell, en, zh in code:
        assert en.source == cell.source
        assert en.metadata.get("tags") == cell.metadata.get("tags")  # hide-input, remove-cell … kept
        # the same computation; only comments, docstrings and printed labels may differ
        assert code_translation.code_shape(zh.source) == code_translation.code_shape(en.source)
    assert any(HAN.search(z.source) and not HAN.search(e.source) for _, e, z in code), \
        f"{name}: no code comment of the Chinese notebook is in Chinese"
    # The prose is the Chinese page's: every paragraph of the English is translated, none left in English.
    for en, zh in zip(english.cells, chinese.cells):
        if en.cell_type != "markdown":
            continue
        english_lines = _prose_lines(zh.source)
        assert not english_lines, f"{name}: English prose left in the Chinese notebook: {english_lines[:3]}"
    first = next(c for c in chinese.cells if c.cell_type == "markdown")
    title = next(line for line in first.source.splitlines() if line.startswith("# "))
    assert HAN.search(title), title


def _prose_lines(markdown: str) -> list[str]:
    """Lines of running English (six words or more, no Chinese) outside math, code and directives' options."""
    found, math = [], False
    for line in markdown.splitlines():
        if line.startswith("$$"):
            math = not math
            continue
        if math or line.startswith((":", "```")) or HAN.search(line):
            continue
        text = re.sub(r"`[^`]*`|\$[^$]*\$", "", line)
        if len(re.findall(r"\b[A-Za-z]{3,}\b", text)) >= 6:
            found.append(line)
    return found


@pytest.mark.browser
@pytest.mark.parametrize("edition,device", [(ENGLISH, "phone"), (CHINESE, "desktop")])
def test_a_reader_reaches_the_link_from_the_keyboard_and_downloads_the_notebook(built_html, browser, edition,
                                                                               device, tmp_path):
    from browser_audit import reader, serve

    folder = "" if edition == ENGLISH else "zh/"
    with serve(built_html) as base, reader(browser, base, f"{folder}book/02-soft-hard.html", device) as page:
        link = page.locator("a.chapter-notebook-link")
        assert link.is_visible()
        box = link.bounding_box()
        assert box["height"] >= 16 and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"] + 1
        # Tab from the top of the page reaches it (within the header's controls and the title's).
        for _ in range(60):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.classList.contains('chapter-notebook-link')"):
                break
        else:
            pytest.fail("the notebook link is not reached with Tab")
        with page.expect_download() as download:
            page.keyboard.press("Enter")
        saved = tmp_path / download.value.suggested_filename
        download.value.save_as(saved)
    assert saved.name == "02-soft-hard.ipynb"
    assert saved.read_bytes() == (built_html / folder / "notebooks" / "02-soft-hard.ipynb").read_bytes()


def test_the_markdown_translation_keeps_each_lines_markers():
    catalog = {"A heading": "标题", "One paragraph that runs over two lines.": "一个跨两行的段落。",
               "An item": "一项", "In this chapter": "本章内容", "A cell": "一格"}
    source = ("## A heading\n\nOne paragraph that\nruns over two lines.\n\n- An item\n  1. An item\n\n"
              ":::{admonition} In this chapter\n:class: tip\n:::\n\n| A cell | B |\n\nNot An item here\n")
    translated, count = chapter_notebooks.translate_markdown(source, catalog)
    assert translated == ("## 标题\n\n一个跨两行的段落。\n\n- 一项\n  1. 一项\n\n"
                          ":::{admonition} 本章内容\n:class: tip\n:::\n\n| 一格 | B |\n\nNot An item here\n")
    assert count == 6


@pytest.mark.parametrize("edition", [ENGLISH, CHINESE])
def test_make_lab_writes_the_notebooks_the_pages_offer(folders, edition, tmp_path):
    from write_notebooks import chapters

    written = chapter_notebooks.write_notebooks(ROOT, chapters(ROOT), edition, tmp_path)
    assert sorted(p.stem for p in written) == CHAPTERS
    for path in written:
        assert path.read_bytes() == (folders[edition] / "notebooks" / path.name).read_bytes(), path.name


# ---- Executing the downloads -------------------------------------------------------------------------

def _longest_first(paths: list[Path]) -> list[Path]:
    """``paths`` in the order that ends soonest on a few kernels: the longest first, by the seconds each
    chapter took in the book's own build (its execution cache records them); one it does not know first."""
    seconds = {}
    try:
        from jupyter_cache import get_cache

        for record in get_cache(ROOT / "_build" / ".jupyter_cache").list_cache_records():
            seconds[Path(record.uri).stem] = (record.data or {}).get("execution_seconds", 0)
    except Exception:  # no cache: any order runs them all, only later
        pass
    return sorted(paths, key=lambda p: -seconds.get(p.stem, float("inf")))


async def _execute_all(paths: list[Path], workdir: Path) -> dict[str, tuple]:
    from nbclient import NotebookClient

    gate = asyncio.Semaphore(PARALLEL)

    async def run(path: Path):
        notebook = _read(path)
        folder = workdir / path.stem
        folder.mkdir()
        async with gate:
            start = time.perf_counter()
            client = NotebookClient(notebook, timeout=300, kernel_name="python3",
                                    resources={"metadata": {"path": str(folder)}})
            try:
                await client.async_execute()
                error = None
            except Exception as exc:  # a cell's error: the notebook does not run clean
                error = exc
            return path.stem, (notebook, time.perf_counter() - start, error)

    return dict(await asyncio.gather(*(run(p) for p in _longest_first(paths))))


@pytest.fixture(scope="module")
def executed(folders, tmp_path_factory):
    """{chapter: (the English notebook as executed, seconds, its error or None)}, run in parallel kernels."""
    cache = ROOT / "_build" / ".model_cache"
    before = os.environ.get("ATTENTION_COURSE_MODEL_CACHE")
    os.environ["ATTENTION_COURSE_MODEL_CACHE"] = str(cache)
    start = time.perf_counter()
    try:
        # in a thread of its own: Playwright's sync API (the browser tests) keeps an event loop running here
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            results = thread.submit(asyncio.run, _execute_all(sorted((folders[ENGLISH] / "notebooks").glob("*.ipynb")),
                                                              tmp_path_factory.mktemp("downloads"))).result()
    finally:
        if before is None:
            os.environ.pop("ATTENTION_COURSE_MODEL_CACHE")
        else:
            os.environ["ATTENTION_COURSE_MODEL_CACHE"] = before
    wall = time.perf_counter() - start
    each = ", ".join(f"{name} {seconds:.0f} s" for name, (_, seconds, _) in sorted(results.items()))
    print(f"\n{len(results)} chapter notebooks executed in {wall:.0f} s with {PARALLEL} kernels at once "
          f"(load average {os.getloadavg()[0]:.1f}): {each}")
    return results


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_downloaded_notebook_runs_clean(executed, name):
    assert name in executed, f"no notebook for {name} in the build"
    notebook, _, error = executed[name]
    assert error is None, f"{name}.ipynb stopped with an error:\n{str(error)[-3000:]}"
    stderr = [(index, "".join(output.get("text", "")))
              for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
              for output in cell.outputs if output.get("output_type") == "stream" and output.get("name") == "stderr"]
    assert not stderr, f"{name}.ipynb wrote to stderr: {stderr[:3]}"
    ran = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert ran and all(cell.execution_count for cell in ran), f"{name}: not every code cell ran"
