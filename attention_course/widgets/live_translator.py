"""The live explorer: the reader's own sentence, translated in the page by chapter 6's trained model.

    LiveTranslator(model, corpus)      # in chapter 6, after training

The widget exports the model (``attention_course.live_model.write_export``) into the build's folder of
live models and names the file in its ``model_file``; the book copies it into ``_static/live/`` with
the engine (book/_ext/live_models.py). The page holds only the widget's interface and the English
vocabulary: the engine and the weights load when the reader first focuses the sentence box or presses
Translate (``live_translator.js``).
"""

from __future__ import annotations

from typing import Any

import anywidget
import traitlets

from attention_course.corpus import ToyTranslationCorpus, Vocab
from attention_course.live_model import write_export
from attention_course.seq2seq import Seq2Seq
from attention_course.widgets import front_end

__all__ = ["LiveTranslator"]


class LiveTranslator(anywidget.AnyWidget):
    """A sentence box, the model's translation as it is generated, each step's attention, and "what if"
    (hide a source word from attention, make a step write another word)."""

    _esm = front_end.module("live_translator.js")
    _css = front_end.stylesheet("live_translator.css")

    model_file = traitlets.Unicode(read_only=True).tag(sync=True)
    source_words = traitlets.List(read_only=True).tag(sync=True)
    example = traitlets.Unicode("Tom chase Jerry").tag(sync=True)
    # "auto" (the page's language: Chinese in the book's 中文 edition), "en" or "zh".
    language = traitlets.Unicode("auto").tag(sync=True)
    messages = traitlets.Dict(read_only=True).tag(sync=True)

    def __init__(self, model: Seq2Seq, corpus: ToyTranslationCorpus, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.set_trait("model_file", write_export(model, corpus))
        self.set_trait("source_words", [w for w in corpus.source_vocab.tokens if w not in Vocab.SPECIAL_TOKENS])
        self.set_trait("messages", front_end.messages("live_translator.js"))

    @traitlets.validate("language")
    def _check_language(self, proposal):
        return front_end.check_language(proposal["value"])
