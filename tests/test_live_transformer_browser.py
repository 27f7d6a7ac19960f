"""Chapter 10's live explorer in the built book, on a phone (390×844), offline, in both editions.

Headless Chromium opens chapter 10 served under a sub-path with every request outside the build blocked.
The page must not load the engine or the weights until the reader starts the explorer; then the reader
types the notes' "Tom chase Jerry" and presses Enter, and the Transformer's translation, PyTorch's greedy
output, appears in ``data-live-output``. Choosing a map (by keyboard, with a visible focus ring) shows that
layer's and head's weights, the numbers PyTorch's ``translate_with_maps`` computes (read from each cell's
``data-weight``), for cross-attention, the decoder's self-attention and the encoder's. Hiding a word takes
it out of cross-attention and leaves the encoder's map as it was; forcing another first word writes it and
decodes the rest as PyTorch does with that word forced. Nothing scrolls sideways. The weights the page loads
are the export of the chapter's trained model.
"""

from __future__ import annotations

import pytest
import torch

from attention_course.corpus import Batch, ToyTranslationCorpus, Vocab
from attention_course.live_model import write_export
from attention_course.model_cache import trained_model
from attention_course.transformer import build_transformer, translate_with_maps
from attention_course.transformer_length import MODEL
from browser_audit import WIDTHS, reader, serve

pytestmark = pytest.mark.browser

CHAPTER_10 = "book/10-transformer.html"
EDITIONS = {"en": "", "zh_CN": "zh/"}
TOLERANCE = 1e-4
# The weights of the map on show, row by row, from each cell's data-weight (a masked cell holds 0).
SHOWN = """el => [...el.querySelectorAll('.lt-matrix tr')].filter((row) => row.querySelector('td'))
  .map((row) => [...row.querySelectorAll('td')].map((cell) => Number(cell.dataset.weight)))"""
CAPTION = "el => el.querySelector('.lt-matrix caption').textContent"


@pytest.fixture(scope="module")
def base(built_html):
    with serve(built_html) as base:
        yield base


@pytest.fixture(scope="module")
def chapter():
    corpus = ToyTranslationCorpus(num_pairs=2000, seed=0)
    settings = {**MODEL, "positions": "sinusoidal", "seed": 0}
    model, _ = trained_model(corpus, build=build_transformer, model_kwargs=settings, steps=500, seed=0, log_every=100)
    return corpus, model


def forced_run(model, corpus, sentence: str, forced: dict[int, int]) -> tuple[str, dict]:
    """PyTorch's greedy translation of ``sentence`` with the words in ``forced`` ({step: target id}) written
    instead of the model's choice at those steps, as the explorer's "what if" does (the decoder reads the whole
    prefix at every step, as ``greedy_decode``); and the maps of the model reading what it wrote."""
    ids = corpus.source_vocab.encode(sentence)
    source, lengths = torch.tensor([ids]), torch.tensor([len(ids)])
    written = [Vocab.bos_id]
    with torch.no_grad():
        memory, _ = model.encode(source, lengths)
        while len(written) <= 2 * len(ids) + 2:
            logits, _, _ = model.decode(torch.tensor([written]), memory, lengths)
            written.append(forced.get(len(written) - 1, int(logits[0, -1].argmax())))
            if written[-1] == Vocab.eos_id:
                break
    target = torch.tensor([written])
    maps = model.attention_maps(Batch(source, lengths, target[:, :-1], target[:, 1:], torch.tensor([len(written) - 1]), ()))
    words = [w for w in written[1:] if w != Vocab.eos_id]
    return corpus.target_vocab.decode(words, keep_special=True), {k: [m[0] for m in v] for k, v in maps.items()}


def assert_shown(page, explorer, expected: torch.Tensor, causal: bool = False) -> None:
    """The map on show is ``expected`` (rows × columns) within 1e-4; in a causal map, every cell above the
    diagonal is masked (a dash, weight 0)."""
    shown = torch.tensor(page.evaluate(SHOWN, explorer.element_handle()), dtype=torch.float64)
    assert shown.shape == expected.shape
    assert (shown - expected.to(torch.float64)).abs().max().item() <= TOLERANCE
    if causal:
        masked = explorer.locator(".lt-matrix td.lt-masked")
        assert masked.count() == expected.shape[0] * (expected.shape[0] - 1) // 2
        assert set(masked.all_text_contents()) == {"–"}


def choose(page, explorer, select: str, value: str) -> None:
    """Choose ``value`` in the explorer's ``select`` and wait until the map on show has changed."""
    before = page.evaluate(CAPTION, explorer.element_handle())
    explorer.locator(select).select_option(value)
    page.wait_for_function(f"([el, before]) => ({CAPTION})(el) !== before", arg=[explorer.element_handle(), before])


@pytest.mark.parametrize("edition", sorted(EDITIONS))
def test_a_reader_sees_every_head_of_the_transformer_on_a_phone_offline(browser, base, built_html, chapter, edition,
                                                                         tmp_path):
    corpus, model = chapter
    sentence = "Tom chase Jerry"
    words, maps = translate_with_maps(model, corpus, sentence)
    requested: list[str] = []
    with reader(browser, base, EDITIONS[edition] + CHAPTER_10, "phone",
                on_request_finished=lambda r: requested.append(r.url)) as page:
        explorer = page.locator("[data-live-model]")
        explorer.wait_for()
        assert explorer.count() == 1
        page.wait_for_timeout(300)
        assert not [url for url in requested if "/_static/live/" in url], "the engine loaded before the reader started"

        # The page's model is the chapter's trained Transformer, as the build exported it.
        model_file = explorer.get_attribute("data-live-model")
        served = built_html / EDITIONS[edition] / "_static" / "live" / model_file
        assert served.read_bytes() == (tmp_path / write_export(model, corpus, tmp_path)).read_bytes()

        box = explorer.locator("input")
        box.focus()
        box.fill(sentence)
        page.keyboard.press("Enter")
        output = explorer.locator("[data-live-output]")
        page.wait_for_function("el => !el.hasAttribute('aria-busy') && el.textContent.trim() !== ''",
                               arg=output.element_handle(), timeout=15000)
        assert output.text_content() == " ".join(words) == "汤姆 追逐 杰瑞"
        assert output.get_attribute("aria-live") == "polite"

        # First on show: the last layer's cross-attention averaged over the heads (greedy_decode's weights),
        # a row per step (the three words and the end), a column per source word.
        assert_shown(page, explorer, maps["cross"][-1].mean(dim=0))

        # By keyboard: the layer box, one up (layer 1), with a focus ring; then head 3.
        layer = explorer.locator(".lt-view-layer")
        layer.focus()
        assert page.evaluate("el => getComputedStyle(el).outlineStyle", layer.element_handle()) != "none"
        before = page.evaluate(CAPTION, explorer.element_handle())
        page.keyboard.press("ArrowUp")
        page.wait_for_function(f"([el, before]) => ({CAPTION})(el) !== before", arg=[explorer.element_handle(), before])
        assert layer.input_value() == "0"
        choose(page, explorer, ".lt-view-head", "2")
        assert_shown(page, explorer, maps["cross"][0][2])

        # The decoder's causal self-attention, layer 2, head 1; the encoder's self-attention, layer 1, head 4.
        choose(page, explorer, ".lt-view-kind", "decoder")
        choose(page, explorer, ".lt-view-layer", "1")
        choose(page, explorer, ".lt-view-head", "0")
        assert_shown(page, explorer, maps["decoder"][1][0], causal=True)
        choose(page, explorer, ".lt-view-kind", "encoder")
        choose(page, explorer, ".lt-view-layer", "0")
        choose(page, explorer, ".lt-view-head", "3")
        assert_shown(page, explorer, maps["encoder"][0][3])

        # What if Tom were hidden: cross-attention no longer looks at it, in any layer or head; the encoder
        # still reads it, so its map is unchanged.
        explorer.locator(".lt-hide").first.click()
        page.wait_for_function("el => !el.hasAttribute('aria-busy')", arg=output.element_handle())
        assert_shown(page, explorer, maps["encoder"][0][3])
        choose(page, explorer, ".lt-view-kind", "cross")
        for layer_index in ("0", "1"):
            if layer.input_value() != layer_index:
                choose(page, explorer, ".lt-view-layer", layer_index)
            shown = page.evaluate(SHOWN, explorer.element_handle())
            assert [row[0] for row in shown] == [0.0] * len(shown)

        # What if the first step wrote another word: the page writes it, marks it, and decodes the rest from it
        # as PyTorch does with that word forced, the maps included.
        explorer.locator(".lt-reset").click()
        page.wait_for_function("el => !el.hasAttribute('aria-busy') && el.textContent.trim() !== ''",
                               arg=output.element_handle())
        explorer.locator(".lt-step").first.click()
        other = corpus.target_vocab.encode("杰瑞")[0]
        expected, forced_maps = forced_run(model, corpus, sentence, {0: other})
        explorer.locator(".lt-force").select_option(str(other))
        page.wait_for_function("([el, word]) => !el.hasAttribute('aria-busy') && el.textContent.startsWith(word)",
                               arg=[output.element_handle(), "杰瑞"])
        assert output.text_content() == expected != " ".join(words)
        assert "lt-forced" in (explorer.locator(".lt-step").first.get_attribute("class") or "")
        assert_shown(page, explorer, forced_maps["cross"][1][3])  # the view kept: cross-attention, layer 2, head 4

        scroll_width, client_width = page.evaluate(WIDTHS)
        assert scroll_width <= client_width, f"the page scrolls sideways: {scroll_width} > {client_width}"
    assert any(url.endswith("/_static/live/live-engine.js") for url in requested)
    assert any(url.endswith(f"/_static/live/{model_file}") for url in requested)
