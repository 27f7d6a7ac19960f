"""What makes the book teach well, checked on its sources and on the built HTML.

- every figure is numbered, captioned, and described by its alt text (never a file path);
- a figure that redraws one of the notes' figures says so, and the notes-to-chapters map agrees;
- every chapter page states a time of at most 40 minutes that fits its length.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from test_book_sources import toc_files

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = [p for p in toc_files() if re.match(r"\d\d-", p.name)]
NOTES_FIGURE = re.compile(r"\bfig(?:ure)?s?\.?\s+((?:7|8)-\d+)", re.IGNORECASE)
MAX_MINUTES = 40


def _article(html_file: Path) -> BeautifulSoup:
    soup = BeautifulSoup(html_file.read_text(encoding="utf-8"), "html.parser")
    return soup.find("article") or soup.find("main")


def _built(built_html: Path, page: Path) -> Path:
    return built_html / page.relative_to(ROOT).with_suffix(".html")


def _alt_problem(alt: str | None) -> str | None:
    if not alt or not alt.strip():
        return "no alt text"
    if re.search(r"[\\/]|\.(png|svg|jpe?g|gif)\b", alt, re.IGNORECASE):
        return f"alt text is a path: {alt!r}"
    if len(alt.split()) < 5:
        return f"alt text too short to say what the figure shows: {alt!r}"
    return None


def figure_problems(article: BeautifulSoup) -> list[str]:
    """Every image must sit in a numbered figure with a caption, and carry alt text that describes it."""
    problems = []
    for img in article.find_all("img"):
        where = img.get("src", "?")[-40:]
        alt = _alt_problem(img.get("alt"))
        if alt:
            problems.append(f"{where}: {alt}")
        figure = img.find_parent("figure")
        caption = figure.find("figcaption") if figure else None
        if caption is None:
            problems.append(f"{where}: no caption")
            continue
        number = caption.find(class_="caption-number")
        if number is None or not re.match(r"Fig\. \d+", number.get_text(strip=True)):
            problems.append(f"{where}: the caption has no figure number")
        text = caption.get_text(" ", strip=True)
        if number is not None:
            text = text.replace(number.get_text(" ", strip=True), "", 1).strip()
        if len(text.split()) < 4:
            problems.append(f"{where}: caption too short: {text!r}")
    return problems


def test_the_figure_check_finds_a_path_for_alt_text_and_a_missing_caption():
    html = (
        '<article><figure><img alt="../_build/jupyter_execute/x.png" src="x.png">'
        '<figcaption><p><span class="caption-number">Fig. 3 </span>Weights of three keys.</p></figcaption></figure>'
        '<p><img alt="A heatmap of attention weights, brightest on the diagonal." src="y.png"></p></article>'
    )
    problems = figure_problems(BeautifulSoup(html, "html.parser"))
    assert any("x.png" in p and "path" in p for p in problems)
    assert any("y.png" in p and "no caption" in p for p in problems)
    assert not any("y.png" in p and "alt" in p for p in problems)


def test_every_figure_in_the_book_is_numbered_captioned_and_described(built_html):
    problems, figures = {}, 0
    for page in toc_files():
        article = _article(_built(built_html, page))
        figures += len(article.find_all("img"))
        found = figure_problems(article)
        if found:
            problems[page.name] = found
    captioned = sum(len(re.findall(r"^mystnb:\n  figure:", page.read_text(encoding="utf-8"), re.MULTILINE)) for page in toc_files())
    assert captioned >= 30 and figures >= captioned, f"{figures} images found for {captioned} captioned cells; is the article located?"
    assert problems == {}


def test_captions_that_name_a_figure_of_the_notes_agree_with_the_map_of_the_notes(built_html):
    # The map (chapter 1) says where each of the notes' figures is covered; a caption saying it redraws
    # fig. 8-k must be on the page the map names for fig. 8-k.
    overview = _article(_built(built_html, ROOT / "book" / "01-overview.md"))
    mapped: dict[str, set[str]] = {}
    for row in overview.find_all("tr"):
        cells = row.find_all(["td", "th"])
        numbers = {n for cell in cells[:1] for n in NOTES_FIGURE.findall(cell.get_text(" "))}
        if len(cells) < 2:
            continue
        pages = {Path(a["href"].split("#")[0]).stem for a in row.find_all("a", href=True)}
        for n in numbers or NOTES_FIGURE.findall(cells[0].get_text(" ")):
            mapped.setdefault(n, set()).update(pages)
    expected = {"7-22"} | {f"8-{k}" for k in range(1, 10)}
    assert expected <= set(mapped), f"the map of the notes lacks figures {sorted(expected - set(mapped))}"
    redrawn: dict[str, set[str]] = {}
    for page in toc_files():
        for caption in _article(_built(built_html, page)).find_all("figcaption"):
            for n in NOTES_FIGURE.findall(caption.get_text(" ")):
                redrawn.setdefault(n, set()).add(page.stem)
    assert {"8-2", "8-3", "8-4"} <= set(redrawn), "the redrawn figs 8-2, 8-3, 8-4 are not tied to the notes"
    for number, pages in redrawn.items():
        assert pages <= mapped.get(number, set()), f"fig. {number} is redrawn on {pages}, the map says {mapped.get(number)}"


# ---------------------------------------------------------------------------------------------
# Stated times. A proxy for how long a careful student needs: 150 words of prose a minute, half a
# minute to read and run each code cell, six seconds for each line of code in it, and a minute to
# study each figure, each table and each display equation (their words, if any, are also read as
# prose). Sections marked optional are counted apart; the stated time is for the rest. Tables that a
# code cell prints are not counted as tables: their cell and its lines are.

WORDS_PER_MINUTE = 150
MINUTES_PER_CELL = 0.5
MINUTES_PER_CODE_LINE = 0.1
MINUTES_PER_FIGURE = 1.0
MINUTES_PER_TABLE = 1.0
MINUTES_PER_EQUATION = 1.0

# A figure: a code cell whose metadata makes it one (mystnb: figure:), or a {figure} directive.
FIGURE = re.compile(r"^mystnb:\n  figure:|^(?:```+|:::+)\{figure\}", re.MULTILINE)
# A table directive ({list-table}, {table}, {csv-table}); markdown tables are found by _markdown_tables.
TABLE_DIRECTIVE = re.compile(r"^(?:```+|:::+)\{(?:list-table|table|csv-table)\}", re.MULTILINE)
# A display equation: a $$ … $$ block (with or without a label after it), or a {math} directive.
DISPLAY_MATH = re.compile(r"^\$\$.*?\$\$", re.MULTILINE | re.DOTALL)
MATH_DIRECTIVE = re.compile(r"^(?:```+|:::+)\{math\}", re.MULTILINE)
TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _markdown_tables(prose: str) -> int:
    """Markdown (pipe) tables: runs of lines that start with "|" and include a header rule (|---|)."""
    tables, run = 0, []
    for line in prose.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            run.append(line.strip())
            continue
        tables += any(TABLE_RULE.match(row) for row in run)
        run = []
    return tables


def _optional_spans(body: str) -> list[tuple[int, int]]:
    spans = []
    headings = list(re.finditer(r"^(#{2,6}) (.*)$", body, re.MULTILINE))
    for k, heading in enumerate(headings):
        if "optional" not in heading.group(2).lower():
            continue
        level = len(heading.group(1))
        end = next((h.start() for h in headings[k + 1 :] if len(h.group(1)) <= level), len(body))
        spans.append((heading.start(), end))
    for block in re.finditer(r"^:::\{admonition\}[^\n]*optional.*?^:::$", body, re.MULTILINE | re.IGNORECASE | re.DOTALL):
        spans.append(block.span())
    return spans


def counted_items(part: str) -> dict[str, int]:
    """What ``estimated_minutes`` counts in a piece of a MyST notebook page."""
    cells = [re.sub(r"\A(?::.*\n)*---\n.*?\n---\n", "", cell, flags=re.DOTALL)  # cell metadata is not code
             for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", part, re.DOTALL)]
    prose = re.sub(r"```.*?```", " ", part, flags=re.DOTALL)
    return {
        "words": len(re.findall(r"[A-Za-z]+|[\u4e00-\u9fff]", prose)),
        "cells": len(cells),
        "code_lines": sum(1 for c in cells for line in c.splitlines()
                          if line.strip() and not line.lstrip().startswith("#")),
        "figures": len(FIGURE.findall(part)),
        "tables": _markdown_tables(prose) + len(TABLE_DIRECTIVE.findall(part)),
        "equations": len(DISPLAY_MATH.findall(prose)) + len(MATH_DIRECTIVE.findall(part)),
    }


def estimated_minutes(text: str) -> tuple[float, float]:
    """(minutes for the required part, minutes for the optional part) of a MyST notebook page."""
    body = text.split("---", 2)[2] if text.startswith("---") else text
    if "**Time:**" in body:  # the admonition up to the time line is not reading matter
        body = body.split("**Time:**", 1)[1].split("\n", 1)[-1]
    spans = _optional_spans(body)

    def minutes(part: str) -> float:
        n = counted_items(part)
        return (n["words"] / WORDS_PER_MINUTE + n["cells"] * MINUTES_PER_CELL + n["code_lines"] * MINUTES_PER_CODE_LINE
                + n["figures"] * MINUTES_PER_FIGURE + n["tables"] * MINUTES_PER_TABLE
                + n["equations"] * MINUTES_PER_EQUATION)

    optional = "".join(body[a:b] for a, b in spans)
    required = body
    for a, b in sorted(spans, reverse=True):
        required = required[:a] + required[b:]
    return minutes(required), minutes(optional)


def stated_minutes(text: str) -> int:
    match = re.search(r"\*\*Time:\*\*\s*about (\d+) minutes", text)
    assert match, "no '**Time:** about N minutes' line"
    return int(match.group(1))


def test_the_time_estimate_counts_prose_code_and_sets_optional_sections_apart():
    header = "---\njupytext: {}\n---\n# 9. X\n\n**Time:** about 5 minutes.\n\n"
    prose = " ".join(["word"] * 300) + "\n\n"
    cell = "```{code-cell} ipython3\nx = 1\ny = 2\n```\n\n"
    required, optional = estimated_minutes(header + prose + cell + "## Going further (optional)\n\n" + prose)
    assert required == pytest.approx(300 / 150 + 0.5 + 0.2)  # "X" of the title is before the time line
    assert optional == pytest.approx((300 + 3) / 150)  # its heading is read too


def test_the_time_estimate_counts_figures_tables_and_display_equations():
    header = "---\njupytext: {}\n---\n# 9. X\n\n**Time:** about 5 minutes.\n\n"
    figure_cell = ("```{code-cell} ipython3\n---\nmystnb:\n  figure:\n    caption: A b c d.\n    name: fig-x\n"
                   "---\nfig = draw()\n```\n\n")
    figure_directive = "```{figure} picture.png\n:name: fig-y\n```\n\n"
    markdown_table = "| a | b |\n|---|:---:|\n| 1 | 2 |\n\n"
    list_table = "```{list-table}\n* - a\n  - b\n```\n\n"
    equation = "$$\nx = 1\n$$ (eq-x)\n\n"
    math_directive = "```{math}\ny = 2\n```\n\n"
    not_a_table = "a | b, and a rule: ---\n\n"  # a pipe in prose is not a table
    page = (header + figure_cell + figure_directive + markdown_table + list_table + equation + math_directive
            + not_a_table)
    assert counted_items(page.split("**Time:**")[1]) == {
        "words": counted_items(page.split("**Time:**")[1])["words"],
        "cells": 1, "code_lines": 1, "figures": 2, "tables": 2, "equations": 2,
    }
    required, _ = estimated_minutes(page)
    without = estimated_minutes(header + figure_cell.replace("mystnb:\n  figure:", "mystnb:\n  other:")
                                + not_a_table)[0]
    items = 2 * MINUTES_PER_FIGURE + 2 * MINUTES_PER_TABLE + 2 * MINUTES_PER_EQUATION
    assert required - without == pytest.approx(items, abs=0.1)  # the items, and the few words inside them
    assert MINUTES_PER_FIGURE == MINUTES_PER_TABLE == MINUTES_PER_EQUATION == 1
    # In an optional section, they count for the optional part.
    _, optional = estimated_minutes(header + "## More (optional)\n\n" + equation + markdown_table)
    assert optional >= 2 * MINUTES_PER_EQUATION


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_states_at_most_40_minutes_and_a_time_that_fits_its_length(page):
    text = page.read_text(encoding="utf-8")
    stated = stated_minutes(text)
    required, _ = estimated_minutes(text)
    assert stated <= MAX_MINUTES, f"{page.name} says {stated} minutes; split it or mark parts optional"
    # Not more than a sixth under the estimate (or 5 minutes for a short page): a reader who plans by
    # the stated time must not run out of it; a page too long for 40 minutes marks parts optional.
    assert required - stated <= max(5, required / 6), (
        f"{page.name} says about {stated} minutes, its length suggests about {required:.0f}; "
        "state more, or mark a section optional"
    )
    # Not more than a third over it either.
    assert stated - required <= max(5, required / 3), (
        f"{page.name} says about {stated} minutes, its length suggests about {required:.0f}"
    )
