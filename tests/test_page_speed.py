"""Pages a phone paints sooner (book/_ext/page_speed.py): one stylesheet per page, joined in order with its
``@import``s and ``url()``s right, without any rule that applies to what a reader sees (in light and dark,
with the menus open); no script preloaded in the head; a first visit painted in the reader's colours before
the theme's script runs; the theme's tab-stop pass gives the same stops while reading the layout once; the
formulas are measured without holding up the page (course-reader.js); Chinese text is set in a font the page
names; the icon font arriving moves nothing; and the widgets are drawn one at a time, the one on screen first
(widget_host.js)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import page_speed  # noqa: E402

from browser_audit import NEXT_FRAME, editions, pages_of, reader, serve, wait_for_math  # noqa: E402

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="needs Node (apt: nodejs)")


# ---- Joining stylesheets ---------------------------------------------------------------------------------

def test_a_joined_stylesheet_keeps_the_order_and_finds_every_file(tmp_path):
    static = tmp_path / "_static"
    (static / "styles").mkdir(parents=True)
    (static / "basic.css").write_text(".basic { background: url(file.png); }\n", encoding="utf-8")
    (static / "styles" / "theme.css").write_text(
        '@charset "utf-8";\n@import "../basic.css";\n'
        ".theme { background: url('../images/a.png?v=1#x'); }\n"
        ".icon { background: url(\"data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg'/>\"); }\n"
        ".far { background: url(https://example.org/b.png); }\n", encoding="utf-8")
    joined = page_speed.joined_stylesheet(static / "styles" / "theme.css", static)
    assert "@charset" not in joined and "@import" not in joined
    # The imported file in place of its @import (before the rules after it), its url() read from its own folder.
    assert joined.index('.basic { background: url("file.png"); }') < joined.index(".theme")
    assert '.theme { background: url("images/a.png?v=1#x"); }' in joined
    assert "url(\"data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg'/>\")" in joined
    assert "url(https://example.org/b.png)" in joined


def test_only_local_stylesheets_for_every_screen_are_joined(tmp_path):
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "a.css").write_text("p {}", encoding="utf-8")
    page = tmp_path / "page.html"
    head = '<html><head><link rel="stylesheet" href="_static/a.css?v=2" />{}</head><body></body></html>'
    links = page_speed.stylesheet_links(head.format(""), page, tmp_path)
    assert [path.name for _, path in links] == ["a.css"]
    for other in ('<link rel="stylesheet" href="https://cdn.example.org/x.css" />',
                  '<link rel="stylesheet" href="_static/a.css" media="print" />',
                  '<link rel="stylesheet" href="_static/missing.css" />'):
        assert page_speed.stylesheet_links(head.format(other), page, tmp_path) is None, other


@needs_node
def test_the_rules_kept_are_those_a_page_or_a_script_can_use(tmp_path):
    page = tmp_path / "page.html"
    page.write_text('<div class="card"><p id="intro">text</p></div>', encoding="utf-8")
    script = tmp_path / "menu.js"
    script.write_text('menu.classList.add("show");', encoding="utf-8")
    css = (".card { color: red; }\n#intro { margin: 0; }\n.show { display: block; }\n"
           ".carousel-item { float: left; }\n@media (min-width: 1px) { .offcanvas { top: 0; } .card { top: 1px; } }\n"
           ":focus-visible { outline: 2px solid; }\n")
    kept = page_speed.purge({"one": css}, [page, script])["one"]
    for rule in (".card", "#intro", ".show", ":focus-visible"):
        assert rule in kept, rule
    assert ".carousel-item" not in kept and ".offcanvas" not in kept
    assert "top: 1px" in kept  # a used rule inside a media query stays, with its query


# ---- The theme's tab stops -------------------------------------------------------------------------------

def test_the_installed_theme_holds_the_code_that_is_patched():
    import pydata_sphinx_theme

    script = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static" / "scripts" / "pydata-sphinx-theme.js"
    assert script.read_text(encoding="utf-8").count(page_speed.TAB_STOPS_BEFORE) == 1


@needs_node
def test_the_patched_tab_stops_are_the_themes_and_read_the_layout_before_any_write():
    # Blocks whose size reads are logged: the original interleaves write, read; the patch reads all first.
    program = r"""
const blocks = (log) => [[300, 200, 50, 50], [100, 200, 50, 50], [100, 100, 90, 50], [10, 10, 10, 10]].map(
  ([sw, cw, sh, ch], i) => { let stop = null; return {
    get scrollWidth() { log.push("read"); return sw; }, get clientWidth() { return cw; },
    get scrollHeight() { return sh; }, get clientHeight() { return ch; },
    get tabIndex() { return stop === null ? 0 : stop; }, set tabIndex(v) { log.push("write"); stop = v; } }; });
const run = (code) => { const log = []; const list = blocks(log); eval("list" + code); return [list.map((b) => b.tabIndex), log]; };
process.stdout.write(JSON.stringify([run(process.argv[1]), run(process.argv[2])]));
"""
    run = subprocess.run([NODE, "-e", program, page_speed.TAB_STOPS_BEFORE, page_speed.TAB_STOPS_AFTER],
                         capture_output=True, text=True, check=True)
    (theirs, their_log), (ours, our_log) = json.loads(run.stdout)
    assert ours == theirs == [0, -1, 0, -1]
    assert their_log[:3] == ["read", "write", "read"]  # the layout is read again after each change
    assert our_log[:4] == ["read"] * 4 and set(our_log[4:]) <= {"write"}


def test_a_bare_redirect_becomes_a_page_and_a_page_is_left_alone(tmp_path):
    index = tmp_path / "index.html"
    index.write_text('<meta http-equiv="Refresh" content="0; url=book/index.html" />\n', encoding="utf-8")
    assert page_speed.complete_root_redirect(tmp_path, "zh_CN", "注意力 <course>", icon="_static/favicon.svg")
    written = index.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in written and "<title>注意力 &lt;course&gt;</title>" in written
    assert '<meta http-equiv="Refresh" content="0; url=book/index.html" />' in written
    assert '<link rel="icon" href="_static/favicon.svg" />' in written and '<a href="book/index.html">' in written
    assert not page_speed.complete_root_redirect(tmp_path, "en", "Again", "_static/favicon.svg")
    assert index.read_text(encoding="utf-8") == written


# ---- The theme in the head -------------------------------------------------------------------------------

def test_the_installed_theme_sets_the_theme_in_the_head_as_expected():
    import pydata_sphinx_theme

    layout = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "layout.html"
    expected = page_speed.THEME_IN_HEAD_BEFORE.replace('"auto"', '"{{ default_mode }}"')
    assert layout.read_text(encoding="utf-8").count(expected) == 1


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_first_visit_is_painted_in_the_readers_colours_before_the_themes_script_runs(browser, built_html, scheme):
    with serve(built_html) as base:
        context = browser.new_context(color_scheme=scheme)
        page = context.new_page()
        page.route("**/pydata-sphinx-theme.js*", lambda route: route.abort())  # the theme's script never runs
        page.goto(base + "book/04-three-stages.html", wait_until="domcontentloaded")
        theme = page.evaluate("document.documentElement.dataset.theme")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        context.close()
    assert theme == scheme
    dark = sum(int(v) for v in re.findall(r"\d+", background)[:3]) < 3 * 128
    assert dark == (scheme == "dark"), background


# ---- The built book --------------------------------------------------------------------------------------

def test_every_page_links_one_joined_stylesheet_and_preloads_no_script(built_html):
    for language, folder in editions(built_html).items():
        static = folder / "_static"
        joined = sorted(static.glob(f"{page_speed.PREFIX}*.css"))
        assert joined, language
        for page in pages_of(folder):
            html = (folder / page).read_text(encoding="utf-8")
            head = html[: html.index("</head>")]
            if page == "index.html":  # the root's redirect: an icon that asks for nothing (no /favicon.ico)
                assert '<meta http-equiv="Refresh" content="0; url=book/index.html" />' in head
                assert re.findall(r"<link\b[^>]*>", head) == ['<link rel="icon" href="data:," />'], head
                continue
            sheets = [tag for tag in re.findall(r"<link\b[^>]*>", head) if 'rel="stylesheet"' in tag]
            assert len(sheets) == 1 and page_speed.PREFIX in sheets[0], (language, page, sheets)
            assert not any(page_speed._is_script_preload(tag) for tag in re.findall(r"<link\b[^>]*>", head)), page
            assert page_speed.THEME_IN_HEAD_AFTER in head, page
        for sheet in joined:
            # Every file a url() names is in the build (fonts, images), read from the joined file's folder.
            for url in re.findall(r'url\("([^"]+)"\)', sheet.read_text(encoding="utf-8")):
                if not url.startswith("data:"):
                    assert (static / url.split("?")[0].split("#")[0]).is_file(), (sheet.name, url)
        assert page_speed.TAB_STOPS_AFTER in (static / "scripts" / "pydata-sphinx-theme.js").read_text(encoding="utf-8")


# Every rule of the original stylesheets that applies to the page as it is now (dynamic states such as
# :hover and pseudo-elements set aside, so that the element itself is asked for) is in the page's stylesheet.
MISSING_RULES = r"""(sources) => {
  const parts = (selectorText) => {  // the selectors of a list, split at commas outside brackets
    const out = []; let depth = 0, start = 0;
    for (let i = 0; i < selectorText.length; i++) {
      const c = selectorText[i];
      if (c === '(' || c === '[') depth++;
      else if (c === ')' || c === ']') depth--;
      else if (c === ',' && depth === 0) { out.push(selectorText.slice(start, i).trim()); start = i + 1; }
    }
    out.push(selectorText.slice(start).trim());
    return out;
  };
  const walk = (rules, each) => { for (const rule of rules) {
    if (rule instanceof CSSStyleRule) each(rule);
    if (rule.cssRules && !(rule instanceof CSSStyleRule)) walk(rule.cssRules, each);
  } };
  const kept = new Set();
  for (const sheet of document.styleSheets) walk(sheet.cssRules, (rule) => parts(rule.selectorText).forEach((p) => kept.add(p)));
  const dynamic = /::?(?:hover|focus-visible|focus-within|focus|active|visited|before|after|placeholder|selection|marker|backdrop|first-letter|first-line|-webkit-[\w-]+|-moz-[\w-]+)(?![\w-])/g;
  const missing = [];
  for (const [name, text] of Object.entries(sources)) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(text.replace(/@import[^;]+;/g, ''));
    walk(sheet.cssRules, (rule) => {
      for (const part of parts(rule.selectorText)) {
        if (kept.has(part)) continue;
        let applies = false;
        try { applies = document.querySelector(part.replace(dynamic, '') || '*') !== null; } catch (e) { continue; }
        if (applies) missing.push(`${name}: ${part}`);
      }
    });
  }
  return missing;
}"""


def _sources(folder: Path) -> dict[str, str]:
    """The stylesheets the joined one was made of (it names them), as the theme and extensions wrote them."""
    joined = next((folder / "_static").glob(f"{page_speed.PREFIX}*.css")).read_text(encoding="utf-8")
    names = re.findall(r"/\* (_static/\S+\.css) \*/", joined)
    assert len(names) >= 5, names
    sources = {name: (folder / name).read_text(encoding="utf-8") for name in names}
    sources["_static/basic.css"] = (folder / "_static" / "basic.css").read_text(encoding="utf-8")  # theme.css imports it
    return sources


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_rule_that_applies_to_a_page_was_dropped(browser, built_html, scheme):
    folders = editions(built_html)
    missing = {}
    with serve(built_html) as base:
        for language, page_path in (("en", "book/04-three-stages.html"), ("zh_CN", "search.html")):
            prefix = folders[language].relative_to(built_html).as_posix()
            path = f"{prefix}/{page_path}" if prefix != "." else page_path
            sources = _sources(folders[language])
            with reader(browser, base, path, "phone", scheme) as page:
                wait_for_math(page)
                missing[(path, "phone")] = page.evaluate(MISSING_RULES, sources)
                page.locator(".primary-toggle:visible").first.click()  # the chapters, as a dialog
                page.wait_for_function("document.querySelector('#pst-primary-sidebar-modal').open")
                missing[(path, "phone, chapters open")] = page.evaluate(MISSING_RULES, sources)
            with reader(browser, base, path, "desktop", scheme) as page:
                wait_for_math(page)
                menu = page.locator(".dropdown-toggle:visible")
                if menu.count():
                    menu.first.click()  # the download menu (Bootstrap adds .show)
                    page.wait_for_selector(".dropdown-menu.show")
                missing[(path, "desktop, menu open")] = page.evaluate(MISSING_RULES, sources)
    assert {where: rules for where, rules in missing.items() if rules} == {}


def test_a_wide_formula_far_down_the_page_is_marked_without_scrolling_to_it(browser, built_html):
    """The formulas out of sight are measured when the browser is idle: a keyboard reader finds the box
    of a wide one wherever it is, though the page never waited for them."""
    with serve(built_html) as base, reader(browser, base, "book/04-three-stages.html", "phone") as page:
        wait_for_math(page)
        assert page.evaluate("window.scrollY") == 0
        below = page.evaluate("""() => [...document.querySelectorAll('main .course-scrolls')]
            .filter((box) => box.getBoundingClientRect().top > 3 * innerHeight).length""")
        assert below >= 1


# ---- Chinese text, icons and widgets that do not hold up a phone ---------------------------------------

# The fonts Chromium drew a node's text with, and the families its style names (course-reader.css).
def _fonts_of(page, selector: str) -> tuple[list[str], str]:
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = [font["familyName"] for font in cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]]
    return fonts, page.eval_on_selector(selector, "el => getComputedStyle(el).fontFamily")


def test_chinese_text_is_drawn_in_a_font_the_page_names(browser, built_html):
    """Without a Chinese font in its stack the browser searched the system for one for every character
    it met (about twice the layout time of the English twin on a phone). Prose and code alike name it."""
    with serve(built_html) as base, reader(browser, base, "zh/book/04-three-stages.html", "phone") as page:
        page.evaluate("""() => {
          const article = document.querySelector('article');
          article.insertAdjacentHTML('afterbegin', '<p id="probe-prose">注意力机制</p><pre id="probe-code">查询与键</pre>');
        }""")
        for probe in ("#probe-prose", "#probe-code"):
            fonts, families = _fonts_of(page, probe)
            named = [family.strip().strip('"').lower() for family in families.split(",")]
            assert fonts and all(font.lower() in named for font in fonts), (probe, fonts, families)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_the_icon_font_arriving_moves_nothing(browser, built_html, language):
    """A download link's icon takes the same room while the icon font is on its way as after it came: the
    room the browser kept for it meanwhile once made a Chinese line break elsewhere, and the paragraph
    jumped when the font arrived (CLS 0.19 on a phone)."""
    prefix = "" if language == "en" else editions(built_html)[language].relative_to(built_html).as_posix() + "/"
    boxes = """() => [...document.querySelectorAll('article p:first-of-type, article a.download')].slice(0, 8)
        .map((el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.width, r.height].map(Math.round); })"""
    with serve(built_html) as base:
        context = browser.new_context(viewport={"width": 412, "height": 823})
        page = context.new_page()
        held = []
        page.route("**/course-icons.woff*", lambda route: held.append(route))  # the icon font, held back until we let it come
        page.goto(base + prefix + "book/exercises/seq2seq-attention.html", wait_until="domcontentloaded")
        page.wait_for_function("document.fonts.status === 'loading'")
        before = page.evaluate(boxes)
        assert len(held) == 1
        held[0].continue_()
        page.wait_for_function("document.fonts.status === 'loaded'")
        after = page.evaluate(boxes)
        context.close()
    assert len(after) >= 3
    assert before == after


IDLE_HELD = """window.__idle = [];
window.requestIdleCallback = (work) => { window.__idle.push(work); return window.__idle.length; };
window.__drawn = [];
new MutationObserver(() => {
  document.querySelectorAll('.course-widget').forEach((el, i) => {
    if (el.childElementCount && !window.__drawn.includes(i)) window.__drawn.push(i);
  });
}).observe(document, {childList: true, subtree: true});"""
RUN_IDLE = "window.__idle.splice(0).forEach((work) => work({timeRemaining: () => 10, didTimeout: false}))"


def test_the_widget_on_screen_is_drawn_first_and_the_others_when_the_browser_is_idle(browser, built_html):
    """Chapter 6's two widgets, three screens apart, opened at the second: it is drawn at once; the first
    only in the browser's idle time (held back here, then let run), one widget at a time."""
    with serve(built_html) as base:
        context = browser.new_context(viewport={"width": 390, "height": 844})
        page = context.new_page()
        page.add_init_script(IDLE_HELD)

        def spaced(route):  # three screens between the two widgets
            html = route.fetch().text()
            second = html.index('<section id="your-own-sentence">')
            route.fulfill(body=html[:second] + '<div style="height: 2600px"></div>' + html[second:],
                          content_type="text/html; charset=utf-8")

        page.route("**/book/06-attention-decoder.html", spaced)
        page.goto(base + "book/06-attention-decoder.html#your-own-sentence", wait_until="load")
        page.wait_for_function("window.__drawn.length >= 1")
        page.wait_for_timeout(300)
        assert page.evaluate("window.__drawn") == [1]
        for _ in range(50):
            page.evaluate(RUN_IDLE)
            if page.evaluate("window.__drawn.length") == 2:
                break
            page.wait_for_timeout(100)
        assert page.evaluate("window.__drawn") == [1, 0]
        assert page.evaluate("document.querySelector('#your-own-sentence').getBoundingClientRect().top") < 844
        context.close()


# ---- What screen readers read of a formula: held as text while the page loads -------------------------

# The MathML nodes in Chromium's accessibility tree (what a screen reader is given), by role.
def _mathml_in_accessibility_tree(page) -> dict[str, int]:
    nodes = page.context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]
    roles = [node.get("role", {}).get("value", "") for node in nodes if not node.get("ignored")]
    return {role: roles.count(role) for role in sorted(set(roles)) if role.startswith("MathML")}


MATHML_HELD = re.compile(r'<noscript class="course-mml">(.*?)</noscript>', re.S)
PLACED = ("() => [...document.querySelectorAll('mjx-container')].map((formula) => "
          "Boolean(formula.querySelector(':scope > mjx-assistive-mml > math')))")


def test_a_formulas_mathml_is_held_as_text_and_put_in_place_the_formulas_near_the_screen_first(browser, built_html):
    """Chapter 4's MathML is text while the page loads (about a quarter of the work of showing it); the formulas on
    screen get theirs at once, the others in idle time, ten at a time; in the end a screen reader is given
    every MathML node it was given when the MathML was written in the page, and no other."""
    html = (built_html / "zh" / "book" / "04-three-stages.html").read_text(encoding="utf-8")
    held = MATHML_HELD.findall(html)
    assert len(held) == html.count("<mjx-container") >= 100 and all("<math" in mathml for mathml in held)
    with serve(built_html) as base:
        context = browser.new_context(viewport={"width": 390, "height": 844})
        page = context.new_page()
        page.route("**/zh/book/04-inline-mathml.html", lambda route: route.fulfill(
            body=MATHML_HELD.sub(r"\1", html), content_type="text/html; charset=utf-8"))
        page.goto(base + "zh/book/04-inline-mathml.html", wait_until="load")  # the MathML written in the page
        wait_for_math(page)
        written = _mathml_in_accessibility_tree(page)

        page.add_init_script(IDLE_HELD)
        page.goto(base + "zh/book/04-three-stages.html", wait_until="load")
        page.evaluate(NEXT_FRAME)
        assert not any(page.evaluate(PLACED))  # on a phone the first formula is two screens down
        page.evaluate("document.querySelectorAll('mjx-container')[60].scrollIntoView()")  # a reader scrolls
        page.evaluate(NEXT_FRAME)
        placed = page.evaluate(PLACED)
        near = page.evaluate("""() => [...document.querySelectorAll('mjx-container')].map((formula) => {
            const box = formula.getBoundingClientRect();
            return box.height > 0 && box.top < 2 * innerHeight && box.bottom > -innerHeight; })""")
        assert placed[60] and all(placed[i] for i, shown in enumerate(near) if shown)
        assert not all(placed) and not placed[0]
        assert page.evaluate("document.documentElement.dataset.courseMathml") == "placing"
        batches = []
        for _ in range(100):
            before = sum(page.evaluate(PLACED))
            page.evaluate(RUN_IDLE)
            batches.append(sum(page.evaluate(PLACED)) - before)
            if page.evaluate("document.documentElement.dataset.courseMathml") == "placed":
                break
        assert all(page.evaluate(PLACED)) and 0 < max(batches) <= 10
        assert page.locator("noscript.course-mml").count() == 0
        assert _mathml_in_accessibility_tree(page) == written
        context.close()
    assert written["MathMLMath"] >= 100 and written["MathMLIdentifier"] >= 300


def test_without_scripts_every_formula_gives_a_screen_reader_its_mathml(browser, built_html):
    with serve(built_html) as base:
        context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
        page = context.new_page()
        page.goto(base + "book/04-three-stages.html", wait_until="load")
        formulas = page.locator("mjx-container").count()
        assert formulas >= 100
        assert _mathml_in_accessibility_tree(page)["MathMLMath"] == formulas
        context.close()


def test_the_mathml_of_a_formula_whose_text_would_end_its_holder_is_left_in_the_page():
    import book_math

    formula = '<mjx-container><svg></svg><mjx-assistive-mml><math><mtext>{}</mtext></math></mjx-assistive-mml></mjx-container>'
    for text in ("x", "&lt;/noscript>"):  # escaped, it is text to the parser as well
        assert book_math.mathml_held(formula.format(text)) == formula.format(text).replace(
            "<mjx-assistive-mml>", '<noscript class="course-mml"><mjx-assistive-mml>').replace(
            "</mjx-assistive-mml>", "</mjx-assistive-mml></noscript>")
    assert book_math.mathml_held(formula.format("</NoScript>")) == formula.format("</NoScript>")


# ---- Code written with the spans that colour it -----------------------------------------------------------

def test_only_tokens_every_rule_gives_the_blocks_own_colour_lose_their_spans():
    css = ('html[data-theme="light"] .highlight { background: #fff; color: #080808 }\n'
           'html[data-theme="light"] .highlight .n { color: #080808 } /* Name */\n'
           'html[data-theme="light"] .highlight .p { color: #080808 }\n'
           'html[data-theme="light"] .highlight .k { color: #8045E5 }\n'
           'html[data-theme="dark"] .highlight { background: #222; color: #F8F8F2 }\n'
           'html[data-theme="dark"] .highlight .n { color: #F8F8F2 }\n'
           'html[data-theme="dark"] .highlight .p { color: #F8F8F2 }\n')
    assert page_speed.plain_tokens([css]) == ["n", "p"]  # w: no rule names it, so nothing says it is plain
    assert page_speed.plain_tokens([css.replace(".p { color: #F8F8F2 }", ".p { color: #FF0000 }")]) == ["n"]
    assert page_speed.plain_tokens([css, ".highlight .n { font-weight: bold }"]) == ["p"]
    assert page_speed.plain_tokens([css, "pre span.p:hover { color: red }"]) == ["n"]
    assert page_speed.plain_tokens([css, ".sig-param.n { font-style: italic }"]) == ["n", "p"]  # not a code span
    block = '<div class="highlight"><pre><span class="k">def</span><span class="w"> </span><span class="n">f</span><span class="p">():</span></pre></div>'
    prose = '<p><span class="n">kept</span></p>'
    assert page_speed.unwrap_plain_tokens(block + prose, ["n", "p"]) == (
        '<div class="highlight"><pre><span class="k">def</span><span class="w"> </span>f():</pre></div>' + prose)


CHARACTER_COLOURS = """(pre) => {
  const colours = [];
  const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const colour = getComputedStyle(walk.currentNode.parentElement).color;
    for (const character of walk.currentNode.data) if (character.trim()) colours.push(character + ' ' + colour);
  }
  return colours;
}"""


BUILT_BLOCK = 'div[class^="highlight-"] div.highlight:not([data-fresh])'


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_character_of_the_code_has_the_colour_pygments_gives_it(browser, built_html, scheme):
    """The built chapter's code blocks, next to the same code highlighted again by Sphinx's highlighter with
    every span: each character is drawn in the same colour."""
    from sphinx.highlighting import PygmentsBridge

    bridge = PygmentsBridge("html", "sphinx")
    with serve(built_html) as base, reader(browser, base, "book/04-three-stages.html", "phone", scheme) as page:
        blocks = page.evaluate("""(built) => [...document.querySelectorAll(built + ' > pre')]
            .map((pre) => [pre.closest('div[class^="highlight-"]').className.split(' ')[0].slice(10), pre.textContent])""", BUILT_BLOCK)
        assert len(blocks) >= 20
        assert page.locator("div.highlight pre span.n").count() == 0
        differ, spans = [], 0
        for index, (language, code) in enumerate(blocks):
            fresh = bridge.highlight_block(code, language)
            spans += fresh.count('<span class="n">')  # the spans the build drops, written again here
            page.evaluate("""([built, index, fresh]) => {  // the fresh copy right after its built block
              const block = document.querySelectorAll(built)[index];
              block.insertAdjacentHTML('afterend', fresh.replace('class="highlight"', 'class="highlight" data-fresh'));
            }""", [BUILT_BLOCK, index, fresh])
            built = page.evaluate(CHARACTER_COLOURS, page.locator(f"{BUILT_BLOCK} > pre").nth(index).element_handle())
            again = page.evaluate(CHARACTER_COLOURS, page.locator("div.highlight[data-fresh] > pre").nth(index).element_handle())
            if built != again:
                differ.append((index, len(built), len(again), next((pair for pair in zip(built, again) if pair[0] != pair[1]), None)))
    assert spans > 500
    assert differ == []
