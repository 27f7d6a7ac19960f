"""The live explorer: the reader's own sentence, translated in the page by a chapter's trained model.

    LiveTranslator(model, corpus)      # in chapter 6 (a Seq2Seq) or chapter 10 (a Transformer), after training

With chapter 10's Transformer the explorer shows every attention map of the model reading the reader's
sentence: the reader chooses which (the encoder's self-attention, the decoder's, or cross-attention), the
layer and the head (or the heads averaged).

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
from attention_course.transformer import Transformer
from attention_course.widgets import front_end

__all__ = ["LiveTranslator"]


class LiveTranslator(anywidget.AnyWidget):
    """A sentence box, the model's translation as it is generated, each step's attention, and "what if"
    (hide a source word from attention, make a step write another word). For a Transformer, a map per
    kind of attention, layer and head; hiding a word takes it out of cross-attention only."""

    _esm = front_end.module("live_translator.js")
    _css = front_end.stylesheet("live_translator.css")

    model_file = traitlets.Unicode(read_only=True).tag(sync=True)
    source_words = traitlets.List(read_only=True).tag(sync=True)
    example = traitlets.Unicode("Tom chase Jerry").tag(sync=True)
    # "auto" (the page's language: Chinese in the book's 中文 edition), "en" or "zh".
    language = traitlets.Unicode("auto").tag(sync=True)
    messages = traitlets.Dict(read_only=True).tag(sync=True)
    # A Transformer's maps: {"encoder": layers, "decoder": layers, "heads": heads}; empty for chapter 6's
    # model, whose one attention has one map.
    attention_maps = traitlets.Dict(read_only=True).tag(sync=True)

    def __init__(self, model: Seq2Seq | Transformer, corpus: ToyTranslationCorpus, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.set_trait("model_file", write_export(model, corpus))
        if isinstance(model, Transformer):
            self.set_trait("attention_maps", {"encoder": len(model.encoder_layers), "decoder": len(model.decoder_layers),
                                              "heads": model.decoder_layers[0].self_attention.num_heads})
        self.set_trait("source_words", [w for w in corpus.source_vocab.tokens if w not in Vocab.SPECIAL_TOKENS])
        self.set_trait("messages", front_end.messages("live_translator.js"))

    @traitlets.validate("language")
    def _check_language(self, proposal):
        return front_end.check_language(proposal["value"])
