"""Widgets that a reader can move: live in JupyterLab, and still live in the static HTML book.

Each widget is an ``anywidget.AnyWidget`` whose front-end is a plain ES module file beside it
(``playground.js``, ``alignment.js``): it computes in the page, so the built book needs no kernel,
and Node imports the same file in the tests to pin its numbers to PyTorch's. What both share to be
accessible (``a11y.js``, ``a11y.css``) is inlined into each by ``front_end.py``.
"""

from attention_course.widgets.alignment import AlignedSentence, AlignmentExplorer
from attention_course.widgets.live_translator import LiveTranslator
from attention_course.widgets.playground import AttentionPlayground, PlaygroundInputError, playground_attention, polar

__all__ = [
    "AlignedSentence",
    "AlignmentExplorer",
    "AttentionPlayground",
    "LiveTranslator",
    "PlaygroundInputError",
    "playground_attention",
    "polar",
]
