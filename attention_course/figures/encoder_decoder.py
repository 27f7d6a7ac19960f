"""Chapters 5 and 6's figures: the encoder–decoder without attention (fig. 7-22) and with it
(fig. 8-5), how C_汤姆 is composed (fig. 8-6), the RNN encoder–decoder (fig. 8-7), the computation
of the attention distribution (figs. 8-8 and 8-9), attention matrices, the toy corpus's lengths,
training curves and accuracy / BLEU by source length.

Every function returns the matplotlib figure it drew, its text in ``lang`` (English by default; see
:mod:`attention_course.figures.editions`); the sentences' words are data, drawn as given. Call
:func:`attention_course.plotting.use_course_style` first, for the Chinese labels. Chinese text never
goes inside ``$...$`` (mathtext has no CJK glyphs), so a symbol with a Chinese subscript such as
C_汤姆 is drawn by :func:`_subscripted` as three pieces of text; a translated label with Chinese
beside a formula is drawn by :func:`attention_course.figures.diagrams.chinese_beside_math`.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib import ticker
from matplotlib.patches import Rectangle

from attention_course.corpus import CLAUSE_JOINER, SentencePair
from attention_course.figures.diagrams import (
    KEY_COLOUR,
    OUTPUT_COLOUR,
    POOL_COLOUR,
    QUERY_COLOUR,
    VALUE_COLOUR,
    arrow,
    box,
    canvas,
    chinese_beside_math,
    vector_text,
)
from attention_course.figures.editions import in_every_language
from attention_course.i18n import N_, translator
from attention_course.seq2seq import LengthBucket, TrainingHistory

# Roles, the same in every diagram of chapters 5 and 6 (and as close as possible to chapter 4's):
SOURCE_COLOUR = "#eeeeee"  # grey: the English words x_j
ENCODER_COLOUR = KEY_COLOUR  # blue: the encoder and its states h_j (attention's keys and values)
DECODER_COLOUR = QUERY_COLOUR  # orange: the decoder and its states H_i (H_{i-1} is attention's query)
CONTEXT_COLOUR = POOL_COLOUR  # purple: the code C, the contexts C_i, and where weights are made
TARGET_COLOUR = OUTPUT_COLOUR  # red: the Chinese words y_i
WEIGHT_COLOUR = VALUE_COLOUR  # green: attention weights a_ij

MODEL_COLOURS = {"with attention": "#c0392b", "without attention": "#2e86c1"}
MODEL_MARKERS = {"with attention": "o", "without attention": "s"}

NOTES_SOURCE = ("Tom", "chase", "Jerry")
NOTES_TARGET = ("汤姆", "追逐", "杰瑞")

# The English text that the chapters pass in, which the figures translate when they draw (listed
# here for the catalog): the models' names (chapters 5, 6 and 6.2: ``draw_training_curves({"with
# attention": ...})``, ``names`` of ``draw_seed_bands``, and the panels "without attention, seed 0"
# of ``draw_output_lengths``, whose seed is filled in), the titles of ``draw_attention_matrices``
# (chapter 6) and of ``draw_length_distribution`` (chapter 5).
MODEL_NAMES = (N_("with attention"), N_("without attention"), N_("attention"),
               N_("attention, bidirectional encoder"))
TITLES = (N_("the notes' attention matrix"), N_("the notes (made up)"), N_("learned by the model"),
          N_("Source lengths of the 2000 generated pairs"))
# A panel title "<model name>, seed <n>" (chapter 6.2's) is translated as a model name and a seed.
_SEEDED_TITLE = re.compile(r"(?P<model>.+), seed (?P<seed>\d+)")


def _translated_title(tr, title: str) -> str:
    """``title``, English text a chapter passed in, in ``tr``'s language."""
    seeded = _SEEDED_TITLE.fullmatch(title)
    if seeded:
        return tr("{model}, seed {seed}").format(model=tr(seeded["model"]), seed=seeded["seed"])
    return tr(title)


def _subscripted(ax, x, y, base, subscript, rest="", fontsize=12, **kwargs):
    """Write ``base`` with ``subscript`` lowered after it, then ``rest``, starting at (x, y), left-aligned.

    For symbols like C_汤姆 whose subscript is Chinese, which mathtext cannot draw.
    Returns the last text artist.
    """
    first = ax.text(x, y, base, ha="left", va="baseline", fontsize=fontsize, fontstyle="italic", **kwargs)
    sub = ax.annotate(subscript, xy=(1, 0), xycoords=first, xytext=(0.5, -0.28 * fontsize),
                      textcoords="offset points", ha="left", va="baseline", fontsize=0.7 * fontsize, **kwargs)
    if not rest:
        return sub
    return ax.annotate(rest, xy=(1, 0), xycoords=sub, xytext=(1, 0.28 * fontsize), textcoords="offset points",
                       ha="left", va="baseline", fontsize=fontsize, **kwargs)


def _word_box(ax, x, y, width, height, symbol, word, colour, fontsize=11):
    """A box with a math ``symbol`` (e.g. ``$y_1$``) above a ``word`` (English or Chinese).

    Two separate texts: a string with any ``$...$`` in it is drawn wholly by mathtext, which has no CJK glyphs.
    """
    box(ax, x, y, width, height, "", colour)
    ax.text(x, y + 0.03, symbol, ha="center", va="bottom", fontsize=fontsize)
    ax.text(x, y - 0.03, word, ha="center", va="top", fontsize=fontsize)


# ---------------------------------------------------------------------------------------------
# Diagrams: figs. 7-22, 8-5, 8-6, 8-7, 8-8, 8-9.


@in_every_language
def draw_encoder_decoder(
    attention: bool = False,
    source: Sequence[str] = NOTES_SOURCE,
    target: Sequence[str] = NOTES_TARGET,
    lang: str = "en",
):
    """Fig. 7-22 (``attention=False``) or fig. 8-5 (``attention=True``), in the same layout.

    The encoder reads x_1 … x_m. Without attention it hands the decoder one code C, which every
    output step uses: y_i = f(C, y_1 … y_{i-1}). With attention every step i gets its own C_i, a
    different mixture of what the encoder read: y_i = f_1(C_i, y_1 … y_{i-1}). Returns the figure,
    its text in ``lang`` (the words of ``source`` and ``target`` drawn as given).
    """
    tr = translator(lang)
    m, n = len(source), len(target)
    step = 2.3
    enc_xs = [1.3 + 1.55 * j for j in range(m)]
    dec_xs = [enc_xs[-1] + 4.9 + step * i for i in range(n)]
    width = dec_xs[-1] + 1.6
    fig, ax = canvas(0.72 * width, 5.2, (0, width), (-0.55, 7.6))
    f_y, y_y, bus_y = 4.5, 6.6, 2.2

    # The encoder: the source words feed one box.
    enc_left, enc_right = enc_xs[0] - 0.75, enc_xs[-1] + 0.75
    for j, (x, word) in enumerate(zip(enc_xs, source), start=1):
        _word_box(ax, x, 0.75, 1.35, 0.95, f"$x_{j}$", word, SOURCE_COLOUR)
        arrow(ax, (x, 1.25), (x, bus_y - 0.48))
    box(ax, (enc_left + enc_right) / 2, bus_y, enc_right - enc_left, 0.95, tr("Encoder 编码器"), ENCODER_COLOUR,
         fontsize=12)
    ax.text((enc_left + enc_right) / 2, -0.05, tr("source $X$ (English)"), ha="center", va="top", fontsize=10,
            color="#555555")

    # The decoder: one step per output word, each feeding the next.
    dec_left, dec_right = dec_xs[0] - 0.95, dec_xs[-1] + 0.95
    ax.add_patch(Rectangle((dec_left, f_y - 0.6), dec_right - dec_left, 1.2, facecolor=DECODER_COLOUR, alpha=0.35,
                           edgecolor="#444444"))
    ax.text(dec_left - 0.1, f_y, tr("Decoder\n解码器"), ha="right", va="center", fontsize=12)
    for i, (x, word) in enumerate(zip(dec_xs, target), start=1):
        box(ax, x, f_y, 1.5, 0.8, "$f_1$" if attention else "$f$", DECODER_COLOUR, fontsize=12)
        arrow(ax, (x, f_y + 0.42), (x, y_y - 0.5))
        _word_box(ax, x, y_y, 1.4, 0.95, f"$y_{i}$", word, TARGET_COLOUR)
        if i < n:  # y_i is fed back into every later step
            arrow(ax, (x + 0.45, y_y - 0.5), (dec_xs[i] - 0.45, f_y + 0.42), colour="#888888", linestyle="--",
                   linewidth=1.1)
    ax.text((dec_left + dec_right) / 2, 7.3, tr("target $Y$ (Chinese)"), ha="center", fontsize=10, color="#555555")

    # What the encoder hands over runs along a line under the decoder and rises into every step.
    if attention:
        ax.plot([enc_right, dec_xs[-1]], [bus_y, bus_y], color="#2e6da4", linewidth=1.6)
        ax.text((enc_right + dec_left) / 2, bus_y - 0.15, tr("all encoder states\n$h_1, …, h_S$"), ha="center",
                va="top", fontsize=9.5, color="#2e6da4")
        for i, x in enumerate(dec_xs, start=1):
            arrow(ax, (x, bus_y), (x, 2.82), colour="#2e6da4")
            box(ax, x, 3.12, 0.95, 0.6, f"$C_{i}$", CONTEXT_COLOUR, fontsize=12)
            arrow(ax, (x, 3.42), (x, f_y - 0.42))
        ax.text(dec_right + 0.05, 3.12, tr("its own\nmixture\nper step"), ha="left", va="center", fontsize=9.5,
                color="#7d5ba6")
    else:
        cx = enc_right + 1.35
        arrow(ax, (enc_right, bus_y), (cx - 0.55, bus_y))
        box(ax, cx, bus_y, 1.1, 0.8, "$C$", CONTEXT_COLOUR, fontsize=14)
        ax.text(cx, bus_y - 0.5, tr("semantic code\n语义编码"), ha="center", va="top", fontsize=9.5)
        ax.plot([cx + 0.55, dec_xs[-1]], [bus_y, bus_y], color="#7d5ba6", linewidth=1.6)
        for x in dec_xs:
            arrow(ax, (x, bus_y), (x, f_y - 0.42), colour="#7d5ba6")
            ax.text(x + 0.1, 3.05, "$C$", ha="left", va="center", fontsize=11, color="#7d5ba6")
        ax.text((dec_left + dec_right) / 2, bus_y - 0.2, tr("the same $C$ at every step"), ha="center", va="top",
                fontsize=9.5, color="#7d5ba6")
    title = (tr("Encoder–decoder with attention: $y_i = f_1(C_i, y_1, …, y_{i-1})$") if attention
             else tr("Encoder–decoder without attention: $y_i = f(C, y_1, …, y_{i-1})$"))
    ax.set_title(title, fontsize=12)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


@in_every_language
def draw_context_composition(
    encodings: torch.Tensor,
    weights: torch.Tensor,
    context: torch.Tensor,
    source: Sequence[str] = NOTES_SOURCE,
    target_word: str = "汤姆",
    lang: str = "en",
):
    """Fig. 8-6: how the context of one target word is composed from the source words.

    encodings (S, d): f_2(x_j) for every source word; weights (S,): that target word's row of the
    attention matrix; context (d,): g of the weighted encodings, here their sum Σ_j a_j f_2(x_j).
    Returns the figure, its text in ``lang`` (the words drawn as given).
    """
    tr = translator(lang)
    num_words = len(source)
    if encodings.shape[0] != num_words or weights.shape != (num_words,) or context.shape != encodings.shape[1:]:
        raise ValueError(f"need encodings (S, d), weights (S,) and context (d,) for S = {num_words} words, got "
                         f"{tuple(encodings.shape)}, {tuple(weights.shape)}, {tuple(context.shape)}")
    row_gap = 1.35
    ys = [1.0 + row_gap * (num_words - 1 - j) for j in range(num_words)]
    centre_y = sum(ys) / num_words
    height = ys[0] + 1.4
    fig, ax = canvas(10.0, 0.62 * height + 0.6, (0, 15.2), (0, height))
    ax.text(1.0, ys[0] + 0.85, tr("source word"), ha="center", fontsize=10, color="#555555")
    ax.text(3.9, ys[0] + 0.85, tr("encoder: $f_2(x_j)$"), ha="center", fontsize=10, color="#555555")
    ax.text(7.4, ys[0] + 0.85, tr("weight $a_j$ × $f_2(x_j)$"), ha="center", fontsize=10, color="#555555")
    sum_x = 10.6
    for j, (y, word) in enumerate(zip(ys, source)):
        box(ax, 1.0, y, 1.5, 0.75, word, SOURCE_COLOUR, fontsize=12)
        arrow(ax, (1.75, y), (2.6, y))
        box(ax, 3.9, y, 2.5, 0.75, f"$f_2$({word}) = {vector_text(encodings[j])}", ENCODER_COLOUR, fontsize=10.5)
        arrow(ax, (5.15, y), (6.4, y))
        ax.text(5.75, y + 0.12, f"× {weights[j].item():.1f}", ha="center", va="bottom", fontsize=11,
                color="#1e7b34")
        product = weights[j] * encodings[j]
        box(ax, 7.4, y, 1.9, 0.75, vector_text(product, decimals=2), "white", fontsize=10.5)
        arrow(ax, (8.35, y), (sum_x - 0.45, centre_y + 0.25 * (y - centre_y) / row_gap))
    box(ax, sum_x, centre_y, 0.9, 0.9, "$g$\n(Σ)", CONTEXT_COLOUR, fontsize=11)
    arrow(ax, (sum_x + 0.45, centre_y), (sum_x + 1.1, centre_y))
    ax.add_patch(Rectangle((sum_x + 1.15, centre_y - 0.5), 3.35, 1.0, facecolor=CONTEXT_COLOUR, edgecolor="#444444"))
    _subscripted(ax, sum_x + 1.3, centre_y - 0.12, "C", target_word, f" = {vector_text(context, decimals=2)}", fontsize=12)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


@in_every_language
def draw_rnn_encoder_decoder(source: Sequence[str] = NOTES_SOURCE, target: Sequence[str] = NOTES_TARGET,
                             lang: str = "en"):
    """Fig. 8-7: fig. 7-22 with an RNN for the encoder and another for the decoder, unrolled in time.

    The encoder's state h_j has read x_1 … x_j; its last state is C, from which the decoder's first
    state H_0 is made. The decoder's state H_i has read y_1 … y_i (fed back one step late) and
    produces y_i. Chapter 6 adds attention between the two rows. Returns the figure, its text in
    ``lang`` (the words drawn as given).
    """
    tr = translator(lang)
    m, n = len(source), len(target)
    gap = 1.75
    enc_xs = [1.0 + gap * j for j in range(m)]
    dec_xs = [enc_xs[-1] + 3.3 + gap * i for i in range(n + 1)]  # H_0 … H_n
    width = dec_xs[-1] + 1.2
    fig, ax = canvas(0.72 * width, 4.8, (0, width), (0, 7.2))
    ax.text((enc_xs[0] + enc_xs[-1]) / 2, 4.0, tr("encoder 编码器"), ha="center", va="bottom", fontsize=10.5)
    for j, (x, word) in enumerate(zip(enc_xs, source), start=1):
        _word_box(ax, x, 1.0, 1.3, 0.95, f"$x_{j}$", word, SOURCE_COLOUR, fontsize=10.5)
        arrow(ax, (x, 1.45), (x, 2.9))
        box(ax, x, 3.3, 1.05, 0.8, f"$h_{j}$", ENCODER_COLOUR, fontsize=13)
        if j > 1:
            arrow(ax, (enc_xs[j - 2] + 0.53, 3.3), (x - 0.53, 3.3))
    # C is the encoder's last state; H_0 is made from it.
    arrow(ax, (enc_xs[-1] + 0.53, 3.3), (dec_xs[0] - 0.53, 3.3))
    ax.text((enc_xs[-1] + dec_xs[0]) / 2, 3.45, "$C = h_S$", ha="center", va="bottom", fontsize=11,
            color="#7d5ba6")
    previous = ["<bos>", *target[:-1]]
    for i, x in enumerate(dec_xs):
        box(ax, x, 3.3, 1.05, 0.8, f"$H_{i}$", DECODER_COLOUR, fontsize=13)
        if i == 0:
            ax.text(x, 2.75, tr("from $C$"), ha="center", va="top", fontsize=9.5, color="#555555")
            continue
        arrow(ax, (dec_xs[i - 1] + 0.53, 3.3), (x - 0.53, 3.3))
        if i > 1:
            _word_box(ax, x, 1.0, 1.3, 0.95, f"$y_{{{i - 1}}}$", previous[i - 1], SOURCE_COLOUR, fontsize=10.5)
        else:
            box(ax, x, 1.0, 1.3, 0.95, "<bos>", SOURCE_COLOUR, fontsize=10.5)
        arrow(ax, (x, 1.45), (x, 2.9))
        arrow(ax, (x, 3.7), (x, 5.15))
        _word_box(ax, x, 5.6, 1.3, 0.95, f"$y_{i}$", target[i - 1], TARGET_COLOUR, fontsize=10.5)
    ax.text(dec_xs[-1] + 0.2, 6.35, tr("decoder 解码器"), ha="right", va="bottom", fontsize=10.5)
    ax.set_title(tr("RNN encoder–decoder: $h_j$ = state after reading $x_j$, $H_i$ = state that writes $y_i$"),
                 fontsize=11.5)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


@in_every_language
def draw_attention_distribution(source: Sequence[str] = NOTES_SOURCE, target: Sequence[str] = NOTES_TARGET,
                                step: int = 3, lang: str = "en"):
    """Fig. 8-8: how attention weights are computed for output step ``step`` (1-based), in general.

    The decoder's previous state H_{i-1} is compared with every encoder state h_j by a function
    F(h_j, H_{i-1}); a softmax over j turns the comparisons into weights a_i1 … a_iLx; their
    weighted sum of the h_j is C_i, which step i reads to produce y_i. Returns the figure, its text
    in ``lang`` (the words drawn as given).
    """
    tr = translator(lang)
    m = len(source)
    if not 1 <= step <= len(target):
        raise ValueError(f"step must be between 1 and {len(target)}, got {step}")
    column = 2.6
    xs = [2.4 + column * j for j in range(m)]
    dec_x = xs[-1] + 4.0
    width = dec_x + 2.3
    fig, ax = canvas(0.7 * width, 6.0, (0, width), (-0.2, 9.4))
    i = step
    prev = f"H_{{{i - 1}}}"
    # Encoder row at the bottom.
    for j, (x, word) in enumerate(zip(xs, source), start=1):
        box(ax, x, 0.45, 1.3, 0.65, word, SOURCE_COLOUR, fontsize=10.5)
        arrow(ax, (x, 0.78), (x, 1.25))
        box(ax, x, 1.6, 1.0, 0.7, f"$h_{j}$", ENCODER_COLOUR, fontsize=12)
        if j > 1:
            arrow(ax, (xs[j - 2] + 0.5, 1.6), (x - 0.5, 1.6))
        arrow(ax, (x - 0.25, 1.95), (x - 0.25, 3.3))
        box(ax, x, 3.65, 2.1, 0.7, f"$F(h_{j}, {prev})$", CONTEXT_COLOUR, fontsize=11)
        arrow(ax, (x, 4.0), (x, 4.55))
    # The query H_{i-1} runs along a bus into every comparison.
    bus_y = 2.55
    box(ax, dec_x, bus_y, 1.3, 0.75, f"${prev}$", DECODER_COLOUR, fontsize=13)
    ax.text(dec_x, bus_y - 0.55, tr("decoder state\nbefore step {step}").format(step=i), ha="center", va="top",
            fontsize=9.5, color="#555555")
    ax.plot([xs[0] + 0.35, dec_x - 0.65], [bus_y, bus_y], color="#b9770e", linewidth=1.4)
    for x in xs:
        arrow(ax, (x + 0.35, bus_y), (x + 0.35, 3.3), colour="#b9770e")
    left, right = xs[0] - 1.1, xs[-1] + 1.1
    box(ax, (left + right) / 2, 4.9, right - left, 0.65, tr("softmax over $j$"), CONTEXT_COLOUR, fontsize=11)
    sum_y = 7.2
    for j, x in enumerate(xs, start=1):
        arrow(ax, (x, 5.23), (x, 5.6))
        box(ax, x, 5.95, 1.05, 0.65, f"$a_{{{i}{j}}}$", WEIGHT_COLOUR, fontsize=12)
        arrow(ax, (x, 6.28), ((left + right) / 2 + 0.25 * (x - (left + right) / 2) / column, sum_y - 0.4))
    ax.text(left - 0.1, 5.95, tr("weights"), ha="right", va="center", fontsize=9.5, color="#555555")
    centre = (left + right) / 2
    box(ax, centre, sum_y, 2.8, 0.75, f"$C_{i} = \\Sigma_j\\, a_{{{i}j}}\\, h_j$", CONTEXT_COLOUR, fontsize=11.5)
    # Step i of the decoder reads C_i (and H_{i-1}) and writes y_i.
    box(ax, dec_x, sum_y, 1.3, 0.75, f"$H_{i}$", DECODER_COLOUR, fontsize=13)
    arrow(ax, (centre + 1.4, sum_y), (dec_x - 0.65, sum_y))
    arrow(ax, (dec_x, bus_y + 0.38), (dec_x, sum_y - 0.38), colour="#b9770e")
    arrow(ax, (dec_x, sum_y + 0.38), (dec_x, 8.3))
    _word_box(ax, dec_x, 8.75, 1.3, 0.95, f"$y_{i}$", target[i - 1], TARGET_COLOUR, fontsize=10.5)
    ax.set_title(tr("Attention weights for output step i = {step}, which writes {word}").format(
        step=i, word=target[i - 1]), fontsize=12)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


@in_every_language
def draw_alignment_score(lang: str = "en"):
    """Fig. 8-9: how one weight a_ij is produced, with the additive F of this course.

    H_{i-1} and h_j are projected by W_q and W_k, added, squashed by tanh and reduced by w_v to one
    number e_ij = F(h_j, H_{i-1}); a softmax over all source positions j turns e_i1 … e_iLx into
    a_i1 … a_iLx. Returns the figure, its text in ``lang``.
    """
    tr = translator(lang)
    fig, ax = canvas(10.0, 4.3, (0, 15.5), (0, 6.6))
    box(ax, 1.2, 5.0, 1.6, 0.8, "$H_{i-1}$", DECODER_COLOUR, fontsize=13)
    box(ax, 1.2, 2.0, 1.6, 0.8, "$h_j$", ENCODER_COLOUR, fontsize=13)
    ax.text(1.2, 5.6, tr("query: decoder state\nbefore step i"), ha="center", va="bottom", fontsize=9, color="#555555")
    ax.text(1.2, 1.4, tr("encoder state\nafter reading $x_j$"), ha="center", va="top", fontsize=9, color="#555555")
    arrow(ax, (2.0, 5.0), (2.9, 5.0))
    box(ax, 3.9, 5.0, 1.9, 0.8, "$W_q H_{i-1}$", "white", fontsize=12)
    arrow(ax, (2.0, 2.0), (2.9, 2.0))
    box(ax, 3.9, 2.0, 1.9, 0.8, "$W_k h_j$", "white", fontsize=12)
    arrow(ax, (4.85, 5.0), (6.05, 3.75))
    arrow(ax, (4.85, 2.0), (6.05, 3.25))
    box(ax, 6.4, 3.5, 0.7, 0.7, "+", CONTEXT_COLOUR, fontsize=15)
    arrow(ax, (6.75, 3.5), (7.25, 3.5))
    box(ax, 7.85, 3.5, 1.2, 0.7, "tanh", CONTEXT_COLOUR, fontsize=12)
    arrow(ax, (8.45, 3.5), (8.95, 3.5))
    box(ax, 9.65, 3.5, 1.4, 0.7, "$w_v^\\top(\\cdot)$", CONTEXT_COLOUR, fontsize=12)
    arrow(ax, (10.35, 3.5), (10.85, 3.5))
    ax.text(11.0, 3.5, "$s_{ij}$", ha="left", va="center", fontsize=14)
    ax.text(8.75, 4.2, tr("$s_{ij} = F(h_j, H_{i-1})$, the additive score"), ha="center", va="bottom", fontsize=10,
            color="#7d5ba6")
    ax.add_patch(Rectangle((5.85, 2.9), 5.8, 1.2, facecolor="none", edgecolor="#7d5ba6", linestyle="--"))
    # All positions j = 1 … S go through the same network; softmax compares them.
    arrow(ax, (11.75, 3.5), (12.35, 3.5))
    box(ax, 13.5, 3.5, 2.1, 1.5, tr("softmax over\n$j = 1, …, S$"), CONTEXT_COLOUR, fontsize=11)
    arrow(ax, (13.5, 4.25), (13.5, 5.05))
    box(ax, 13.5, 5.45, 1.0, 0.7, "$a_{ij}$", WEIGHT_COLOUR, fontsize=13)
    ax.text(13.5, 2.55, tr("$s_{i1}, …, s_{iS}$\nfrom every $h_j$"), ha="center", va="top", fontsize=10,
            color="#555555")
    ax.set_title(tr("How one weight $a_{ij}$ is produced"), fontsize=12)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Attention matrices.


def _check_matrix(weights: torch.Tensor, source: Sequence[str], target: Sequence[str]) -> None:
    if weights.shape != (len(target), len(source)):
        raise ValueError(f"weights must be (T, S) = ({len(target)}, {len(source)}) for {len(target)} target and "
                         f"{len(source)} source words, got {tuple(weights.shape)}")


def _short(value: float) -> str:
    """A weight in at most two characters, for small heatmap cells: 1, .9, .3."""
    return "1" if value >= 0.95 else f"{value:.1f}".lstrip("0")


def _draw_matrix(ax, weights, source, target, true_alignment=None, annotate=True, fontsize=10, number=_short):
    image = ax.imshow(weights.detach().numpy(), cmap="Blues", vmin=0, vmax=1, aspect="auto")
    if annotate:
        for i in range(weights.shape[0]):
            for j in range(weights.shape[1]):
                value = weights[i, j].item()
                if value >= 0.05:
                    ax.text(j, i, number(value), ha="center", va="center",
                            fontsize=fontsize - 1.5, color="white" if value > 0.6 else "black")
    if true_alignment is not None:
        for i, j in (true_alignment > 0).nonzero().tolist():
            ax.add_patch(Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, facecolor="none", edgecolor="#e67e22",
                                   linewidth=1.8))
    ax.set_xticks(range(len(source)), source, rotation=60 if len(source) > 4 else 0,
                  ha="right" if len(source) > 4 else "center", fontsize=fontsize)
    ax.set_yticks(range(len(target)), target, fontsize=fontsize)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return image


@in_every_language
def draw_attention_matrices(
    matrices: Sequence[torch.Tensor],
    source: Sequence[str],
    target: Sequence[str],
    titles: Sequence[str],
    lang: str = "en",
):
    """Heatmaps of attention matrices for one sentence pair, side by side (e.g. the notes' and a model's).

    Each matrix is (T, S): row i is target word i's weights over the S source words. Target
    (Chinese) words label the rows, source (English) words the columns. ``titles`` are English,
    translated into ``lang`` with the rest of the figure's text.
    """
    tr = translator(lang)
    for matrix in matrices:
        _check_matrix(matrix, source, target)
    count = len(matrices)
    fig, axes = plt.subplots(1, count, figsize=(0.75 * len(source) * count + 1.6 * count + 0.8,
                                                 0.6 * len(target) + 1.7), squeeze=False, layout="constrained")
    for ax, matrix, title in zip(axes[0], matrices, titles):
        image = _draw_matrix(ax, matrix, source, target, fontsize=11, number=lambda value: f"{value:.2g}")
        ax.set_title(_translated_title(tr, title), fontsize=11)
        ax.set_xlabel(tr("source 源 (English)"))
    axes[0][0].set_ylabel(tr("target 目标 (Chinese)"))
    fig.colorbar(image, ax=axes[0].tolist(), fraction=0.04, pad=0.02, label="$a_{ij}$")
    return fig


@in_every_language
def draw_alignment(weights: torch.Tensor, pair: SentencePair, title: str = "", show_truth: bool = True,
                   lang: str = "en"):
    """A learned alignment: the attention weights (T, S) of one translated sentence pair as a heatmap.

    With ``show_truth`` the generator's own word alignment (``pair.alignment_matrix()``) is outlined
    in orange, so the reader can see where the model's weight lands on the right source word. The
    title is ``title`` (English, translated into ``lang``) or else the English sentence itself.
    """
    tr = translator(lang)
    _check_matrix(weights, pair.source, pair.target)
    num_target, num_source = weights.shape
    fig, ax = plt.subplots(figsize=(0.36 * num_source + 2.4, 0.33 * num_target + 1.9))
    image = _draw_matrix(ax, weights, pair.source, pair.target,
                         pair.alignment_matrix() if show_truth else None, annotate=num_source <= 14, fontsize=10)
    ax.set_xlabel(tr("source 源 (English)"))
    ax.set_ylabel(tr("target 目标 (Chinese)"))
    ax.set_title(_translated_title(tr, title) if title else pair.source_text, fontsize=11)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="$a_{ij}$")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# The corpus, training, and results by length.


@in_every_language
def draw_length_distribution(pairs: Sequence[SentencePair], title: str = "", lang: str = "en"):
    """A histogram of source lengths (English tokens) of ``pairs``, stacked by number of clauses.
    Returns the figure, its text in ``lang`` (``title``, English, translated too)."""
    tr = translator(lang)
    joiner = CLAUSE_JOINER[0]
    by_clauses: dict[int, list[int]] = {}
    for pair in pairs:
        by_clauses.setdefault(pair.source.count(joiner) + 1, []).append(len(pair.source))
    longest = max(len(pair.source) for pair in pairs)
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    counts = sorted(by_clauses)
    colours = ["#a9cbe8", "#5dade2", "#1f618d", "#154360"]
    ax.hist([by_clauses[c] for c in counts], bins=[b - 0.5 for b in range(1, longest + 2)], stacked=True,
            color=[colours[k % len(colours)] for k in range(len(counts))],
            label=[(tr("{count} clauses") if c > 1 else tr("{count} clause")).format(count=c) for c in counts])
    ax.set_xlabel(tr("source length (English tokens)"))
    ax.set_ylabel(tr("sentences"))
    ax.set_xlim(0.5, longest + 0.5)
    ax.legend(fontsize=9)
    ax.set_title(_translated_title(tr, title) if title else tr("{count} sentence pairs").format(count=len(pairs)),
                 fontsize=11)
    fig.tight_layout()
    return fig


@in_every_language
def draw_training_curves(histories: Mapping[str, TrainingHistory], lang: str = "en"):
    """Two panels: every step's training loss, and held-out exact-match accuracy at each log point.

    ``histories`` is {model name: history}, the names English (``MODEL_NAMES``), drawn in ``lang``
    with the rest of the figure's text."""
    tr = translator(lang)
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.4, 3.1))
    for name, history in histories.items():
        colour = MODEL_COLOURS.get(name)
        label = tr(name)
        left.plot(range(1, len(history.step_losses) + 1), history.step_losses, color=colour, linewidth=1, label=label)
        right.plot(history.steps, history.accuracies, color=colour, marker=MODEL_MARKERS.get(name, "o"),
                   markersize=4, label=label)
    left.set_yscale("log")
    left.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 3.0)))
    left.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    left.yaxis.set_minor_formatter(ticker.NullFormatter())
    left.set_xlabel(tr("training step"))
    left.set_ylabel(tr("training loss (cross-entropy)"))
    right.set_xlabel(tr("training step"))
    right.set_ylabel(tr("held-out exact match"))
    right.set_ylim(-0.03, 1.03)
    right.set_xlim(left=0)
    for ax in (left, right):
        ax.grid(alpha=0.3)
    if len(histories) > 1:
        right.legend(fontsize=9)
    fig.tight_layout()
    return fig


def _plot_buckets(ax, results: Mapping[str, Sequence[LengthBucket]], scale: float, tr):
    labels = [bucket.label for bucket in next(iter(results.values()))]
    for name, buckets in results.items():
        if [bucket.label for bucket in buckets] != labels:
            raise ValueError("every model must be scored on the same length buckets")
        ax.plot(range(len(buckets)), [scale * bucket.score for bucket in buckets], marker=MODEL_MARKERS.get(name, "o"),
                color=MODEL_COLOURS.get(name), linewidth=2, label=tr(name))
    sizes = [bucket.sentences for bucket in next(iter(results.values()))]
    ax.set_xticks(range(len(labels)), [f"{label}\n({n})" for label, n in zip(labels, sizes)], fontsize=9)
    ax.set_xlabel(tr("source length in tokens (sentences in the bucket)"))
    ax.grid(alpha=0.3)


@in_every_language
def draw_accuracy_by_length(results: Mapping[str, Sequence[LengthBucket]], lang: str = "en"):
    """Exact-match accuracy (in %) per bucket of source length, one line per model ({English model
    name: buckets}). Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    _plot_buckets(ax, results, 100, tr)
    ax.set_ylabel(tr("held-out exact match (%)"))
    ax.set_ylim(-3, 103)
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


@in_every_language
def draw_length_experiment(
    accuracy: Mapping[str, Sequence[LengthBucket]], bleu: Mapping[str, Sequence[LengthBucket]], lang: str = "en"
):
    """As Bahdanau et al. (2015), fig. 2: sentence accuracy (%) and BLEU against source length, two panels,
    one line per model ({English model name: buckets}). Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.7))
    _plot_buckets(left, accuracy, 100, tr)
    left.set_ylabel(tr("exact-match accuracy (%)"))
    left.set_ylim(-3, 103)
    left.set_title(tr("sentence accuracy"), fontsize=11)
    _plot_buckets(right, bleu, 1, tr)
    right.set_ylabel("BLEU")
    right.set_ylim(-3, 103)
    right.set_title(tr("BLEU (sacrebleu, words as tokens)"), fontsize=11)
    left.legend(fontsize=9, loc="lower left")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 6.2: several seeds, sentences longer than any in training.

SEED_COLOURS = {"plain": "#2e86c1", "attention": "#c0392b", "bidirectional": "#8e44ad"}
SEED_MARKERS = {"plain": "s", "attention": "o", "bidirectional": "^"}


@in_every_language
def draw_seed_bands(
    labels: Sequence[str],
    exact: Mapping[str, Sequence[Sequence[float]]],
    bleu: Mapping[str, Sequence[Sequence[float]]],
    names: Mapping[str, str] | None = None,
    lang: str = "en",
):
    """Exact match (%) and BLEU per length bucket: the mean over seeds as a line, min–max as a band.

    ``exact[model]`` and ``bleu[model]`` hold one list of per-bucket scores per seed (exact match in
    0–1, BLEU in 0–100); ``labels`` name the buckets (numbers, drawn as given); ``names`` gives each
    model's legend entry (English, ``MODEL_NAMES``, translated into ``lang`` with the figure's text).
    """
    tr = translator(lang)
    names = names or {}
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.7))
    for ax, table, scale, title in ((axes[0], exact, 100, tr("sentence accuracy (%)")), (axes[1], bleu, 1, "BLEU")):
        for model, runs in table.items():
            values = torch.tensor(runs, dtype=torch.float64) * scale  # (seeds, buckets)
            if values.shape[1] != len(labels):
                raise ValueError(f"{model}: {values.shape[1]} buckets, but {len(labels)} labels")
            x = range(len(labels))
            colour = SEED_COLOURS.get(model)
            ax.fill_between(x, values.min(0).values, values.max(0).values, color=colour, alpha=0.2, linewidth=0)
            ax.plot(x, values.mean(0), color=colour, marker=SEED_MARKERS.get(model, "o"), linewidth=2,
                    label=tr("{model} ({seeds} seeds)").format(model=tr(names.get(model, model)),
                                                               seeds=values.shape[0]))
        ax.set_xticks(range(len(labels)), labels, fontsize=9)
        ax.set_xlabel(tr("source length in tokens"))
        ax.set_ylabel(title)
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


@in_every_language
def draw_output_lengths(
    per_model: Mapping[str, Sequence[Sequence[int]]], longest_train_target: int, names: Mapping[str, str] | None = None,
    lang: str = "en",
):
    """Output length against reference length on the extrapolation set, one panel per model.

    ``per_model[key]`` holds (reference length, output length, wrote <eos>) per sentence, for a key
    such as "plain" or "attention:3" (model, then a label); ``names[key]`` titles its panel. The
    diagonal is a right-length output; the dashed line, the longest target seen in training; a
    cross marks an output that never wrote ``<eos>`` (it ran to the length limit). The titles are
    English, a model name or "<model name>, seed <n>", translated into ``lang`` with the figure's text.
    """
    tr = translator(lang)
    names = names or {}
    fig, axes = plt.subplots(1, len(per_model), figsize=(3.4 * len(per_model) + 0.6, 3.5), sharey=True, squeeze=False)
    top = max(max(row[0], row[1]) for rows in per_model.values() for row in rows) + 3
    for ax, (model, rows) in zip(axes[0], per_model.items()):
        colour = SEED_COLOURS.get(model.split(":")[0])  # "attention:3" is drawn in attention's colour
        ended = [row for row in rows if row[2]]
        running = [row for row in rows if not row[2]]
        ax.scatter([r[0] for r in ended], [r[1] for r in ended], s=12, alpha=0.35, color=colour,
                   label=tr("wrote <eos>"))
        if running:
            ax.scatter([r[0] for r in running], [r[1] for r in running], s=16, marker="x", color="black",
                       label=tr("no <eos>"))
        ax.plot([0, top], [0, top], color="grey", linewidth=1, label=tr("right length"))
        ax.axhline(longest_train_target, color="black", linestyle="--", linewidth=1,
                   label=tr("longest training target ({length})").format(length=longest_train_target))
        ax.set_xlim(longest_train_target - 2, top)
        ax.set_ylim(0, top)
        ax.set_title(_translated_title(tr, names.get(model, model)), fontsize=10)
        ax.set_xlabel(tr("reference length (words)"))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(tr("output length (words)"))
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


@in_every_language
def draw_long_attention(
    weights: torch.Tensor, source: Sequence[str], output: Sequence[str], longest_train_target: int, title: str = "",
    lang: str = "en",
):
    """The attention (rows: output words, then ``<eos>``) of one translation of a long sentence.

    ``weights`` is (len(output) + 1, S) when the decoder wrote ``<eos>`` (its row comes last), or
    (len(output), S). Source words that start a clause ("and") are marked on the x-axis; the dashed
    line is drawn after the output word that matches the longest training target's length. Returns
    the figure, its text in ``lang`` (``title``, English, translated too).
    """
    tr = translator(lang)
    rows = list(output) + (["<eos>"] if weights.shape[0] == len(output) + 1 else [])
    _check_matrix(weights, source, rows)
    fig, ax = plt.subplots(figsize=(0.2 * len(source) + 2.6, 0.2 * len(rows) + 1.8))
    image = _draw_matrix(ax, weights, source, rows, annotate=False, fontsize=7)
    ax.axhline(longest_train_target - 0.5, color="#e67e22", linestyle="--", linewidth=1.5)
    for j, word in enumerate(source):
        if word == CLAUSE_JOINER[0]:
            ax.axvline(j, color="grey", linewidth=0.6, alpha=0.6)
    ax.set_xlabel(tr("source 源 (English)"))
    ax.set_ylabel(tr("output (Chinese)"))
    if title:
        ax.set_title(_translated_title(tr, title), fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="$a_{ij}$")
    fig.tight_layout()
    return fig
