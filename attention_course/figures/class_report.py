"""The class report's pictures (``attention-course report``): the score distribution, each test's pass
rate, and the CPU time of the submissions. Each returns an SVG drawing (matplotlib's object API: no
pyplot, no backend, no global state), deterministic (no date, fixed ids), with its text in ``lang`` and as paths, so the page needs no font to show the Chinese."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Iterator, Sequence

import matplotlib
from matplotlib import font_manager
from matplotlib.figure import Figure

from attention_course.i18n import language_of, translator
from attention_course.plotting import MISSING_GLYPH_MESSAGE, cjk_font_file

BAR = "#1f77b4"
WEAK = "#d62728"


@contextlib.contextmanager
def _style(lang: str) -> Iterator[None]:
    """matplotlib's defaults and the course's look, whatever this process set before, and restored after: the
    same grades give the same drawing. Chinese text gets the course's CJK font; a character no font has
    fails (as in the book), never a box."""
    with matplotlib.rc_context(), warnings.catch_warnings():
        matplotlib.rcdefaults()
        families = ["DejaVu Sans"]
        if language_of(lang) != "en":
            path = cjk_font_file()
            font_manager.fontManager.addfont(str(path))
            families.append(font_manager.FontProperties(fname=str(path)).get_name())
        matplotlib.rcParams.update({"font.family": families, "axes.spines.top": False, "axes.spines.right": False,
                                    "svg.hashsalt": "attention-course", "svg.fonttype": "path"})
        warnings.filterwarnings("error", message=MISSING_GLYPH_MESSAGE, category=UserWarning)
        yield


def _svg(fig) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = out.getvalue()
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.DOTALL)  # (RDF boilerplate)
    return text


def draw_score_distribution(scores: Sequence[float], max_score: float, lang: str = "en") -> str:
    """A histogram of the students' scores (points, 0 to ``max_score``), one bar per point when the
    assignment has at most 40 points, else 20 bars."""
    with _style(lang):
        tr = translator(lang)
        fig = Figure(figsize=(6.4, 2.8), layout="constrained")
        ax = fig.add_subplot()
        top = max(max_score, max(scores, default=0.0), 1.0)
        bins = int(round(top)) + 1 if top <= 40 else 20
        edges = [i - 0.5 for i in range(bins + 1)] if top <= 40 else [top * i / bins for i in range(bins + 1)]
        ax.hist(scores, bins=edges, color=BAR, edgecolor="white")
        ax.set_xlabel(tr("score (points of {total:g})").format(total=max_score))
        ax.set_ylabel(tr("students"))
        ax.yaxis.get_major_locator().set_params(integer=True)
        return _svg(fig)


def draw_pass_rates(names: Sequence[str], rates: Sequence[float], weak: Sequence[bool], lang: str = "en") -> str:
    """One horizontal bar per test: the share of students who passed it; a test whose discrimination is
    weak or negative (``weak``) in red."""
    with _style(lang):
        tr = translator(lang)
        fig = Figure(figsize=(6.4, 0.45 * len(names) + 1.0), layout="constrained")
        ax = fig.add_subplot()
        positions = range(len(names))
        ax.barh(list(positions), [100 * r for r in rates], color=[WEAK if w else BAR for w in weak])
        ax.set_yticks(list(positions), list(names))
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel(tr("passed (% of the students graded)"))
        for position, rate in zip(positions, rates):
            inside = rate >= 0.85  # (a long bar carries its label inside, in white)
            ax.text(100 * rate + (-1 if inside else 1), position, f"{100 * rate:.0f}%", va="center", fontsize=8,
                    ha="right" if inside else "left", color="white" if inside else "black")
        return _svg(fig)


def draw_cpu_seconds(seconds: Sequence[float], lang: str = "en") -> str:
    """A histogram of the CPU seconds each submission took in the sandbox."""
    with _style(lang):
        tr = translator(lang)
        fig = Figure(figsize=(6.4, 2.4), layout="constrained")
        ax = fig.add_subplot()
        ax.hist(seconds, bins=20, color=BAR, edgecolor="white")
        ax.set_xlabel(tr("CPU seconds in the sandbox"))
        ax.set_ylabel(tr("submissions"))
        ax.yaxis.get_major_locator().set_params(integer=True)
        return _svg(fig)
