"""The built book on a phone (390×844), a tablet (820×1180) and a desktop (1366×900), light and dark.

Headless Chromium opens the built pages, served under a sub-path with every outside request blocked, at
each size and colour scheme, and does what a reader does: opens the chapter list and "On this page"
and follows a link from them, closes them with Escape, their Close button or a tap outside; scrolls a
wide equation; enlarges a figure; goes through chapter 4 with the Tab key (no formula is a stop unless it
scrolls, every stop shows a focus ring); and checks that every page has a favicon. No console error, failed
request or outside request is allowed on any page opened here. That no page scrolls sideways on any of
these screens, and that Chinese text is marked as Chinese for screen readers, are checked in
tests/test_every_page.py, on the same loads as the pages' other checks.
"""

from __future__ import annotations

import re

import pytest

from browser_audit import DEVICES, NARROW, SCHEMES, pages_of, reader, serve, tab_through, wait_for_math

pytestmark = pytest.mark.browser

CHAPTER_4 = "book/04-three-stages.html"


@pytest.fixture(scope="module")
def base(built_html):
    with serve(built_html) as base:
        yield base


def visible_toggle(page, kind: str):
    """The ``kind`` ('primary' or 'secondary') sidebar button the reader can see (the themes render two)."""
    buttons = [b for b in page.locator(f".{kind}-toggle").all() if b.is_visible()]
    assert len(buttons) == 1, f"{len(buttons)} visible {kind} toggles"
    return buttons[0]


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    viewport = page.viewport_size
    return box is not None and box["width"] > 0 and box["x"] >= -1 and box["x"] + box["width"] <= viewport["width"] + 1


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("device", sorted(NARROW))
def test_on_a_phone_or_tablet_the_chapter_list_opens_closes_and_leads_to_a_chapter(browser, base, device, scheme):
    with reader(browser, base, CHAPTER_4, device, scheme) as page:
        toggle = visible_toggle(page, "primary")
        assert toggle.get_attribute("aria-label") == "Site navigation"
        dialog = page.locator("#pst-primary-sidebar-modal")
        chapter_5 = dialog.locator("a[href$='05-encoder-decoder.html']")

        # Escape closes it, and focus returns to the button.
        toggle.click()
        assert dialog.evaluate("d => d.open")
        assert toggle.get_attribute("aria-expanded") == "true"
        assert chapter_5.is_visible() and in_view(page, chapter_5)
        page.keyboard.press("Escape")
        page.wait_for_function("!document.querySelector('#pst-primary-sidebar-modal').open")
        assert toggle.evaluate("b => b === document.activeElement")
        assert toggle.get_attribute("aria-expanded") == "false"
        assert dialog.locator("a").count() == 0  # the list went back to the (hidden) sidebar

        # So does its Close button, and a tap outside it.
        toggle.click()
        dialog.get_by_role("button", name="Close").click()
        page.wait_for_function("!document.querySelector('#pst-primary-sidebar-modal').open")
        toggle.click()
        width, height = DEVICES[device]
        page.mouse.click(width - 5, height // 2)
        page.wait_for_function("!document.querySelector('#pst-primary-sidebar-modal').open")

        # Following a chapter from it.
        toggle.click()
        chapter_5.click()
        page.wait_for_url(re.compile(r"05-encoder-decoder\.html$"))


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("device", sorted(NARROW))
def test_on_a_phone_or_tablet_on_this_page_opens_and_goes_to_a_section(browser, base, device, scheme):
    with reader(browser, base, CHAPTER_4, device, scheme) as page:
        toggle = visible_toggle(page, "secondary")
        toggle.click()
        dialog = page.locator("#pst-secondary-sidebar-modal")
        assert dialog.evaluate("d => d.open")
        entries = dialog.locator("a.nav-link[href^='#']")
        assert entries.count() >= 4
        last = entries.nth(entries.count() - 1)
        target = last.get_attribute("href")
        assert in_view(page, last) or last.scroll_into_view_if_needed() is None
        last.click()
        page.wait_for_function("!document.querySelector('#pst-secondary-sidebar-modal').open")
        page.wait_for_function(f"location.hash === {target!r}")
        section = page.locator(f"[id='{target[1:]}']")
        page.wait_for_function(
            "el => { const r = el.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; }",
            arg=section.element_handle(),
        )


@pytest.mark.parametrize("scheme", SCHEMES)
def test_on_a_desktop_the_menu_button_hides_and_shows_the_chapter_list(browser, base, scheme):
    with reader(browser, base, CHAPTER_4, "desktop", scheme) as page:
        sidebar = page.locator("#pst-primary-sidebar")
        chapter_5 = sidebar.locator("a[href$='05-encoder-decoder.html']")
        assert chapter_5.is_visible()
        # "On this page" is a column of its own on a desktop, with no button.
        assert page.locator("#pst-secondary-sidebar a.nav-link").first.is_visible()
        assert [b for b in page.locator(".secondary-toggle").all() if b.is_visible()] == []

        toggle = visible_toggle(page, "primary")
        assert toggle.get_attribute("aria-expanded") == "true"
        toggle.click()
        page.wait_for_function("el => getComputedStyle(el).visibility === 'hidden'", arg=sidebar.element_handle())
        assert toggle.get_attribute("aria-expanded") == "false"
        assert not page.locator("#pst-primary-sidebar-modal").evaluate("d => d.open")
        toggle.click()
        page.wait_for_function("el => getComputedStyle(el).visibility === 'visible'", arg=sidebar.element_handle())
        assert chapter_5.is_visible()
        assert toggle.get_attribute("aria-expanded") == "true"


def test_a_wide_equation_scrolls_in_its_own_box_on_a_phone(browser, base):
    with reader(browser, base, CHAPTER_4, "phone") as page:
        wait_for_math(page)
        boxes = page.locator("main .course-scrolls")
        on_phone = boxes.count()
        assert on_phone >= 1
        for i in range(on_phone):
            box = boxes.nth(i)
            assert box.get_attribute("tabindex") == "0" and box.get_attribute("role") == "region"
            assert box.get_attribute("aria-label") == "Equation (scrolls sideways)"
            assert in_view(page, box)
            # The part beyond the edge can be reached from the keyboard.
            box.focus()
            for _ in range(60):
                page.keyboard.press("ArrowRight")
                if box.evaluate("el => el.scrollLeft + el.clientWidth >= el.scrollWidth - 2"):
                    break
            assert box.evaluate("el => el.scrollLeft > 0 && el.scrollLeft + el.clientWidth >= el.scrollWidth - 2")
    # On a desktop the same page has fewer boxes that need to scroll.
    with reader(browser, base, CHAPTER_4, "desktop") as page:
        wait_for_math(page)
        desktop = page.locator("main .course-scrolls").count()
    assert desktop < on_phone


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_figure_enlarges_to_its_full_resolution_on_a_phone(browser, base, scheme):
    # The course draws figures at 100 dpi with text of 8 pt or more, 11 px or more at full resolution;
    # squeezed into a phone's width the same text is 3-6 px. The enlarged figure is at full resolution.
    with reader(browser, base, "book/02-soft-hard.html", "phone", scheme) as page:
        link = page.locator("main figure a.course-enlarge").first
        image = link.locator("img")
        # The reader scrolls to the figure: images load as they come near (loading="lazy"), and decode()
        # waits for the load.
        link.scroll_into_view_if_needed()
        image.evaluate("img => img.decode()")
        natural = image.evaluate("img => img.naturalWidth")
        shown = image.bounding_box()["width"]
        assert shown < natural  # on a phone the figure is shrunk ...
        alt = image.get_attribute("alt")
        assert alt and not alt.endswith(".png")
        assert link.get_attribute("href").endswith(".png")  # ... and without script it is still a link to itself
        link.click()
        viewer = page.locator("dialog.course-figure-viewer")
        assert viewer.evaluate("d => d.open")
        big = viewer.locator("img")
        big.evaluate("img => img.decode()")
        assert big.get_attribute("alt") == alt
        assert big.bounding_box()["width"] >= natural - 0.5  # one image pixel per CSS pixel
        frame = viewer.locator(".course-figure-frame")
        assert frame.evaluate("f => f.scrollWidth > f.clientWidth")  # wider than the phone: it scrolls
        caption = page.locator("main figure").first.locator("figcaption").inner_text().strip()
        assert viewer.locator(".course-figure-caption").inner_text().strip() == caption
        page.keyboard.press("Escape")
        page.wait_for_function("!document.querySelector('dialog.course-figure-viewer').open")
        assert link.evaluate("a => a === document.activeElement")


def test_every_page_has_a_favicon(browser, base, built_html):
    for path in pages_of(built_html):
        html = built_html.joinpath(path).read_text(encoding="utf-8")
        if path == "index.html":
            continue
        assert re.search(r'<link rel="icon" href="[^"]*favicon\.svg"', html), path
    with reader(browser, base, CHAPTER_4, "desktop") as page:
        href = page.locator("link[rel='icon']").evaluate("l => l.href")
        response = page.request.get(href)
        assert response.status == 200 and b"<svg" in response.body()


@pytest.mark.parametrize("device", sorted(DEVICES))
def test_every_button_is_named_with_the_words_it_shows(browser, base, device):
    """WCAG 2.5.3 (label in name): a reader who says what a button shows reaches it."""
    with reader(browser, base, CHAPTER_4, device) as page:
        page.wait_for_load_state("load")
        mismatched = page.evaluate(
            """() => {
                 const words = (text) => text.normalize("NFKC").toLowerCase().replace(/[^\\p{L}\\p{N}]+/gu, " ").trim();
                 return [...document.querySelectorAll("button, [role=button]")]
                   .filter(b => b.getClientRects().length > 0 && b.hasAttribute("aria-label"))
                   .map(b => [words(b.innerText || ""), words(b.getAttribute("aria-label"))])
                   .filter(([shown, name]) => shown && !name.includes(shown));
               }"""
        )
    assert mismatched == [], mismatched


# ---- The keyboard: formulas are no stops, every stop shows where it is -----------------------------------

@pytest.mark.parametrize("device", ["phone", "desktop"])
def test_by_keyboard_formulas_are_no_stops_and_every_control_shows_its_focus(browser, base, device):
    with reader(browser, base, CHAPTER_4, device) as page:
        page.wait_for_function("document.querySelector('.course-widget input, .course-widget button') !== null")
        wait_for_math(page)
        stops = tab_through(page)
        # The formula boxes that scroll sideways (named keyboard stops) above the playground.
        scrolling_above = page.evaluate(
            """() => { const widget = document.querySelector('.course-widget');
                 return [...document.querySelectorAll('main .course-scrolls')]
                   .filter((box) => box.compareDocumentPosition(widget) & Node.DOCUMENT_POSITION_FOLLOWING).length; }""")
    kinds = {stop["kind"] for stop in stops}
    # The controls a reader reaches by keyboard on this page, each of them a stop.
    expected = {"menu", "download", "toggle", "theme", "widget"}
    assert expected <= kinds, (expected - kinds, len(stops))
    # No formula is a stop, except one whose box scrolls sideways (it is named, and scrolls from the keys).
    formulas = [stop["what"] for stop in stops if stop["kind"] == "formula" and not stop["scrolls"]]
    assert formulas == []
    # Every stop shows where the keyboard is.
    ringless = [(stop["kind"], stop["what"]) for stop in stops if not stop["ring"]]
    assert ringless == []
    # On the way to the playground the only formulas are those boxes (with MathJax's runtime it was Tab 206
    # on a phone, 110 formulas before it being stops; bench/math_and_keyboard.py counts them).
    to_widget = next(i for i, stop in enumerate(stops) if stop["kind"] == "widget")
    assert sum(stop["kind"] == "formula" for stop in stops[:to_widget]) == scrolling_above
