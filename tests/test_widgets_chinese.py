"""In the Chinese edition the widgets are wholly Chinese: every label, status line, step sentence and
screen-reader announcement, in every state a reader can bring them to.

A widget sends its front end the translations of the messages the front end shows (``messages``, from
the "widgets" catalog, ``front_end.messages``); the front end formats a message only after translating
it. Two checks:

- every ``t("...")`` and ``N_("...")`` message of each front end, found here by a plain reading of the
  module (not by the code under test), reaches the widget's ``messages`` with its catalog translation;
  a message with values, ``t("Step {step}, {word}: ...", {...})``, used to be dropped on the way;
- headless Chromium renders both widgets' real front ends in a ``lang="zh-CN"`` page, as the book's
  Chinese edition does, with a stand-in for anywidget's model, and drives them through their states
  (hard, uniform and spread weights, every score function, keys added, removed and chosen, every output
  step of a sentence with encoder states and one without), recording every text, accessible name,
  value text and live-region announcement. No English word may be left but the data's own (the source
  sentence's words) and names (PyTorch, softmax, ...). The same run in English finds English: the
  check can fail.

The built Chinese chapters embed those translations (a page from before the fix, or from a stale
execution cache, does not), and chapter 4's text names the playground's buttons as each edition's
button says them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attention_course.corpus import ToyTranslationCorpus
from attention_course.i18n import messages as catalog
from attention_course.widgets import AlignedSentence, AlignmentExplorer, AttentionPlayground, front_end
from attention_course.widgets.alignment import NOTES_EXAMPLE

ROOT = Path(__file__).resolve().parents[1]
BOOK_CATALOGS = ROOT / "book" / "locale" / "zh_CN" / "LC_MESSAGES" / "book"

# A message as the front ends write it: t("...") or N_("..."), a double-quoted JavaScript string.
MESSAGE_CALL = re.compile(r'(?<![\w$])(?<![\w)\]]\.)(?:t|N_)\(\s*"((?:[^"\\]|\\.)*)"')


def messages_in(module_name: str) -> set[str]:
    code = front_end.module(module_name)
    return {re.sub(r"\\(.)", r"\1", text) for text in MESSAGE_CALL.findall(code)}


def explorer_with_both_kinds_of_states() -> AlignmentExplorer:
    """The notes' sentence with encoder states (h_j given) and a corpus sentence without (schematic h_j)."""
    pair = next(p for p in ToyTranslationCorpus(num_pairs=200, seed=0).train_pairs if p.reordered)
    states = [[1.0, 0.0, 0.5], [0.0, 1.0, 0.2], [1.0, 1.0, -0.3]]
    return AlignmentExplorer([
        AlignedSentence(**NOTES_EXAMPLE, states=states, label="the notes' example: Tom Chase Jerry → 汤姆 追逐 杰瑞"),
        AlignedSentence.from_pair(pair, label="a reordered sentence"),
    ])


@pytest.mark.parametrize("module_name, widget", [
    ("playground.js", AttentionPlayground),
    ("alignment.js", explorer_with_both_kinds_of_states),
])
def test_every_message_of_a_front_end_reaches_the_page_translated(module_name, widget):
    shown = messages_in(module_name)
    formatted = {m for m in shown if re.search(r"\{\w+\}", m)}
    assert len(shown) >= 14 and formatted, shown  # the reading found the messages, those with values among them
    sent = widget().messages["zh"]
    table = catalog("widgets", "zh")
    missing = sorted(shown - set(sent))
    assert missing == [], f"messages the page would show in English: {missing}"
    assert {m: sent[m] for m in shown} == {m: table[m] for m in shown}


def test_the_chinese_editions_widgets_carry_every_translation_they_show(built_html):
    """What a built page embeds is what its chapter's widget sent when the chapter ran: a page built before
    the fix (or from a stale execution cache) would still show English. Rebuild the book if this fails."""
    import json

    modules = {"attention_course.widgets.playground.AttentionPlayground": "playground.js",
               "attention_course.widgets.alignment.AlignmentExplorer": "alignment.js"}
    seen = set()
    for chapter in ("02-soft-hard", "04-three-stages", "06-attention-decoder"):
        page = (built_html / "zh" / "book" / f"{chapter}.html").read_text(encoding="utf-8")
        for block in re.findall(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', page, re.S):
            for model in json.loads(block)["state"].values():
                name = modules.get(model["state"].get("_anywidget_id"))
                if name:
                    seen.add((chapter, name))
                    missing = messages_in(name) - set(model["state"]["messages"]["zh"])
                    assert missing == set(), (chapter, sorted(missing))
    assert seen == {("02-soft-hard", "playground.js"), ("04-three-stages", "playground.js"),
                    ("06-attention-decoder", "alignment.js")}


# ---- The widgets in a Chinese page ----------------------------------------------------------------

# A stand-in for anywidget's model (get, set, save_changes, on, off), a page in `lang`, and the widget's
# real front end (its _esm) rendered in it. Every text and name the widget shows is recorded after each
# step, and every announcement of its live region.
MOUNT = """async ({code, state, lang}) => {
  const listeners = {};
  const model = {
    get: (name) => state[name],
    set: (name, value) => {
      if (JSON.stringify(state[name]) === JSON.stringify(value)) return;
      state[name] = value;
      for (const callback of [...(listeners["change:" + name] || [])]) callback();
    },
    save_changes: () => {},
    on: (event, callback) => { (listeners[event] = listeners[event] || []).push(callback); },
    off: (event, callback) => { listeners[event] = (listeners[event] || []).filter((c) => c !== callback); },
  };
  document.documentElement.lang = lang;
  const el = document.createElement("div");
  document.body.append(el);
  const module = await import("data:text/javascript;charset=utf-8," + encodeURIComponent(code));
  module.default.render({ model, el });
  window.said = [];
  const live = el.querySelector("[role=status]");
  new MutationObserver(() => said.push(live.textContent)).observe(live, { childList: true, subtree: true, characterData: true });
  window.widget = el;
}"""

SHOWN = """() => {
  const found = [];
  const walker = document.createTreeWalker(widget, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) found.push(node.data);
  for (const element of widget.querySelectorAll("*")) {
    for (const name of ["aria-label", "title", "aria-valuetext", "placeholder", "alt"]) {
      if (element.hasAttribute(name)) found.push(element.getAttribute(name));
    }
  }
  return [...found, ...said];
}"""

# Not English sentences: code and library names, a function's name in a formula.
NAMES = ("attention_course.attention", "PyTorch", "JavaScript", "softmax", "MLP", "tanh", "log K")


def english_words(texts: list[str], data_words: set[str]) -> set[str]:
    """The English words in ``texts``, less the names above and the data's own words (source tokens)."""
    found = set()
    for text in texts:
        for name in NAMES:
            text = text.replace(name, " ")
        found |= {word for word in re.findall(r"[A-Za-z]{3,}", text) if word not in data_words}
    return found


def drive_playground(page) -> list[str]:
    """The playground through its states; everything it showed or said on the way."""
    shown: list[str] = []
    w = page.locator("div").first

    def look():
        page.clock.run_for(2000)  # the live region speaks once a change settles
        shown.extend(page.evaluate(SHOWN))

    look()  # chapter 4's example: the entropy line
    w.locator('.ap-chip[data-vector="1"]').click()  # a key chosen: its title, its value box
    look()
    for score in ("scaled_dot", "cosine", "additive", "dot"):  # additive: its fixed weights' note
        w.locator(".ap-score-select").select_option(score)
        look()
    for log_tau in ("-2", "2", "0"):  # hard attention, nearly uniform weights, spread
        w.locator(".ap-temperature").fill(log_tau)
        look()
    w.locator(".ap-add-key").click()
    look()
    w.locator(".ap-remove-key").click()
    w.locator('.ap-chip[data-vector="q"]').click()
    w.locator(".ap-angle").fill("30")
    look()
    return shown


def drive_explorer(page) -> list[str]:
    shown: list[str] = []
    w = page.locator("div").first

    def look():
        page.clock.run_for(2000)
        shown.extend(page.evaluate(SHOWN))

    look()
    for sentence in ("0", "1"):  # with encoder states, then schematic ones
        w.locator(".ae-sentence").select_option(sentence)
        for step in range(w.locator(".ae-step").count()):
            w.locator(f'.ae-step[data-step="{step}"]').click()
            look()
    return shown


def rendered(browser, widget, lang: str, drive) -> list[str]:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.clock.install()
    page.set_content("<!doctype html><html><body></body></html>")
    state = {name: value for name, value in widget.get_state().items() if not name.startswith("_")}
    page.evaluate(MOUNT, {"code": widget._esm, "state": state, "lang": lang})
    try:
        shown = drive(page)
    finally:
        page.close()
    assert errors == []
    return shown


@pytest.mark.browser
def test_the_playground_shows_and_says_nothing_in_english_in_a_chinese_page(browser):
    shown = rendered(browser, AttentionPlayground(), "zh-CN", drive_playground)
    assert english_words(shown, set()) == set()
    said = [text for text in shown if text.startswith("权重：")]
    assert said, "the live region said nothing"
    joined = "\n".join(shown)
    for chinese in ("权重的熵为", "硬注意力：", "权重几乎均匀", "固定的权重：", "键 k2", "数值由本页计算"):
        assert chinese in joined, chinese

    control = rendered(browser, AttentionPlayground(), "en", drive_playground)
    assert {"Entropy", "Hard", "Weights", "output"} <= english_words(control, set())


@pytest.mark.browser
def test_the_alignment_explorer_shows_and_says_nothing_in_english_in_a_chinese_page(browser):
    explorer = explorer_with_both_kinds_of_states()
    data_words = {token for record in explorer.sentences for token in record["source"]}
    shown = rendered(browser, explorer, "zh-CN", drive_explorer)
    assert english_words(shown, data_words) == set()
    joined = "\n".join(shown)
    assert "第 2 步，正在写出" in joined and "上下文向量" in joined
    assert any(text.startswith("第 2 步，追逐：权重 Tom 0.20") for text in shown)  # the announcement
    for note in ("编码器的隐状态，投影到", "这里画的 h_j 只是示意"):  # with states, and schematic
        assert note in joined, note

    control = rendered(browser, explorer, "en", drive_explorer)
    assert {"Step", "writing", "weights", "context"} <= english_words(control, data_words)


# ---- The chapters name the widgets' buttons as the buttons say them -------------------------------

def button_labels(module_name: str) -> set[str]:
    """The messages a front end writes on its buttons: html("button", {..., text: t("...")})."""
    return set(re.findall(r'html\("button", \{[^{}]*\btext: t\("([^"]+)"\)', front_end.module(module_name)))


def test_a_button_the_text_names_is_named_as_the_button_says_it_in_each_edition():
    from babel.messages.pofile import read_po

    buttons = button_labels("playground.js") | button_labels("alignment.js")
    assert {"+ key", "− key"} <= buttons
    zh = catalog("widgets", "zh")
    named = []
    for path in sorted(BOOK_CATALOGS.glob("[0-9]*.po")):
        with path.open("rb") as handle:
            for message in read_po(handle):
                if not isinstance(message.id, str):
                    continue
                for label in re.findall(r"\*\*(.+?)\*\*", message.id):
                    if label in buttons:  # the English text bolds the English button's label
                        named.append(label)
                        assert f"**{zh[label]}**" in message.string, (path.name, label, message.string)
    # Chapter 4 tells the reader to press "+ key"; the Chinese text says what the Chinese button says.
    assert "+ key" in named
