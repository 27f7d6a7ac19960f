"""Train a chapter's model once per build: an on-disk cache of trained ``Seq2Seq`` models.

Chapters 5, 6 and 6.2 train the same seed-0 models (the plain model of chapter 5, the attention
model of chapter 6). ``trained_model`` trains on a miss and stores the weights and the
``TrainingHistory``; a later page, or the next build, loads them instead of training again.

The key is the whole recipe: the corpus's settings, the builder (``build_model`` of chapters 5 and 6,
or chapter 10's ``build_transformer``) and its and ``train``'s arguments, the torch version, and a
hash of the sources the result depends on (for ``build_model``: ``seq2seq.py``, ``corpus.py``,
``attention.py``; a Transformer's also on ``multi_head.py``, ``positions.py`` and ``transformer.py``).
Change any of them and the cache misses, so a cached model is always the model
the current code would train (on this machine: training runs on one thread, and the same seed gives
the same weights). The cache lives in ``_build/.model_cache/`` (ignored by git, removed with the
build); ``ATTENTION_COURSE_MODEL_CACHE`` names another folder, and ``off`` disables it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from attention_course.corpus import ToyTranslationCorpus
from attention_course.seq2seq import TrainingHistory, build_model, train
from attention_course.transformer import build_transformer

__all__ = ["trained_model", "cache_key", "cache_dir"]

_PACKAGE = Path(__file__).resolve().parent
_SOURCES = {  # what each builder's trained weights depend on
    build_model: ("seq2seq.py", "corpus.py", "attention.py"),
    build_transformer: ("seq2seq.py", "corpus.py", "attention.py", "multi_head.py", "attention_variants.py",
                        "positions.py", "transformer.py"),
}


def cache_dir() -> Path | None:
    """The cache folder, or None when ``ATTENTION_COURSE_MODEL_CACHE=off``."""
    setting = os.environ.get("ATTENTION_COURSE_MODEL_CACHE", "")
    if setting.lower() == "off":
        return None
    return Path(setting) if setting else _PACKAGE.parent / "_build" / ".model_cache"


def _corpus_settings(corpus: ToyTranslationCorpus) -> dict:
    return {
        "train": len(corpus.train_pairs),
        "held_out": len(corpus.held_out_pairs),
        "seed": corpus.seed,
        "min_clauses": corpus.min_clauses,
        "max_clauses": corpus.max_clauses,
        # The pairs themselves, hashed: two corpora with the same settings are the same corpus.
        "pairs": hashlib.sha256(
            "\n".join(str(pair) for pair in corpus.train_pairs + corpus.held_out_pairs).encode()
        ).hexdigest()[:16],
    }


def cache_key(corpus: ToyTranslationCorpus, model_kwargs: dict, train_kwargs: dict,
              build: Callable[..., nn.Module] = build_model) -> str:
    """A hash of everything the trained weights depend on."""
    sources = hashlib.sha256()
    for name in _SOURCES[build]:
        sources.update((_PACKAGE / name).read_bytes())
    recipe = {
        "corpus": _corpus_settings(corpus),
        # chapters 5 and 6's keys stay what they were before a second builder existed
        **({} if build is build_model else {"build": build.__name__}),
        "model": model_kwargs,
        "train": train_kwargs,
        "torch": torch.__version__,
        "sources": sources.hexdigest(),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:24]


def trained_model(
    corpus: ToyTranslationCorpus, *, model_kwargs: dict | None = None,
    build: Callable[..., nn.Module] = build_model, **train_kwargs
) -> tuple[nn.Module, TrainingHistory]:
    """``build(corpus, **model_kwargs)`` trained by ``train(model, corpus, **train_kwargs)``, or its cached copy.

    ``build`` is ``build_model`` (a ``Seq2Seq``, chapters 5 and 6) or ``build_transformer`` (chapter 10).

    ``train_kwargs`` must not include ``on_log`` or a time budget (the result would not be a pure
    function of the arguments); the history's seconds are those of the run that trained the model.
    """
    model_kwargs = dict(model_kwargs or {})
    if "on_log" in train_kwargs or "time_budget_s" in train_kwargs:
        raise ValueError("a cached model must be a pure function of its arguments: no on_log, no time_budget_s")
    folder = cache_dir()
    path = None if folder is None else folder / f"{cache_key(corpus, model_kwargs, train_kwargs, build)}.pt"
    model = build(corpus, **model_kwargs)
    if path is not None and path.is_file():
        stored = torch.load(path, weights_only=False)
        model.load_state_dict(stored["state_dict"])
        model.eval()
        return model, TrainingHistory(**stored["history"])
    history = train(model, corpus, **train_kwargs)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save({"state_dict": model.state_dict(), "history": dataclasses.asdict(history)}, partial)
        os.replace(partial, path)
    return model, history
