"""The book's sources and what the build makes of them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from offline_assets import offending_urls, unhosted_widgets  # noqa: E402


def toc_files() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [toc["root"]]
    stack = list(toc.get("chapters", [])) + [c for part in toc.get("parts", []) for c in part["chapters"]]
    while stack:
        entry = stack.pop()
        entries.append(entry["file"])
        stack.extend(entry.get("sections", []))
    return [ROOT / f"{entry}.md" for entry in entries]


def test_every_page_with_code_is_a_jupytext_notebook_that_executes():
    # Without the jupytext header, MyST-NB treats the page as plain markdown and its cells silently never run.
    for page in toc_files():
        text = page.read_text(encoding="utf-8")
        if "```{code-cell}" not in text:
            continue
        header = yaml.safe_load(text.split("---")[1])
        assert header["jupytext"]["text_representation"]["format_name"] == "myst", page
        assert header["kernelspec"]["name"] == "python3", page


def test_no_page_is_left_out_of_the_table_of_contents():
    listed = {p.resolve() for p in toc_files()}
    pages = {p.resolve() for p in (ROOT / "book").rglob("*.md") if "_ext" not in p.parts}
    assert pages - listed == set(), "pages under book/ that the table of contents does not build"


def prose_problems(text: str) -> list[str]:
    """Lines of a MyST page's prose that MyST would not show as written: a line starting with "%" is a
    comment (the rest of the paragraph after it vanishes), and TeX outside $...$ is shown raw."""
    blank = lambda m: "\n" * m.group(0).count("\n")  # noqa: E731  (keeps the file's line numbers)
    body = re.sub(r"\A---\n.*?\n---\n", blank, text, flags=re.DOTALL)  # the jupytext header
    body = re.sub(r"^(```+|~~~+).*?^\1\s*$", blank, body,
                  flags=re.MULTILINE | re.DOTALL)  # code cells, literal blocks, directives in fences
    problems = []
    for number, line in enumerate(body.splitlines(), start=1):
        if line.startswith("%"):
            problems.append(f"line {number} of the prose starts with %, a MyST comment: {line!r}")
    without_math = re.sub(r"\$\$.*?\$\$", " ", body, flags=re.DOTALL)
    without_math = re.sub(r"(?<![\\$])\$(?!\$)(?:[^$]|\\\$)+?(?<!\\)\$", " ", without_math)  # inline math
    without_math = re.sub(r"`[^`]*`", " ", without_math)  # inline code and roles' targets
    for match in re.finditer(r"[A-Za-z]_\{|\\[A-Za-z]{2,}", without_math):
        start = without_math.rfind("\n", 0, match.start()) + 1
        problems.append(f"TeX outside $...$: {without_math[start:without_math.find(chr(10), match.end())]!r}")
    return problems


def test_the_prose_check_finds_a_comment_line_and_tex_outside_math():
    text = "# T\n\nMost weight (in\n%).\n\nwith H_{i-1} as query, $H_{i-1}$ and $\\tanh x$ fine\n\n```\n% code\nx_{1}\n```\n"
    problems = prose_problems(text)
    assert len(problems) == 2 and "%" in problems[0] and "H_{i-1} as query" in problems[1]
    assert prose_problems("a $x_{1}$ spanning $a +\n\\beta$ lines, `H_{i}` in code\n") == []


def test_no_page_has_a_comment_line_or_tex_outside_math_in_its_prose():
    problems = {page.name: found for page in toc_files() if (found := prose_problems(page.read_text(encoding="utf-8")))}
    assert problems == {}


def test_the_build_has_no_solutions(built_html):
    leaked = [p for p in built_html.rglob("*") if "solutions" in p.relative_to(built_html).parts]
    assert leaked == []


def test_the_vendored_scripts_ship_with_their_licences(built_html):
    licences = {p.name for p in (built_html / "_static" / "offline" / "LICENSES").iterdir()}
    assert {"mathjax.txt"} <= licences


def _scripts(html: str) -> list[str]:
    return re.findall(r'<script[^>]*\bsrc="([^"?]+)', html)


def test_only_pages_with_a_widget_load_the_widget_host_and_no_widget_manager(built_html):
    # The 3.6 MB Jupyter widgets HTML manager (and RequireJS) are gone; the book's own host is loaded
    # where a widget is, and nowhere else.
    pages = [p for p in built_html.rglob("*.html") if "_static" not in p.relative_to(built_html).parts]
    with_widgets = set()
    for page in pages:
        html = page.read_text(encoding="utf-8")
        scripts = _scripts(html)
        assert not [s for s in scripts if "html-manager" in s or s.endswith("require.js")], page
        has_widget = "application/vnd.jupyter.widget-view+json" in html
        loads_host = any(s.endswith("offline/widget-host.js") for s in scripts)
        assert loads_host == has_widget, page
        if has_widget:
            with_widgets.add(page.relative_to(built_html).as_posix())
    assert {"book/02-soft-hard.html", "book/04-three-stages.html", "book/06-attention-decoder.html"} <= with_widgets
    host = built_html / "_static" / "offline" / "widget-host.js"
    assert host.stat().st_size < 10_000


def test_a_widget_the_host_cannot_show_is_refused_at_build_time():
    state = {
        "version_major": 2, "version_minor": 0,
        "state": {
            "a": {"model_module": "anywidget", "model_name": "AnyModel", "state": {}},
            "b": {"model_module": "@jupyter-widgets/base", "model_name": "LayoutModel", "state": {}},
            "c": {"model_module": "@jupyter-widgets/controls", "model_name": "IntSliderModel", "state": {}},
        },
    }
    html = f'<script type="application/vnd.jupyter.widget-state+json">{json.dumps(state)}</script>'
    assert unhosted_widgets(html) == ["IntSliderModel from @jupyter-widgets/controls (c)"]
    assert unhosted_widgets(html.replace("IntSliderModel", "AnyModel").replace("@jupyter-widgets/controls", "anywidget")) == []


def test_the_static_check_flags_remote_and_root_absolute_fetches():
    html = (
        '<script src="https://cdn.example.org/x.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/a.css">'
        '<img src="/_static/logo.png">'
        '<script src="../_static/offline/widget-host.js"></script>'
        '<a href="https://example.org/paper.pdf">a link a reader may follow</a>'
    )
    assert offending_urls(html) == [
        "<script> https://cdn.example.org/x.js",
        "<link> //fonts.example.org/a.css",
        "<img> /_static/logo.png",
    ]


def test_built_pages_pass_the_static_check(built_html):
    offending = {
        page.relative_to(built_html).as_posix(): offending_urls(page.read_text(encoding="utf-8"))
        for page in built_html.rglob("*.html")
        if "_static" not in page.relative_to(built_html).parts
    }
    assert {page: urls for page, urls in offending.items() if urls} == {}


def test_the_book_offers_each_student_notebook_for_download_and_no_solution(built_html):
    downloads = {p.name: p for p in (built_html / "_downloads").rglob("*") if p.is_file()}
    for exercise in (p for p in (ROOT / "exercises").rglob("*") if p.is_file()):  # notebooks and their data
        assert exercise.name in downloads, f"no download of {exercise.relative_to(ROOT)} in the book"
        assert downloads[exercise.name].read_bytes() == exercise.read_bytes()
    for path in built_html.rglob("*"):
        if path.is_file() and path.suffix in {".ipynb", ".html", ".txt", ".md"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "BEGIN SOLUTION" not in text and "run_hidden_check" not in text, path


def test_each_assignment_has_a_page_that_links_its_notebook():
    for assignment in (ROOT / "exercises").iterdir():
        page = ROOT / "book" / "exercises" / f"{assignment.name}.md"
        assert page.is_file(), f"no book page for the assignment {assignment.name}"
        assert f"exercises/{assignment.name}/{assignment.name}.ipynb" in page.read_text(encoding="utf-8")
