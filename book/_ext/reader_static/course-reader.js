// The book's reader helpers (book/_ext/reader_ux.py says why each exists): sidebars that open on
// every screen, formulas that scroll in their own box, figures that can be enlarged.
(function () {
  "use strict";

  const WIDE = window.matchMedia("(min-width: 992px)");
  // Labels in the edition's language: book/_ext/editions.py puts their translations on every page
  // (window.courseMessages, from the package's "book" catalog); English is the message itself.
  const t = (message) => (window.courseMessages || {})[message] || message;

  // ---- Sidebars -------------------------------------------------------------------------------
  // The themes bind their toggles to the first .primary-toggle / .secondary-toggle of the page, a
  // hidden navbar button (pydata-sphinx-theme#2451). We take every click on any toggle first.
  const SIDEBARS = {
    primary: { sidebar: "pst-primary-sidebar", dialog: "pst-primary-sidebar-modal", label: t("Site navigation") },
    secondary: { sidebar: "pst-secondary-sidebar", dialog: "pst-secondary-sidebar-modal", label: t("On this page") },
  };

  function moveChildren(from, to) {
    for (const child of [...from.childNodes]) to.appendChild(child);
    for (const name of [...from.classList]) {
      from.classList.remove(name);
      to.classList.add(name);
    }
  }

  function openAsDialog(which, button) {
    const { sidebar: sidebarId, dialog: dialogId, label } = SIDEBARS[which];
    const sidebar = document.getElementById(sidebarId);
    const dialog = document.getElementById(dialogId);
    if (!sidebar || !dialog || dialog.open) return;
    moveChildren(sidebar, dialog);
    dialog.setAttribute("aria-label", label);
    const close = document.createElement("button");
    close.type = "button";
    close.className = "course-dialog-close";
    close.textContent = t("Close");
    close.addEventListener("click", () => dialog.close());
    dialog.prepend(close);
    dialog.addEventListener(
      "close",
      () => {
        close.remove();
        if (dialog.childNodes.length) moveChildren(dialog, sidebar);
        button.setAttribute("aria-expanded", "false");
        button.focus({ preventScroll: true });
      },
      { once: true },
    );
    dialog.showModal();
    button.setAttribute("aria-expanded", "true");
    const current = dialog.querySelector("a.current, .toc-entry a.active, a");
    (current || close).focus();
  }

  function onToggle(event) {
    const button = event.target.closest(".primary-toggle, .secondary-toggle");
    if (!button) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    const which = button.classList.contains("primary-toggle") ? "primary" : "secondary";
    if (which === "primary" && WIDE.matches) {
      const sidebar = document.getElementById(SIDEBARS.primary.sidebar);
      const hidden = sidebar.classList.toggle("pst-sidebar-hidden");
      button.setAttribute("aria-expanded", String(!hidden));
      return;
    }
    openAsDialog(which, button);
  }

  function setUpSidebars() {
    for (const which of Object.keys(SIDEBARS)) {
      const dialog = document.getElementById(SIDEBARS[which].dialog);
      if (!dialog) continue;
      dialog.addEventListener("click", (event) => {
        // Following a link (another page, or a section of this one) closes the dialog on the way.
        if (event.target.closest("a[href]")) {
          dialog.close();
          return;
        }
        // A tap on the backdrop (outside the dialog's box) closes it.
        if (event.target !== dialog) return;
        const box = dialog.getBoundingClientRect();
        const inside = event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
        if (!inside) dialog.close();
      });
    }
    for (const button of document.querySelectorAll(".primary-toggle, .secondary-toggle")) {
      const which = button.classList.contains("primary-toggle") ? "primary" : "secondary";
      button.setAttribute("aria-controls", SIDEBARS[which].sidebar);
      button.setAttribute("aria-expanded", which === "primary" && WIDE.matches ? "true" : "false");
      if (!button.getAttribute("aria-label")) button.setAttribute("aria-label", SIDEBARS[which].label);
    }
  }
  // Capture phase on the document: runs before the themes' own handlers on the buttons.
  document.addEventListener("click", onToggle, true);

  // ---- Wide formulas ----------------------------------------------------------------------------
  // The formulas are SVG drawn at build time (book/_ext/book_math.py): none is a keyboard stop. One
  // wider than the column scrolls in its own box, which then is one (focusable, named), so that its
  // hidden part can be reached from the keyboard. An inline formula cannot break across lines: one
  // wider than its paragraph is put on a line of its own, as a box that scrolls.
  function makeScrollBox(box, wide) {
    box.classList.toggle("course-scrolls", wide);
    if (wide) {
      box.tabIndex = 0;
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", t("Equation (scrolls sideways)"));
    } else if (box.classList.contains("course-was-wide")) {
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
    box.classList.toggle("course-was-wide", wide);
  }
  function blockOf(element) {
    let block = element.parentElement;
    while (block && getComputedStyle(block).display.startsWith("inline")) block = block.parentElement;
    return block;
  }
  // Whether a formula is wider than its room: true or false, or null where it is not shown (a closed
  // part of the page). Reads the layout, changes nothing.
  function isWide(formula) {
    if (formula.tagName === "MJX-CONTAINER") {  // a display formula: its box
      return formula.getClientRects().length ? formula.scrollWidth > formula.clientWidth + 1 : null;
    }
    const drawing = formula.querySelector("svg");
    const width = drawing ? drawing.getBoundingClientRect().width : 0;
    const block = width > 0 && blockOf(formula);
    if (!block) return null;
    const style = getComputedStyle(block);
    const room = block.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return width > room + 1;
  }
  // All the reads first, then all the writes: the page is laid out once, not once per formula.
  function mark(formulas) {
    const wide = formulas.map(isWide);
    formulas.forEach((formula, i) => {
      if (wide[i] === null) return;
      if (formula.tagName !== "MJX-CONTAINER") formula.classList.toggle("course-wide-inline", wide[i]);
      makeScrollBox(formula, wide[i]);
    });
  }

  // Measuring needs the page laid out, and a long chapter has a hundred formulas or more. So the page
  // is never held up for it: the formulas near the screen are measured as they come near it (an
  // IntersectionObserver), and all of them, a few at a time, whenever the browser is idle, so that a
  // keyboard reader finds every wide formula's box however far down. When the last is measured, <html>
  // carries data-course-formulas="measured" (the tests wait for it); anything that changes the room a
  // formula has (the fonts arriving, a resize, a part of the page opened) measures them all again.
  const formulas = [];
  let unmeasured = new Set();
  let sweeping = false;
  const whenIdle = window.requestIdleCallback
    ? (work) => window.requestIdleCallback(work, { timeout: 2000 })
    : (work) => setTimeout(() => work({ timeRemaining: () => 8, didTimeout: false }), 50);
  const near = "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => {
        const shown = entries.filter((entry) => entry.isIntersecting && unmeasured.has(entry.target)).map((entry) => entry.target);
        for (const formula of shown) unmeasured.delete(formula);
        mark(shown);
      }, { rootMargin: "100% 0px" })
    : null;
  function sweep(deadline) {
    const batch = [];
    for (const formula of unmeasured) {
      batch.push(formula);
      if (batch.length >= 8) break;
    }
    for (const formula of batch) unmeasured.delete(formula);
    mark(batch);
    if (!unmeasured.size) {
      sweeping = false;
      document.documentElement.dataset.courseFormulas = "measured";
    } else if (deadline.timeRemaining() > 4) sweep(deadline);
    else whenIdle(sweep);
  }
  function measureAll() {
    unmeasured = new Set(formulas);
    document.documentElement.dataset.courseFormulas = unmeasured.size ? "measuring" : "measured";
    if (near) {
      for (const formula of formulas) {
        near.unobserve(formula);
        near.observe(formula);  // reports each formula once more: those near the screen go first
      }
    }
    if (unmeasured.size && !sweeping) {
      sweeping = true;
      whenIdle(sweep);
    }
  }
  function watchFormulas() {
    formulas.push(...document.querySelectorAll("main span.math, main div.math > mjx-container[display='true']"));
    measureAll();
  }

  // ---- What screen readers read of a formula ----------------------------------------------------
  // Each formula's MathML comes inside a <noscript class="course-mml"> (book/_ext/book_math.py): with
  // scripts on, the parser keeps it as text, so the browser neither styles nor lays it out while the page
  // loads. It is put in place here: the formulas near the screen as they come near it, and the others
  // whenever the browser is idle, ten at a time, so that no task lays out many at once. When the last is
  // in, <html> carries data-course-mathml="placed". Without scripts, the <noscript> shows the MathML.
  const heldMathML = new Map();  // formula (mjx-container) -> its <noscript>
  function placeMathML(formula) {
    const holder = heldMathML.get(formula);
    if (!holder) return;
    heldMathML.delete(formula);
    if (nearMathML) nearMathML.unobserve(formula);
    const parsed = document.createElement("template");
    parsed.innerHTML = holder.textContent;
    holder.replaceWith(parsed.content);
    if (!heldMathML.size) document.documentElement.dataset.courseMathml = "placed";
  }
  const nearMathML = "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => {
        for (const entry of entries) if (entry.isIntersecting) placeMathML(entry.target);
      }, { rootMargin: "100% 0px" })
    : null;
  function placeSomeMathML() {
    for (const formula of [...heldMathML.keys()].slice(0, 10)) placeMathML(formula);
    if (heldMathML.size) whenIdle(placeSomeMathML);
  }
  function placeAllMathML() {
    for (const holder of document.querySelectorAll("noscript.course-mml")) {
      heldMathML.set(holder.parentElement, holder);
      if (nearMathML) nearMathML.observe(holder.parentElement);
    }
    document.documentElement.dataset.courseMathml = heldMathML.size ? "placing" : "placed";
    if (heldMathML.size) whenIdle(placeSomeMathML);
  }

  // ---- Figures to enlarge ----------------------------------------------------------------------
  let viewer = null;
  function figureViewer() {
    if (viewer) return viewer;
    viewer = document.createElement("dialog");
    viewer.className = "course-figure-viewer";
    viewer.setAttribute("aria-label", t("Figure, full size"));
    const close = document.createElement("button");
    close.type = "button";
    close.className = "course-dialog-close";
    close.textContent = t("Close");
    close.addEventListener("click", () => viewer.close());
    const frame = document.createElement("div");
    frame.className = "course-figure-frame";
    frame.tabIndex = 0;
    frame.setAttribute("role", "region");
    frame.setAttribute("aria-label", t("Figure (scroll to see all of it)"));
    const caption = document.createElement("p");
    caption.className = "course-figure-caption";
    viewer.append(close, frame, caption);
    viewer.addEventListener("click", (event) => {
      if (event.target === viewer) viewer.close();
    });
    document.body.appendChild(viewer);
    return viewer;
  }

  function enlarge(link, image) {
    const dialog = figureViewer();
    const frame = dialog.querySelector(".course-figure-frame");
    const big = document.createElement("img");
    big.src = image.currentSrc || image.src;
    big.alt = image.alt;
    // Full resolution: one image pixel per CSS pixel, however narrow the screen.
    big.style.width = `${image.naturalWidth}px`;
    big.style.maxWidth = "none";
    frame.replaceChildren(big);
    const figure = image.closest("figure");
    const caption = figure && figure.querySelector("figcaption");
    let text = "";
    if (caption) {
      const copy = caption.cloneNode(true);
      for (const anchor of copy.querySelectorAll(".headerlink")) anchor.remove();
      text = copy.textContent.trim();
    }
    dialog.querySelector(".course-figure-caption").textContent = text;
    dialog.addEventListener("close", () => link.focus(), { once: true });
    dialog.showModal();
    dialog.querySelector(".course-dialog-close").focus();
  }

  function makeFiguresEnlargeable() {
    for (const image of document.querySelectorAll("main figure img, main .cell_output img")) {
      if (image.closest("a, .course-widget")) continue;
      const link = document.createElement("a");
      link.className = "course-enlarge";
      link.href = image.getAttribute("src");
      const hint = document.createElement("span");
      hint.className = "course-enlarge-hint";
      hint.textContent = t("Enlarge");
      image.replaceWith(link);
      link.append(image, hint);
      link.addEventListener("click", (event) => {
        if (event.ctrlKey || event.metaKey || event.shiftKey || !image.naturalWidth) return;
        event.preventDefault();
        enlarge(link, image);
      });
    }
  }

  function start() {
    setUpSidebars();
    makeFiguresEnlargeable();
    watchFormulas();
    placeAllMathML();
    // Once a font arrives, paragraphs may be wider or narrower. (An event: reading document.fonts.ready
    // would lay the page out at once, before its first paint.)
    if (document.fonts) document.fonts.addEventListener("loadingdone", measureAll);
    window.addEventListener("load", measureAll, { once: true });
    // A part of the page that opens ("Click to show", <details>) shows formulas that had no width.
    document.addEventListener("click", measureAll);
    document.addEventListener("toggle", measureAll, true);
    let pending = null;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(measureAll, 200);
    });
    WIDE.addEventListener("change", () => {
      // Leaving a narrow screen with a sidebar open as a dialog puts it back.
      for (const which of Object.keys(SIDEBARS)) {
        const dialog = document.getElementById(SIDEBARS[which].dialog);
        if (dialog && dialog.open && WIDE.matches) dialog.close();
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();

  // ---- Editions ---------------------------------------------------------------------------------
  // "English | 中文" leads to this page in the other language, at the section the reader is reading:
  // both editions give a section the same id (book/_ext/editions.py).
  function sectionInView() {
    // The last section that starts above the upper third of the screen (below the sticky headers).
    const line = Math.max(120, window.innerHeight / 3);
    const sections = [...document.querySelectorAll("article.bd-article section[id]")];
    let found = null;
    for (const section of sections) {
      if (section.getBoundingClientRect().top > line) break;
      found = section;
    }
    return found && found !== sections[0] ? found.id : "";
  }
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a.course-edition[href]");
    if (!link) return;
    const id = sectionInView() || window.location.hash.slice(1);
    if (id) link.hash = id;
  });

  // ---- Search buttons ---------------------------------------------------------------------------
  // The theme's search field is a button that shows "Search Ctrl + K" (⌘ K on a Mac) but is named
  // "Search" alone; a reader who says what they see ("click Search Ctrl K") should reach it (WCAG
  // 2.5.3, label in name). Named after the theme's own script has written the shortcut.
  function nameSearchButtons() {
    for (const button of document.querySelectorAll("button.search-button-field")) {
      const shown = button.textContent.replace(/\s+/g, " ").trim();
      if (shown) button.setAttribute("aria-label", shown);
    }
  }
  if (document.readyState === "complete") nameSearchButtons();
  else window.addEventListener("load", nameSearchButtons, { once: true });
})();
