"""The two widgets work for a keyboard, a screen reader, a finger and a dark page, in the static book.

Headless Chromium opens a throwaway book's page built from tests/fixtures/a11y-widgets.md (chapter 4's
playground and an alignment explorer; conftest's ``widget_book``) on a phone (390×844, touch), a tablet (820×1180, touch) and a
desktop (1366×900), in the theme's light and dark modes, and checks what a user of each meets: Tab
reaches every control, with its role and name; arrow keys move a radio group's choice; focus never falls to the page when a button can
no longer act; sliders say their values in real units; a live region says each new result once a change
settles; a swipe over the plane scrolls the page, a drag from an arrow's head moves the arrow; Chinese
words are marked as Chinese; and every text, and every key colour, keeps its contrast with what it is on.
"""

from __future__ import annotations

import contextlib
import re

import pytest

from browser_audit import _inside, block_outside, serve

pytestmark = pytest.mark.browser
PAGE = "book/a11y.html"
DEVICES = {
    "phone": {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True, "device_scale_factor": 2},
    "tablet": {"viewport": {"width": 820, "height": 1180}, "has_touch": True, "is_mobile": True, "device_scale_factor": 2},
    "desktop": {"viewport": {"width": 1366, "height": 900}},
}
PLAYGROUND, EXPLORER = ".attention-playground", ".alignment-explorer"


@pytest.fixture(scope="module")
def base(widget_book):
    with serve(widget_book) as url:
        yield url


@contextlib.contextmanager
def widget_page(browser, base: str, device: str = "desktop", scheme: str = "light", clock: bool = False):
    """The fixture page on ``device`` in the theme's ``scheme`` mode, both widgets drawn; on leaving, no errors."""
    context = browser.new_context(**DEVICES[device], color_scheme=scheme)
    page = context.new_page()
    blocked, errors = block_outside(page, lambda url: _inside(url, base)), []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    if clock:
        page.clock.install()  # timers wait for run_for: the live region's pause is not a race with the machine
    page.goto(base + PAGE)
    try:
        for root in (PLAYGROUND, EXPLORER):
            page.locator(f"{root} .ap-weight, {root} .ae-weight").first.wait_for(timeout=15000)
        assert page.evaluate("document.documentElement.dataset.theme") == scheme  # the theme follows the system
        yield page
    finally:
        context.close()
    assert blocked == [] and errors == [], (blocked, errors)


def focused(page) -> str:
    """The focused element as a screen reader meets it: 'role "name" [states]' (Playwright's ARIA snapshot)."""
    if page.evaluate("document.activeElement === document.body || document.activeElement === null"):
        return "body"
    line = page.locator(":focus").aria_snapshot().splitlines()[0]
    match = re.match(r'- (\w+)(?: "(.*?)")?((?: \[[^\]]+\])*)', line)
    return f'{match[1]} "{match[2]}"{match[3]}'


def tab_through(page, root: str) -> list[str]:
    """Tab from the widget's first control until the focus leaves the widget; what each stop is."""
    page.locator(f"{root} select").first.focus()
    stops = []
    while page.evaluate("(root) => document.querySelector(root).contains(document.activeElement)", root):
        stops.append(focused(page))
        assert len(stops) < 30, stops
        page.keyboard.press("Tab")
    return stops


# Every control the user can reach: a radio group counts once, at its checked radio (a roving tab stop).
CONTROLS = """(root) => [...document.querySelector(root).querySelectorAll("button, input, select, [tabindex]")]
  .filter((e) => e.getClientRects().length && !(e.getAttribute("role") === "radio" && e.getAttribute("aria-checked") !== "true"))
  .length"""


@pytest.mark.parametrize("device", DEVICES)
def test_tab_visits_every_control_once_with_its_role_and_name(browser, base, device):
    with widget_page(browser, base, device) as page:
        stops = tab_through(page, PLAYGROUND)
        assert stops == [
            'combobox "score function"', 'slider "temperature (log scale)"', 'radio "query q" [checked]',
            'button "add a key"', 'button "remove the selected key" [disabled]',
            'slider "angle in degrees"', 'slider "length"',
        ]
        assert len(stops) == page.evaluate(CONTROLS, PLAYGROUND)
        page.locator(f'{PLAYGROUND} .ap-chip[data-vector="1"]').click()  # a key: its value box joins the order
        assert tab_through(page, PLAYGROUND)[2:] == [
            'radio "key k2" [checked]', 'button "add a key"', 'button "remove the selected key"',
            'slider "angle in degrees"', 'slider "length"', 'spinbutton "value of the selected key"',
        ]
        assert page.get_by_role("img", name=re.compile("query and the keys .* angle and length sliders")).count() == 1

        stops = tab_through(page, EXPLORER)
        assert stops == ['combobox "sentence"', 'button "previous output step" [disabled]', 'radio "1 汤姆" [checked]',
                         'button "next output step"']
        assert len(stops) == page.evaluate(CONTROLS, EXPLORER)
        assert page.get_by_role("radiogroup", name="output step i").get_by_role("radio").count() == 3
        assert page.get_by_role("radiogroup", name="vector to move").get_by_role("radio").count() == 4


def test_arrow_keys_move_the_radio_choice_its_focus_and_the_numbers(browser, base):
    with widget_page(browser, base) as page:
        playground = page.locator(PLAYGROUND)
        playground.locator('.ap-chip[data-vector="q"]').focus()
        for key, radio, title in (("ArrowRight", "key k1", "Key k₁"), ("End", "key k3", "Key k₃"), ("ArrowDown", "query q", "Query q"),
                                  ("ArrowLeft", "key k3", "Key k₃"), ("ArrowUp", "key k2", "Key k₂"), ("Home", "query q", "Query q")):
            page.keyboard.press(key)
            assert focused(page) == f'radio "{radio}" [checked]', key
            assert playground.locator(".ap-selected-title").inner_text() == title
        page.keyboard.press("ArrowRight")  # k1, at 0°: turn it with its slider, and the weights follow
        before = playground.locator(".ap-weight").all_inner_texts()
        playground.locator(".ap-angle").focus()
        page.keyboard.press("PageUp")
        assert playground.locator(".ap-weight").all_inner_texts() != before

        explorer = page.locator(EXPLORER)
        explorer.locator('.ae-step[data-step="0"]').focus()
        for key, step, weights in (("ArrowRight", 1, ["0.2000", "0.7000", "0.1000"]), ("End", 2, ["0.3000", "0.2000", "0.5000"]),
                                   ("ArrowRight", 0, ["0.6000", "0.2000", "0.2000"]), ("ArrowLeft", 2, ["0.3000", "0.2000", "0.5000"])):
            page.keyboard.press(key)
            assert focused(page) == f'radio "{step + 1} {"汤姆 追逐 杰瑞".split()[step]}" [checked]', key
            assert explorer.locator(".ae-weight").all_inner_texts() == weights
            assert explorer.locator(".ae-row-label.ae-row-on").text_content() == "汤姆 追逐 杰瑞".split()[step]


@pytest.mark.parametrize("device", DEVICES)
def test_the_focus_stays_on_a_button_that_can_no_longer_act(browser, base, device):
    on_body = "document.activeElement === document.body"
    with widget_page(browser, base, device) as page:
        explorer = page.locator(EXPLORER)
        for button, steps in ((".ae-next", ["1", "2"]), (".ae-previous", ["1", "0"])):
            for step in steps:
                explorer.locator(button).click()
                assert explorer.evaluate("(root) => root.dataset.step") == step
            assert not page.evaluate(on_body)
            assert focused(page).endswith("output step\" [disabled]")
            explorer.locator(button).click(force=True)  # a click that cannot act changes nothing, and keeps the focus
            assert explorer.evaluate("(root) => root.dataset.step") == steps[-1] and not page.evaluate(on_body)

        playground = page.locator(PLAYGROUND)
        for count in (4, 5, 6, 6):
            playground.locator(".ap-add-key").click(force=True)  # the last one cannot act: Playwright would wait
            assert playground.locator(".ap-weight").count() == count
        assert focused(page) == 'button "add a key" [disabled]'
        for count in (5, 4, 3, 2, 1, 1):
            playground.locator(".ap-remove-key").click(force=True)
            assert playground.locator(".ap-weight").count() == count
            assert not page.evaluate(on_body)
        assert focused(page) == 'button "remove the selected key" [disabled]'


def test_the_sliders_say_their_values_in_real_units(browser, base):
    with widget_page(browser, base) as page:
        playground = page.locator(PLAYGROUND)
        temperature = playground.locator(".ap-temperature")
        assert (temperature.input_value(), temperature.get_attribute("aria-valuetext")) == ("0", "τ = 1.00")
        temperature.focus()
        for key, said in (("End", "τ = 100.0"), ("Home", "τ = 0.010"), ("PageUp", None)):
            page.keyboard.press(key)
            t = 10 ** float(temperature.input_value())  # the slider is on a log scale: its value is log10 τ
            assert temperature.get_attribute("aria-valuetext") == (said or (f"τ = {t:.3f}" if t < 0.1 else f"τ = {t:.2f}"))
        assert playground.locator(".ap-angle").get_attribute("aria-valuetext") == "63.4 degrees"
        assert playground.locator(".ap-length").get_attribute("aria-valuetext") == "2.24"
        playground.locator(".ap-length").fill("1.5")
        assert playground.locator(".ap-length").get_attribute("aria-valuetext") == "1.50"


def test_a_live_region_says_the_new_result_once_a_change_settles(browser, base):
    with widget_page(browser, base, clock=True) as page:
        playground, explorer = page.locator(PLAYGROUND), page.locator(EXPLORER)
        assert page.get_by_role("status").count() == 2  # one per widget
        live = playground.get_by_role("status")
        assert live.get_attribute("aria-live") == "polite" and live.inner_text() == ""  # silent until a change

        page.evaluate("""(root) => { window.said = [];
          new MutationObserver(() => said.push(document.querySelector(root + ' [role=status]').textContent))
            .observe(document.querySelector(root + ' [role=status]'), {childList: true, subtree: true, characterData: true}); }""",
                      PLAYGROUND)
        playground.locator(".ap-angle").focus()
        for _ in range(15):  # a drag-like run of moves says nothing until it pauses, then says the result once
            page.keyboard.press("ArrowRight")
        assert page.evaluate("said") == []
        page.clock.run_for(2000)
        weights = [f"k{i + 1} {float(w):.2f}" for i, w in enumerate(playground.locator(".ap-weight").all_inner_texts())]
        output = round(float(playground.locator(".ap-output").inner_text()), 2)
        assert page.evaluate("said") == [f"Weights: {', '.join(weights)}; output {output:g}."]

        explorer.locator('.ae-step[data-step="1"]').click()
        page.clock.run_for(2000)
        said = explorer.get_by_role("status")
        assert said.inner_text().startswith("Step 2, 追逐: weights Tom 0.20, Chase 0.70, Jerry 0.10; context (")
        assert said.locator('span[lang="zh"]').all_inner_texts() == ["追逐"]


def swipe(page, x: float, y: float, dx: float, dy: float) -> None:
    """A finger put down at (x, y), moved by (dx, dy) in small steps, and lifted (Chrome's own touch input)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    for step in range(1, 13):
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x + dx * step / 12, "y": y + dy * step / 12}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    page.wait_for_timeout(300)  # let the page's scroll land; no assertion depends on how long it took
    cdp.detach()


def test_a_swipe_over_the_plane_scrolls_and_a_drag_from_a_head_moves_the_arrow(browser, base):
    with widget_page(browser, base, "phone") as page:
        playground = page.locator(PLAYGROUND)
        query = "(root) => { const d = root.querySelector('.ap-arrow[data-vector=\"q\"]').dataset; return [d.angle, d.length]; }"
        plane = playground.locator(".ap-plane")
        plane.scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, 40)")
        box, before, scrolled = plane.bounding_box(), playground.evaluate(query), page.evaluate("scrollY")
        # The lower left of the plane, where no arrow is: a finger moving up scrolls the page down.
        swipe(page, box["x"] + box["width"] * 0.2, box["y"] + box["height"] * 0.8, 0, -150)
        assert page.evaluate("scrollY") > scrolled + 50
        assert playground.evaluate(query) == before

        head = playground.locator('.ap-arrow[data-vector="q"] .ap-hit')
        box, scrolled = head.bounding_box(), page.evaluate("scrollY")
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        swipe(page, x, y, -70, 40)
        assert playground.evaluate(query) != before
        assert page.evaluate("scrollY") == scrolled
        box = head.bounding_box()  # the head followed the finger to where it was lifted
        assert (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2) == pytest.approx((x - 70, y + 40), abs=2)


CHINESE_OUTSIDE_LANG = """(root) => {
  const walker = document.createTreeWalker(document.querySelector(root), NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const holder = node.parentElement;
    if (!/[\\u3400-\\u9fff]/.test(node.data) || holder.closest("option")) continue;
    if (!(holder.closest("[lang]")?.getAttribute("lang") || "").startsWith("zh")) found.push(node.data);
  }
  return found;
}"""


def test_chinese_words_are_marked_as_chinese(browser, base):
    with widget_page(browser, base) as page:
        explorer = page.locator(EXPLORER)
        explorer.locator(".ae-sentence").select_option("1")  # a corpus sentence: longer, other words
        explorer.locator('.ae-step[data-step="1"]').click()
        assert page.evaluate(CHINESE_OUTSIDE_LANG, EXPLORER) == []
        assert page.evaluate(CHINESE_OUTSIDE_LANG, PLAYGROUND) == []
        assert explorer.locator('.ae-step [lang="zh"], .ae-row-label [lang="zh"], .ae-target-word [lang="zh"]').count() >= 3


CONTRAST = """(root) => {
  const parse = (text) => {
    const p = (text.match(/rgba?\\(([^)]*)\\)/) || [, ""])[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return p.length < 3 ? null : { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const over = (top, under) => ({ r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
                                  b: top.b * top.a + under.b * (1 - top.a), a: 1 });
  const channel = (c) => (c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  const luminance = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  const ratio = (x, y) => { const [a, b] = [luminance(x), luminance(y)].sort((p, q) => q - p); return (a + 0.05) / (b + 0.05); };
  // What an element is drawn on: the backgrounds of it and its ancestors, up to the first opaque one, on a white canvas.
  const behind = (element) => {
    const layers = [];
    for (let n = element; n; n = n.parentElement) {
      const c = parse(getComputedStyle(n).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    return layers.reverse().reduce((under, layer) => over(layer, under), { r: 255, g: 255, b: 255, a: 1 });
  };
  const opacity = (element) => { let o = 1; for (let n = element; n; n = n.parentElement) o *= Number(getComputedStyle(n).opacity); return o; };
  const widget = document.querySelector(root);
  const texts = [], graphics = [];
  for (const element of [widget, ...widget.querySelectorAll("*")]) {
    const style = getComputedStyle(element);
    const ownText = [...element.childNodes].some((n) => n.nodeType === 3 && n.data.trim()) || element.matches("select, input[type=number]");
    if (!ownText || !element.getClientRects().length || element.closest("option, [aria-disabled=true], [role=status]")) continue;
    const alpha = opacity(element);
    if (alpha === 0 || style.visibility !== "visible") continue;
    const inSvg = element instanceof SVGElement;
    const fg = parse(inSvg ? style.fill : style.color);
    let bg = behind(element);
    const cell = element.previousElementSibling; // a heatmap number is drawn over its cell
    if (inSvg && cell && cell.tagName === "rect") {
      bg = over({ ...parse(getComputedStyle(cell).fill), a: Number(getComputedStyle(cell).fillOpacity) }, bg);
    }
    if (inSvg && style.paintOrder.startsWith("stroke") && parseFloat(style.strokeWidth) >= 2 && parse(style.stroke)) {
      bg = over(parse(style.stroke), bg); // a halo: the text is read against it
    }
    texts.push({ text: element.textContent.trim().slice(0, 30), ratio: ratio(over({ ...fg, a: fg.a * alpha }, bg), bg) });
  }
  // Key colours and the bars and arrows drawn in them, against what they are drawn on.
  const shape = (selector, property) => widget.querySelectorAll(selector).forEach((e) => {
    graphics.push({ shape: selector + " " + (e.dataset.vector || e.dataset.key || ""), ratio: ratio(parse(getComputedStyle(e)[property]), behind(e.parentElement)) });
  });
  shape(".ap-arrow", "color"); shape(".ap-bar", "backgroundColor"); shape(".ap-nl-tick", "stroke");
  shape(".ae-bar", "backgroundColor"); shape(".ae-context-arrow", "stroke"); shape(".ae-row-highlight", "stroke");
  return { texts, graphics, frame: [behind(widget), behind(document.body)] };
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("device", DEVICES)
def test_every_text_and_key_colour_keeps_its_contrast(browser, base, device, scheme):
    with widget_page(browser, base, device, scheme) as page:
        page.locator(f'{PLAYGROUND} .ap-chip[data-vector="1"]').click()  # a key's chip lit, its table row shaded
        for _ in range(3):
            page.locator(f"{PLAYGROUND} .ap-add-key").click()  # all six key colours
        page.locator(f"{EXPLORER} .ae-step[data-step='1']").click()
        for root in (PLAYGROUND, EXPLORER):
            found = page.evaluate(CONTRAST, root)
            assert len(found["texts"]) > 20 and len(found["graphics"]) >= 3
            assert [t for t in found["texts"] if t["ratio"] < 4.5] == [], (root, scheme)
            assert [g for g in found["graphics"] if g["ratio"] < 3] == [], (root, scheme)
            widget_bg, page_bg = found["frame"]
            assert widget_bg == page_bg, "the widget should sit on the page's own background, with no frame of its own colour"


def test_every_control_is_a_finger_sized_target_on_a_phone(browser, base):
    """WCAG 2.5.8 (target size, minimum), as Lighthouse checks it: each control is at least 24×24 CSS px,
    or the 24 px circle around its centre touches no other control and no other small control's circle."""
    with widget_page(browser, base, "phone") as page:
        small = page.evaluate(
            """(roots) => {
                 const controls = roots.flatMap(r => [...document.querySelectorAll(
                   `${r} button, ${r} input, ${r} select, ${r} [role="radio"], ${r} [tabindex="0"]`)])
                   .filter(el => el.getClientRects().length > 0);
                 const boxes = controls.map(el => el.getBoundingClientRect());
                 const gap = (a, b) => Math.hypot(
                   Math.max(0, b.left - (a.left + a.width / 2), (a.left + a.width / 2) - b.right),
                   Math.max(0, b.top - (a.top + a.height / 2), (a.top + a.height / 2) - b.bottom));
                 const undersized = (b) => b.width < 24 || b.height < 24;
                 const centres = (a, b) => Math.hypot(
                   a.left + a.width / 2 - b.left - b.width / 2, a.top + a.height / 2 - b.top - b.height / 2);
                 return controls.flatMap((el, i) => {
                   const box = boxes[i];
                   if (!undersized(box)) return [];
                   // Its 24 px circle may touch no other control, nor another small control's circle.
                   const crowded = boxes.some((other, j) => j !== i &&
                     (gap(box, other) < 12 || (undersized(other) && centres(box, other) < 24)));
                   return crowded ? [`${el.className || el.tagName} ${Math.round(box.width)}×${Math.round(box.height)}`] : [];
                 });
               }""",
            [PLAYGROUND, EXPLORER],
        )
    assert small == [], small


@pytest.mark.parametrize("device", sorted(DEVICES))
def test_the_widgets_text_stays_legible_on_a_phone(browser, base, device):
    """Text drawn in the widgets' pictures is at least 9 px on the screen (the book's floor for figure labels),
    though a picture shrinks to a phone's width."""
    with widget_page(browser, base, device) as page:
        # A redraw at the width the layout settled on: the fonts are in, and the frames that follow have
        # run the widget's ResizeObserver (which redraws at once).
        page.evaluate("() => document.fonts.ready.then(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))))")
        sizes = page.evaluate(
            """(roots) => roots.flatMap(r => [...document.querySelectorAll(`${r} svg text`)])
                 .filter(t => t.getClientRects().length > 0 && t.textContent.trim())
                 .map(t => [t.textContent, t.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize)])""",
            [PLAYGROUND, EXPLORER],
        )
    assert len(sizes) >= 6, sizes
    small = [(text, round(size, 1)) for text, size in sizes if size < 9]
    assert small == [], small
