"""Chapter 12's experiment: section 6.2's length test, put to Transformers with each position scheme.

The same corpus (1600 training pairs of 1 to 3 clauses), the same extrapolation set (200 sentences of
4 and 5 clauses, longer on both sides than any training sentence) and the same training recipe as
section 6.2 (Adam, learning rate 0.003, batches of 64, gradient norm clipped at 1, one thread), for
chapter 10's encoder–decoder ``Transformer`` with each of chapter 9's position schemes, and with none
as the control (``SCHEMES``), five seeds each, scored after 500 and 1000 steps by the functions of
``length_experiment`` (``checkpoint_record``): held-out exact match and BLEU per length bucket, the
extrapolation set's failure analysis, the teacher-forced ends and the cross-attention's agreement with
the true alignments.

``run_experiment`` returns a JSON-ready dict; ``bench/transformer_length.py`` stores it as
``book/data/transformer_length.json``, and refuses to when the code it would describe has uncommitted
changes (``length_experiment.committed_or_allowed``: the stored commit must be the code that made the
numbers).
"""

from __future__ import annotations

import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Sequence

import torch

from attention_course.length_experiment import (
    CORPUS_SETTINGS, EDGES, EXTRAPOLATION, LOG_EVERY, ROOT, TRAINING, committed_or_allowed, corpus, extrapolation_set,
    git_commit, parameter_count, train_and_score,
)
from attention_course.transformer import build_transformer

__all__ = ["SCHEMES", "MODEL", "CHECKPOINTS", "RESULTS_PATH", "run_one", "run_experiment", "load_results"]

RESULTS_PATH = ROOT / "book" / "data" / "transformer_length.json"
SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi")
# Chapter 10's model: 4 heads of 8 features, 2 encoder and 2 decoder layers, pre-LN, no dropout; the learned
# table has 128 positions, more than the longest output the extrapolation set lets a model write (2 S + 2).
MODEL = {"d_model": 32, "num_heads": 4, "num_layers": 2, "d_ff": 64, "norm_first": True, "max_length": 128}
CHECKPOINTS = (500, 1000)


def run_one(scheme: str, seed: int, checkpoints: Sequence[int] = CHECKPOINTS, *, corpus_settings: dict | None = None,
            model_settings: dict | None = None, extrapolation: dict | None = None,
            log_every: int = LOG_EVERY) -> list[dict]:
    """Train the Transformer with ``scheme`` and ``seed`` to ``max(checkpoints)`` steps, scoring it at each.

    The keyword arguments override the experiment's settings, for quick runs such as the tests'.
    """
    torch.set_num_threads(1)
    data = corpus(**(corpus_settings or {}))
    long_pairs = extrapolation_set(data, **{**EXTRAPOLATION, **(extrapolation or {})})
    model = build_transformer(data, seed=seed, positions=scheme, **{**MODEL, **(model_settings or {})})
    return train_and_score(model, {"scheme": scheme, "seed": seed}, checkpoints, data, long_pairs, log_every)


def run_experiment(seeds: Sequence[int] = (0, 1, 2, 3, 4), schemes: Sequence[str] = SCHEMES, processes: int = 2,
                   checkpoints: Sequence[int] = CHECKPOINTS, allow_dirty: bool = False) -> dict:
    """Every scheme with every seed (see the module's docstring), as a JSON-ready dict.

    Raises ``DirtyTreeError`` before any work when the code or the stored data have uncommitted changes,
    unless ``allow_dirty`` (for results that are not stored), as section 6.2's experiment does.
    """
    changes = committed_or_allowed(allow_dirty)
    started = time.time()
    load_before = list(os.getloadavg())
    data = corpus()
    long_pairs = extrapolation_set(data, **EXTRAPOLATION)
    jobs = [(scheme, seed) for seed in seeds for scheme in schemes]
    records: list[dict] = []
    with ProcessPoolExecutor(max_workers=processes) as pool:
        futures = [pool.submit(run_one, scheme, seed, checkpoints) for scheme, seed in jobs]
        for future in as_completed(futures):
            records.extend(future.result())
    records.sort(key=lambda r: (list(schemes).index(r["scheme"]), r["seed"], r["steps"]))
    return {
        "what": "chapter 12: the length test of section 6.2 for Transformers with each position scheme",
        "made_by": "bench/transformer_length.py (attention_course.transformer_length.run_experiment)",
        "git_commit": git_commit(),
        # what uncommitted_changes listed (empty: the commit is the code that ran); None if git could not say
        "uncommitted_changes": changes,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "load_average_before": load_before},
        "config": {
            "corpus": CORPUS_SETTINGS,
            "model": MODEL,
            "schemes": list(schemes),
            "training": {**TRAINING, "checkpoints": list(checkpoints), "log_every": LOG_EVERY, "num_threads": 1},
            "edges": list(EDGES),
            "extrapolation": EXTRAPOLATION,
            "seeds": list(seeds),
            "processes": processes,
        },
        "parameters": {scheme: parameter_count(build_transformer(data, positions=scheme, **MODEL)) for scheme in schemes},
        "corpus": {
            "longest_train_source": max(len(p.source) for p in data.train_pairs),
            "longest_train_target": max(len(p.target) for p in data.train_pairs),
            "extrapolation_sentences": len(long_pairs),
        },
        "records": records,
        "load_average_after": list(os.getloadavg()),
        "wall_seconds": time.time() - started,
    }


def load_results(path: Path | str = RESULTS_PATH) -> dict:
    import json

    return json.loads(Path(path).read_text(encoding="utf-8"))
