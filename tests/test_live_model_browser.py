"""Chapter 6's live explorer in the built book, on a phone (390×844), offline, in both editions.

Headless Chromium opens chapter 6 served under a sub-path with every request outside the build blocked.
The page must not load the engine or the weights until the reader starts the explorer; then the reader
types the notes' "Tom chase Jerry" and presses Enter, and the model's translation, PyTorch's greedy
output, appears in ``data-live-output``, its attention drawn, with no sideways scroll. A word the model
does not know is named. The weights the page loads are the export of the chapter's trained model.
"""

from __future__ import annotations

import pytest

from attention_course.corpus import ToyTranslationCorpus
from attention_course.live_model import write_export
from attention_course.model_cache import trained_model
from attention_course.seq2seq import translate
from attention_course.corpus import Vocab
from browser_audit import WIDTHS, reader, serve

pytestmark = pytest.mark.browser

CHAPTER_6 = "book/06-attention-decoder.html"
EDITIONS = {"en": "", "zh_CN": "zh/"}
NOT_KNOWN = {"en": "does not know", "zh_CN": "模型不认识"}


@pytest.fixture(scope="module")
def base(built_html):
    with serve(built_html) as base:
        yield base


def forced_translation(model, corpus, sentence: str, forced: dict[int, int]) -> str:
    """PyTorch's greedy translation of ``sentence`` with the words in ``forced`` ({step: target id}) written
    instead of the model's choice at those steps, as the explorer's "what if" does."""
    import torch

    ids = corpus.source_vocab.encode(sentence)
    with torch.no_grad():
        encoded = model.encoder(torch.tensor([ids]), torch.tensor([len(ids)]))
        hidden = model.decoder.initial_state(encoded)
        previous, words = torch.tensor([Vocab.bos_id]), []
        while len(words) <= 2 * len(ids) + 1:
            logits, hidden, _ = model.decoder.step(previous, hidden, encoded)
            token = forced.get(len(words), int(logits.argmax(-1)))
            if token == Vocab.eos_id:
                break
            words.append(token)
            previous = torch.tensor([token])
    return corpus.target_vocab.decode(words, keep_special=True)


@pytest.fixture(scope="module")
def chapter():
    corpus = ToyTranslationCorpus(num_pairs=2000, seed=0)
    model, _ = trained_model(corpus, model_kwargs={"attention": True, "seed": 0}, steps=500, seed=0, log_every=100)
    return corpus, model


@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_a_reader_translates_tom_chase_jerry_on_a_phone_offline(browser, base, built_html, chapter, edition, tmp_path):
    corpus, model = chapter
    expected, weights = translate(model, corpus, "Tom chase Jerry")
    requested: list[str] = []
    with reader(browser, base, EDITIONS[edition] + CHAPTER_6, "phone",
                on_request_finished=lambda r: requested.append(r.url)) as page:
        explorer = page.locator("[data-live-model]")
        explorer.wait_for()
        assert explorer.count() == 1
        page.wait_for_timeout(300)
        assert not [url for url in requested if "/_static/live/" in url], "the engine loaded before the reader started"

        # The page's model is the chapter's trained model, as the build exported it.
        model_file = explorer.get_attribute("data-live-model")
        served = built_html / EDITIONS[edition] / "_static" / "live" / model_file
        assert served.read_bytes() == (tmp_path / write_export(model, corpus, tmp_path)).read_bytes()

        box = explorer.locator("input")
        box.focus()
        box.fill("Tom chase Garfield")
        page.keyboard.press("Enter")
        message = explorer.locator(".lt-message")
        page.wait_for_function("el => el.textContent.includes('Garfield')", arg=message.element_handle())
        assert NOT_KNOWN[edition] in message.text_content()

        box.fill("Tom chase Jerry")
        page.keyboard.press("Enter")
        output = explorer.locator("[data-live-output]")
        page.wait_for_function("el => !el.hasAttribute('aria-busy') && el.textContent.trim() !== ''",
                               arg=output.element_handle(), timeout=15000)
        assert output.text_content() == expected == "汤姆 追逐 杰瑞"
        assert output.get_attribute("aria-live") == "polite"

        # The attention: one row per output step (the three words and the end), one cell per source word,
        # the numbers PyTorch computes.
        rows = explorer.locator(".lt-matrix tr:has(td)")
        assert rows.count() == 4
        drawn = [float(cell) for i in range(3) for cell in rows.nth(i).locator("td").all_text_contents()]
        assert drawn == pytest.approx(weights.flatten().tolist(), abs=0.006)

        # Choosing step 1 by keyboard shows its weights.
        first = explorer.locator(".lt-step").first
        first.focus()
        page.keyboard.press("Enter")
        assert first.get_attribute("aria-pressed") == "true"
        values = [float(v) for v in explorer.locator(".lt-bar-value").all_text_contents()]
        assert values == pytest.approx(weights[0].tolist(), abs=1e-4)

        # What if Tom were hidden from attention: the first step can no longer look at it.
        explorer.locator(".lt-hide").first.click()
        page.wait_for_function("el => !el.hasAttribute('aria-busy')", arg=output.element_handle())
        assert float(rows.nth(0).locator("td").first.text_content()) == 0.0

        # What if the first step wrote another word: the page writes it, marks it, and decodes the rest from it
        # as PyTorch does.
        explorer.locator(".lt-reset").click()
        page.wait_for_function("el => !el.hasAttribute('aria-busy') && el.textContent.trim() !== ''",
                               arg=output.element_handle())
        first.click()
        other = corpus.target_vocab.encode("杰瑞")[0]
        explorer.locator(".lt-force").select_option(str(other))
        page.wait_for_function("([el, word]) => !el.hasAttribute('aria-busy') && el.textContent.startsWith(word)",
                               arg=[output.element_handle(), "杰瑞"])
        assert output.text_content() == forced_translation(model, corpus, "Tom chase Jerry", {0: other}) != expected
        assert "lt-forced" in (explorer.locator(".lt-step").first.get_attribute("class") or "")

        scroll_width, client_width = page.evaluate(WIDTHS)
        assert scroll_width <= client_width, f"the page scrolls sideways: {scroll_width} > {client_width}"
    assert any(url.endswith("/_static/live/live-engine.js") for url in requested)
    assert any(url.endswith(f"/_static/live/{model_file}") for url in requested)
