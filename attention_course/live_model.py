"""A chapter's trained model, exported for the page: the live explorer runs it in the reader's browser.

``export_seq2seq(model, corpus)`` turns chapter 6's trained ``Seq2Seq`` (a one-directional GRU encoder
and the ``AttentionDecoder``) into one small file: the two vocabularies, the sizes, and every weight as
float32, base64-encoded in a classic script::

    (globalThis.attentionCourseLiveModels ||= {})["live-model-<hash>.js"] = {format: 1, ..., data: "<base64>"};

``export_transformer(model, corpus)`` does the same for chapter 10's trained ``Transformer`` (kind
``"transformer"``): its sizes, where its layer norms sit (pre-LN or post-LN), its position scheme, and
every tensor of its state dict under its state-dict name.

A script, not a binary fetched with ``fetch``: a page opened from ``file://`` may load a script but not
fetch a file. The page's engine (``widgets/live_engine.js``) reads it and decodes greedily, exactly as
``Seq2Seq.greedy_decode`` or ``Transformer.greedy_decode`` does; tests/test_live_model.py and
tests/test_live_transformer.py run that engine in Node on the exported file and compare it with PyTorch,
token for token and attention map by attention map.

``write_export`` writes the file into ``export_dir()`` (``_build/.live_models``, beside the model cache),
named by a hash of its content; the book's ``live_models`` extension (book/_ext/live_models.py) copies
the files that a page names into the build's ``_static/live/``, with the engine.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import torch

from attention_course.corpus import ToyTranslationCorpus
from attention_course.seq2seq import AttentionDecoder, Seq2Seq
from attention_course.transformer import Transformer

__all__ = ["FORMAT", "GLOBAL_NAME", "export_seq2seq", "export_transformer", "export_text", "write_export",
           "export_dir", "read_export"]

FORMAT = 1
GLOBAL_NAME = "attentionCourseLiveModels"
_PACKAGE = Path(__file__).resolve().parent

# (name in the file, path in the state dict): every tensor the engine reads, in this order.
_TENSORS = (
    ("encoder.embedding", "encoder.embedding.weight"),
    ("encoder.w_ih", "encoder.rnn.weight_ih_l0"),
    ("encoder.w_hh", "encoder.rnn.weight_hh_l0"),
    ("encoder.b_ih", "encoder.rnn.bias_ih_l0"),
    ("encoder.b_hh", "encoder.rnn.bias_hh_l0"),
    ("decoder.embedding", "decoder.embedding.weight"),
    ("decoder.init.weight", "decoder.init_state.weight"),
    ("decoder.init.bias", "decoder.init_state.bias"),
    ("decoder.W_q", "decoder.score.W_q.weight"),
    ("decoder.W_k", "decoder.score.W_k.weight"),
    ("decoder.w_v", "decoder.score.w_v.weight"),
    ("decoder.w_ih", "decoder.cell.weight_ih"),
    ("decoder.w_hh", "decoder.cell.weight_hh"),
    ("decoder.b_ih", "decoder.cell.bias_ih"),
    ("decoder.b_hh", "decoder.cell.bias_hh"),
    ("decoder.output.weight", "decoder.output.weight"),
    ("decoder.output.bias", "decoder.output.bias"),
)


def export_seq2seq(model: Seq2Seq, corpus: ToyTranslationCorpus) -> dict:
    """The model as the page reads it: {format, kind, sizes, source_vocab, target_vocab, tensors, data}.

    ``tensors`` is [[name, shape, offset], ...] (offset in float32 elements into ``data``), ``data`` the
    base64 of every tensor's float32 values, little-endian, row-major. Only the model of chapter 6 is
    exported: an attention decoder over a one-directional encoder (raises ``ValueError`` otherwise).
    """
    if not isinstance(model.decoder, AttentionDecoder) or model.encoder.bidirectional:
        raise ValueError("the live explorer runs chapter 6's model: an AttentionDecoder over a one-directional encoder")
    state = model.state_dict()
    tensors, chunks, offset = [], [], 0
    for name, key in _TENSORS:
        values = state[key].detach().to(torch.float32).contiguous().cpu()
        tensors.append([name, list(values.shape), offset])
        chunks.append(values.numpy().astype("<f4").tobytes())
        offset += values.numel()
    return {
        "format": FORMAT,
        "kind": "seq2seq-attention",
        "sizes": {
            "embed": model.encoder.embedding.embedding_dim,
            "hidden": model.encoder.hidden_dim,
            "attention": model.decoder.score.W_q.out_features,
        },
        "special": {"pad": 0, "bos": 1, "eos": 2, "unk": 3},
        "source_vocab": list(corpus.source_vocab.tokens),
        "target_vocab": list(corpus.target_vocab.tokens),
        "tensors": tensors,
        "data": base64.b64encode(b"".join(chunks)).decode("ascii"),
    }


# The position schemes the page's engine computes: added to the embeddings, or none. RoPE and ALiBi
# (inside every self-attention's scores) it does not.
_LIVE_POSITIONS = ("none", "sinusoidal", "learned")


def export_transformer(model: Transformer, corpus: ToyTranslationCorpus) -> dict:
    """Chapter 10's model as the page reads it: {format, kind: "transformer", sizes, special, source_vocab,
    target_vocab, tensors, data}, ``tensors`` and ``data`` as in ``export_seq2seq``, one entry per tensor of
    ``model.state_dict()`` under its own name (``encoder_layers.0.self_attention.W_q.weight``, ...).

    ``sizes`` holds d_model, the heads, the layers of each stack, d_ff, ``norm_first`` (pre-LN, with one more
    LN closing each stack, or post-LN), ``positions`` and, for the learned table, its ``max_length``. Raises
    ``ValueError`` for RoPE and ALiBi, which the engine does not compute.
    """
    if model.positions not in _LIVE_POSITIONS:
        raise ValueError(f"the live explorer runs a Transformer with positions {', '.join(_LIVE_POSITIONS)}; "
                         f"this one has {model.positions!r}")
    tensors, chunks, offset = [], [], 0
    for key, values in model.state_dict().items():
        values = values.detach().to(torch.float32).contiguous().cpu()
        tensors.append([key, list(values.shape), offset])
        chunks.append(values.numpy().astype("<f4").tobytes())
        offset += values.numel()
    first = model.encoder_layers[0]
    sizes = {
        "d_model": model.d_model,
        "heads": first.self_attention.num_heads,
        "encoder_layers": len(model.encoder_layers),
        "decoder_layers": len(model.decoder_layers),
        "d_ff": first.feed_forward.linear1.out_features,
        "norm_first": model.norm_first,
        "positions": model.positions,
    }
    if model.positions == "learned":
        sizes["max_length"] = model.source_positions.table.num_embeddings
    return {
        "format": FORMAT,
        "kind": "transformer",
        "sizes": sizes,
        "special": {"pad": 0, "bos": 1, "eos": 2, "unk": 3},
        "source_vocab": list(corpus.source_vocab.tokens),
        "target_vocab": list(corpus.target_vocab.tokens),
        "tensors": tensors,
        "data": base64.b64encode(b"".join(chunks)).decode("ascii"),
    }


def export_text(exported: dict, name: str) -> str:
    """The script that registers ``exported`` under ``name`` in ``globalThis.attentionCourseLiveModels``."""
    body = json.dumps(exported, ensure_ascii=False, separators=(",", ":"))
    return f"(globalThis.{GLOBAL_NAME} = globalThis.{GLOBAL_NAME} || {{}})[{json.dumps(name)}] = {body};\n"


def read_export(text: str) -> tuple[str, dict]:
    """(name, exported) from a file ``export_text`` wrote; the inverse, for tests and the bench."""
    head, _, body = text.partition("] = ")
    return json.loads(head.rsplit("[", 1)[1]), json.loads(body.rstrip().rstrip(";"))


def export_dir() -> Path:
    """Where the chapters write their exports for the build (``_build/.live_models``, or
    ``ATTENTION_COURSE_LIVE_MODELS``), read by book/_ext/live_models.py."""
    setting = os.environ.get("ATTENTION_COURSE_LIVE_MODELS", "")
    return Path(setting) if setting else _PACKAGE.parent / "_build" / ".live_models"


def write_export(model: Seq2Seq | Transformer, corpus: ToyTranslationCorpus, folder: Path | None = None) -> str:
    """Export ``model`` (chapter 6's ``Seq2Seq`` or chapter 10's ``Transformer``) into ``folder`` (default
    ``export_dir()``) and return the file's name, ``live-model-<hash of its content>.js``: a page names the
    exact weights it was built with."""
    exported = export_transformer(model, corpus) if isinstance(model, Transformer) else export_seq2seq(model, corpus)
    digest = hashlib.sha256(json.dumps(exported, sort_keys=True).encode()).hexdigest()[:16]
    name = f"live-model-{digest}.js"
    folder = export_dir() if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if not path.is_file():
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(export_text(exported, name), encoding="utf-8")
        os.replace(partial, path)
    return name
