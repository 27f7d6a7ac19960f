"""Every figure the chapters draw comes in both editions: the English one as it always was, and a
Chinese one whose text is all Chinese (but for the sentences' words and names such as GRU), drawn
from the catalog with no label left untranslated and no character that the fonts cannot draw."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path

import matplotlib
import pytest
import torch
from matplotlib.text import Text

from fresh_python import run_python

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
IMPORT = re.compile(r"^from attention_course\.figures\.(\w+) import ([\w, ]+)$", re.M)
HAN = re.compile("[\u4e00-\u9fff]")
MATH = re.compile(r"\$[^$]*\$")


def chapter_figures() -> dict[str, str]:
    """{function name: module} of every figure function a chapter imports and calls."""
    found = {}
    for page in sorted((ROOT / "book").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for module, names in IMPORT.findall(text):
            for name in (n.strip() for n in names.split(",")):
                if name.startswith("draw_") and re.search(rf"\b{name}\(", text):
                    found[name] = module
    return found


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


def english_words(strings) -> set[str]:
    """The Latin words of three letters or more, outside formulas."""
    return {w for s in strings for w in re.findall(r"[A-Za-z][A-Za-z-]{2,}", MATH.sub("", s))}


def test_the_chapters_draw_many_figures_and_every_one_is_decorated_and_takes_lang():
    from attention_course.figures.editions import in_every_language

    figures = chapter_figures()
    assert len(figures) >= 30, sorted(figures)  # every chapter's figures, found in the sources
    wrapper = in_every_language(lambda lang="en": None).__code__
    for name, module in figures.items():
        function = getattr(importlib.import_module(f"attention_course.figures.{module}"), name)
        assert function.__code__ is wrapper, f"{module}.{name} is not decorated with @in_every_language"
        parameter = inspect.signature(function.__wrapped__).parameters.get("lang")
        assert parameter is not None and parameter.default == "en", f"{module}.{name} takes no lang='en'"
        assert "``lang``" in (function.__doc__ or "") or "``lang``" in (
            importlib.import_module(f"attention_course.figures.{module}").__doc__ or ""), (
            f"{module}.{name}: its docstring does not say that its text is in ``lang``")


@pytest.fixture(autouse=True)
def course_style():
    """The course's fonts (its Chinese labels are measured when a figure lays itself out), and a
    missing glyph (a UserWarning) an error; rcParams and warning filters are restored afterwards."""
    import warnings

    import matplotlib.pyplot as plt

    from attention_course.plotting import use_course_style

    with matplotlib.rc_context(), warnings.catch_warnings():
        use_course_style()
        warnings.simplefilter("error", UserWarning)
        yield
    plt.close("all")


@pytest.fixture(scope="module")
def history():
    from attention_course.seq2seq import TrainingHistory

    return TrainingHistory(steps=[100, 200], losses=[2.0, 1.0], accuracies=[0.1, 0.3], step_losses=[3.0, 2.0, 1.0])


def _two_cues():
    from attention_course.attention import softmax
    from attention_course.cues import describe, interest_scores, make_toy_scene, salience_scores
    from attention_course.figures.cues import draw_two_cues

    scene = make_toy_scene(seed=3)
    features = scene.features()
    salience, interest = salience_scores(features), 4.0 * interest_scores(features, describe(wheels=1.0))
    return lambda **lang: draw_two_cues(scene, softmax(salience / 0.25), softmax(interest), **lang), set()


def _encoder_decoder():
    from attention_course.figures.encoder_decoder import draw_encoder_decoder

    return lambda **lang: draw_encoder_decoder(attention=True, **lang), {"Tom", "chase", "Jerry"}


def _weight_patterns():
    from attention_course.figures.beyond import draw_weight_patterns

    source, target = "Tom chase Jerry".split(), ["汤姆", "追逐", "杰瑞"]
    weights = torch.softmax(torch.arange(9.0).reshape(3, 3), -1)
    panels = {  # chapter 7's titles
        "global, soft 全局注意力\noutput word × source word": (weights, target, source),
        "self-attention 自注意力\nsource word × source word": (weights, source, source),
    }
    return lambda **lang: draw_weight_patterns(panels, **lang), set(source)


@pytest.mark.parametrize("case", [_two_cues, _encoder_decoder, _weight_patterns],
                         ids=["two cues (chapter 3)", "encoder-decoder (chapter 6)", "weight patterns (chapter 7)"])
def test_the_chinese_drawing_is_chinese_where_the_english_one_has_words(case):
    import matplotlib.pyplot as plt

    from attention_course.i18n import collecting_untranslated

    draw, data_words = case()
    english = draw()
    assert texts(english) == texts(draw(lang="en"))  # without lang: the English figure, as before
    with collecting_untranslated() as missed:
        chinese = draw(lang="zh")
    assert missed == []
    zh = texts(chinese)
    # The titles, axis labels and legends are Chinese; the only Latin words left are the data's.
    labelled = [t for t in zh if HAN.search(t)]
    assert len(labelled) >= 3, zh
    titles = [ax.get_title() for ax in chinese.axes if ax.get_title()]
    assert all(HAN.search(title) for title in titles), titles
    leftover = english_words(zh) & english_words(texts(english))
    assert leftover <= data_words | {"softmax", "GRU", "RNN", "BLEU"}, sorted(leftover - data_words)
    # The same layout: as many panels, as many texts.
    assert len(chinese.axes) == len(english.axes) and len(zh) == len(texts(english))
    plt.close("all")


def test_text_that_a_chapter_passes_in_is_translated_when_the_figure_draws(history):
    import matplotlib.pyplot as plt

    from attention_course.figures.encoder_decoder import draw_output_lengths, draw_training_curves
    from attention_course.figures.multi_head import draw_training_losses
    from attention_course.i18n import collecting_untranslated

    rows = [[25, 20, 1], [30, 60, 0]]
    with collecting_untranslated() as missed:
        curves = draw_training_curves({"without attention": history, "with attention": history}, lang="zh")
        # Chapter 6.2's panel titles carry a seed: "<model>, seed <n>".
        lengths = draw_output_lengths({"plain": rows, "attention:3": rows}, 23,
                                      {"plain": "without attention, seed 0", "attention:3": "attention, seed 3"},
                                      lang="zh")
        losses = draw_training_losses({"1 head": [2.0, 1.0], "2 heads": [1.5, 0.5]}, lang="zh")
    assert missed == []
    assert [t.get_text() for t in curves.axes[1].get_legend().get_texts()] == ["不带注意力", "带注意力"]
    assert [ax.get_title() for ax in lengths.axes] == ["不带注意力，随机种子 0", "带注意力，随机种子 3"]
    assert [t.get_text() for t in losses.axes[0].get_legend().get_texts()] == ["1 个头", "2 个头"]
    # In English the same calls draw exactly what they are given.
    english = draw_output_lengths({"plain": rows}, 23, {"plain": "without attention, seed 0"})
    assert english.axes[0].get_title() == "without attention, seed 0"
    plt.close("all")


def test_a_name_the_catalog_does_not_know_is_drawn_as_given_and_reported(history):
    import matplotlib.pyplot as plt

    from attention_course.figures.encoder_decoder import draw_training_curves
    from attention_course.i18n import collecting_untranslated

    with collecting_untranslated() as missed:
        fig = draw_training_curves({"my own model": history, "with attention": history}, lang="zh")
    assert missed == ["my own model"]  # so the Chinese build fails and names it, instead of shipping English
    assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == ["my own model", "带注意力"]
    plt.close("all")


DRAW_EVERY_CHAPTER_FIGURE_IN_CHINESE = """
    import io, json
    import matplotlib.pyplot as plt
    import torch
    from attention_course.attention import attention, dot_score, hard_attention, masked_softmax, softmax
    from attention_course.attention_variants import LayerTiming
    from attention_course.corpus import Clause, ToyTranslationCorpus, render_pair
    from attention_course.cues import attention_over_time, describe, interest_scores, make_toy_scene, salience_scores
    from attention_course.figures import (beyond, cues, encoder_decoder as ed, multi_head, overview, primer,
                                          soft_hard, three_stages, transformer)
    from attention_course.positions import alibi_bias, alibi_slopes, sinusoidal_positions
    from attention_course.glimpse import PALETTE, glimpse, make_scene
    from attention_course.i18n import collecting_untranslated
    from attention_course.kernel_regression import make_regression_data, nadaraya_watson, target_function
    from attention_course.plotting import use_course_style
    from attention_course.retrieval import TrainingHistory as RetrievalHistory
    from attention_course.seq2seq import LengthBucket, TrainingHistory

    use_course_style()
    g = torch.Generator().manual_seed(0)
    words = "Tom chase Jerry quickly in the kitchen yesterday".split()
    scores = torch.tensor([0.3, 2.0, 1.0, 0.2, -0.5, -1.0, 0.4, 2.3])
    window = (torch.arange(8) - 1).abs() <= 1
    outside = scores.masked_fill(~window, float("-inf"))
    cells = {("soft", "global"): softmax(scores), ("hard", "global"): hard_attention(scores, torch.eye(8))[1],
             ("soft", "local"): softmax(outside), ("hard", "local"): hard_attention(outside, torch.eye(8))[1]}
    temperatures = torch.logspace(-2, 2, 9)
    dial = softmax(torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]) / temperatures[:, None])
    entropies = -torch.special.xlogy(dial, dial).sum(-1)
    scene = make_toy_scene(seed=3)
    salience = salience_scores(scene.features())
    interest = 4.0 * interest_scores(scene.features(), describe(wheels=1.0))
    times = torch.linspace(0, 60, 31)
    image = make_scene(rows=6, cols=8, seed=0)
    seen, glimpse_weights = glimpse(image, query=PALETTE[0], temperature=0.1)
    query, keys = torch.tensor([[[1.0, 2.0]]]), torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    values = torch.tensor([[[10.0], [20.0], [30.0]]])
    output, weights = attention(query, keys, values, dot_score)
    lengths = torch.tensor([2, 3])
    masked = masked_softmax(torch.tensor([[[1.0, 2.0, 3.0, 4.0]] * 2] * 2), lengths)
    x, y = make_regression_data(n=20)
    x_query = torch.linspace(0, 5, 11)
    prediction, kernel = nadaraya_watson(x_query, x, y)
    notes = torch.tensor([[0.6, 0.2, 0.2], [0.2, 0.7, 0.1], [0.3, 0.2, 0.5]])
    encodings = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    pair = render_pair([Clause("Tom", "chase", "Jerry", "quickly", "in the kitchen", "yesterday")])
    source, target = pair.source, pair.target
    matrix = torch.softmax(torch.randn(len(target), len(source), generator=g), -1)
    history = TrainingHistory(steps=[1, 2], losses=[2.0, 1.0], accuracies=[0.0, 0.5], step_losses=[2.0, 1.0])
    buckets = [LengthBucket(3, 5, 10, 1.0), LengthBucket(6, 30, 20, 0.25)]
    names = {"plain": "without attention", "attention": "attention",
             "bidirectional": "attention, bidirectional encoder"}  # chapter 6.2's
    runs = {name: [[1.0, 0.5], [0.9, 0.4]] for name in names}
    per_sentence = {"plain": [[25, 20, 1]], "attention:0": [[25, 60, 0]], "attention:3": [[30, 20, 1]]}
    titles = {"plain": "without attention, seed 0", "attention:0": "attention, seed 0",
              "attention:3": "attention, seed 3"}
    heads = torch.softmax(torch.randn(2, 4, 4, generator=g), -1).tril()
    drawn = {
        "draw_glimpse": lambda: overview.draw_glimpse(image, glimpse_weights, seen, lang="zh"),
        "draw_two_distinctions": lambda: soft_hard.draw_two_distinctions(words, cells, window, lang="zh"),
        "draw_temperature_dial": lambda: soft_hard.draw_temperature_dial(
            temperatures, entropies, [(t, softmax(torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]) / t)) for t in (0.1, 1.0)],
            lang="zh"),
        "draw_learning_curves": lambda: soft_hard.draw_learning_curves(
            [RetrievalHistory("soft", [1.0, 0.5], [0.5, 1.0]), RetrievalHistory("hard", [1.0, 0.9], [0.1, 0.2])],
            lang="zh"),
        "draw_two_cues": lambda: cues.draw_two_cues(scene, softmax(salience / 0.25), softmax(interest), lang="zh"),
        "draw_attention_over_time": lambda: cues.draw_attention_over_time(
            scene, times, attention_over_time(salience / 0.25, interest, times), lang="zh"),
        "draw_attention_pooling": lambda: three_stages.draw_attention_pooling(lang="zh"),
        "draw_source_query": lambda: three_stages.draw_source_query(lang="zh"),
        "draw_three_stages": lambda: three_stages.draw_three_stages(
            query[0, 0], keys[0], values[0], dot_score(query, keys)[0, 0], weights[0, 0], output[0, 0],
            score_name=r"$q \\cdot k_j$", lang="zh"),
        "draw_masked_weights": lambda: three_stages.draw_masked_weights(masked, lengths, lang="zh"),
        "draw_kernel_regression": lambda: three_stages.draw_kernel_regression(
            x, y, x_query, prediction, target_function(x_query), kernel, lang="zh"),
        "draw_padding_drift": lambda: primer.draw_padding_drift([0, 1], [0.0, 0.3], [0.0, 0.0], lang="zh"),
        "draw_teacher_forcing": lambda: primer.draw_teacher_forcing(lang="zh"),
        "draw_encoder_decoder": lambda: ed.draw_encoder_decoder(attention=True, lang="zh"),
        "draw_length_distribution": lambda: ed.draw_length_distribution(
            ToyTranslationCorpus(num_pairs=50).train_pairs, title="Source lengths of the 2000 generated pairs",
            lang="zh"),
        "draw_training_curves": lambda: ed.draw_training_curves(
            {"without attention": history, "with attention": history}, lang="zh"),
        "draw_accuracy_by_length": lambda: ed.draw_accuracy_by_length({"without attention": buckets}, lang="zh"),
        "draw_attention_matrices": lambda: ed.draw_attention_matrices(
            [notes, notes], ed.NOTES_SOURCE, ed.NOTES_TARGET,
            ["the notes' attention matrix", "learned by the model"], lang="zh"),
        "draw_context_composition": lambda: ed.draw_context_composition(
            encodings, notes[0], notes[0] @ encodings, lang="zh"),
        "draw_rnn_encoder_decoder": lambda: ed.draw_rnn_encoder_decoder(lang="zh"),
        "draw_attention_distribution": lambda: ed.draw_attention_distribution(step=3, lang="zh"),
        "draw_alignment_score": lambda: ed.draw_alignment_score(lang="zh"),
        "draw_alignment": lambda: ed.draw_alignment(pair.alignment_matrix(), pair, lang="zh"),
        "draw_seed_bands": lambda: ed.draw_seed_bands(["3–5", "6–30"], runs, runs, names, lang="zh"),
        "draw_output_lengths": lambda: ed.draw_output_lengths(per_sentence, 23, titles, lang="zh"),
        "draw_long_attention": lambda: ed.draw_long_attention(
            matrix, source, target, 4, lang="zh"),
        "draw_alignment_vs_influence": lambda: beyond.draw_alignment_vs_influence(
            source, target, matrix, matrix - 0.1, pair.alignment_matrix(), lang="zh"),
        "draw_weight_patterns": lambda: beyond.draw_weight_patterns({
            "global, soft 全局注意力\\noutput word × source word": (matrix, target, source),
            "hard 硬注意力\\none source word per output word": (matrix, target, source),
            "local-p, D = 2 局部注意力\\na learned window per output word": (matrix, target, source),
            "self-attention 自注意力\\nsource word × source word": (torch.eye(len(source)), source, source),
        }, lang="zh"),
        "draw_layer_connections": lambda: beyond.draw_layer_connections(length=6, focus=3, kernel_size=3, lang="zh"),
        "draw_layer_timings": lambda: beyond.draw_layer_timings(
            [LayerTiming(16, 1e-4, 1e-5), LayerTiming(32, 2e-4, 3e-5)], lang="zh"),
        "draw_multi_head": lambda: multi_head.draw_multi_head(num_heads=3, lang="zh"),
        "draw_split_heads": lambda: multi_head.draw_split_heads(length=4, d_model=6, num_heads=3, lang="zh"),
        "draw_heads": lambda: multi_head.draw_heads(heads, "Tom chase Jerry today".split(), lang="zh"),
        "draw_training_losses": lambda: multi_head.draw_training_losses(
            {f"{n} head{'s' if n > 1 else ''}": [2.0, 1.0] for n in (1, 2)}, lang="zh"),
        # chapters 9 to 12, with the text they pass in
        "draw_position_encodings": lambda: transformer.draw_position_encodings(sinusoidal_positions(8, 4), lang="zh"),
        "draw_offset_curves": lambda: transformer.draw_offset_curves(
            {r"sinusoidal: $PE_j \\cdot PE_{j+k}$": {20: ([-1, 0, 1], [1.0, 2.0, 1.0])},
             "RoPE: score of $q$ at $i$, $k$ at $i + k$": {20: ([-1, 0, 1], [0.5, 1.0, 0.0])}}, lang="zh"),
        "draw_rotations": lambda: transformer.draw_rotations([1.0, 0.3], thetas=[0.5, 0.05], positions=range(3),
                                                             lang="zh"),
        "draw_alibi_biases": lambda: transformer.draw_alibi_biases(alibi_bias(2, 4, 4), alibi_slopes(2), lang="zh"),
        "draw_layer_norms": lambda: transformer.draw_layer_norms(lang="zh"),
        "draw_encoder_decoder_transformer": lambda: transformer.draw_encoder_decoder_transformer(2, lang="zh"),
        "draw_cross_heads": lambda: transformer.draw_cross_heads(
            torch.softmax(torch.randn(2, len(target), len(source), generator=g), -1), target, source, lang="zh"),
        "draw_lines": lambda: transformer.draw_lines(  # chapter 12's
            {transformer.SCHEME_NAMES[s]: ([1, 2], [1.0, 0.5]) for s in ("sinusoidal", "learned", "rope", "alibi",
                                                                           "attention")},
            "word position in the reference", "accuracy, teacher forced", mark_x=1.5, lang="zh"),
        "draw_lines (chapter 11's loss)": lambda: transformer.draw_lines(
            {"training loss": ([1, 2], [2.0, 1.0])}, "training step", "nats per token", lang="zh"),
        "draw_lines (chapter 11's cache)": lambda: transformer.draw_lines(
            {"without a cache": ([16, 32], [1.0, 2.0]), "with a key/value cache": ([16, 32], [1.0, 1.1])},
            "position of the generated token", "milliseconds per token", lang="zh"),
        "draw_lines (chapter 11's memory)": lambda: transformer.draw_lines(
            {"full attention": ([256, 512], [1.0, 4.0]), "tiled attention": ([256, 512], [0.5, 1.0])},
            "sequence length $S$", "MiB at the peak", logx=True, logy=True, lang="zh"),
        "draw_transformer_output_lengths": lambda: ed.draw_output_lengths(  # chapter 12's titles
            {s: [[25, 20, 1]] for s in ("sinusoidal", "learned", "rope", "alibi")}, 23,
            {s: f"{transformer.SCHEME_NAMES[s]}, seed 0" for s in ("sinusoidal", "learned", "rope", "alibi")}, lang="zh"),
    }
    untranslated = {}
    for name, draw in drawn.items():
        with collecting_untranslated() as missed:
            fig = draw()
        fig.savefig(io.BytesIO(), format="png", dpi=40)  # renders every text: a missing glyph raises
        plt.close(fig)
        if missed:
            untranslated[name] = missed
    print(json.dumps({"drawn": sorted(drawn), "untranslated": untranslated}))
"""


def test_every_chapter_figure_draws_in_chinese_with_every_label_translated_and_every_glyph_there():
    # A fresh interpreter, as in the other figure tests: the course style changes process-wide state,
    # and a glyph that mathtext cannot draw (Chinese beside a formula) is reported on stderr.
    result = run_python(DRAW_EVERY_CHAPTER_FIGURE_IN_CHINESE, timeout=240)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["untranslated"] == {}
    assert set(chapter_figures()) <= set(report["drawn"]), "a chapter figure this test does not draw in Chinese"
