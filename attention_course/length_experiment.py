"""Chapter 6.2's experiment: how far attention carries, over seeds, budgets and lengths.

Three models, trained on chapter 5's corpus (1600 training pairs of 1 to 3 clauses):

- ``plain``: the encoder–decoder without attention (chapter 5);
- ``attention``: the attention decoder with the course's one-directional encoder (chapter 6);
- ``bidirectional``: the same decoder with the bidirectional encoder of Bahdanau et al. (2015).

Each is scored on the 400 held-out sentences, per bucket of source length (exact match and BLEU),
and on an **extrapolation set**: sentences of 4 and 5 clauses, longer on both sides than any
training sentence, whose words are all in the training vocabulary. On that set the scores are
not enough, so ``decode_analysis`` measures what the decoder does: how long its output is against
the reference, whether it writes ``<eos>`` at all, how many of the reference's clauses come out
right from the start, whether it repeats a clause, and where its attention is when it stops.

Two budgets: **step-matched** (every model gets 500 steps, as in chapters 5 and 6) and **more
steps** (the plain model goes on to ``MORE_STEPS``, 1100, in every seed). 1100 is what one 60-step
timing of seconds per step once gave (2.2 × 500); it is *not* a time match: every record stores its
own ``train_seconds``, and the chapter computes from them what share of the attention model's time
the plain model's 1100 steps took. The plain model's "training longer" run goes on to 2000 and 5000
steps.

``run_experiment`` does it all and returns a JSON-ready dict (``bench/length_experiment.py`` stores
it as ``book/data/length_experiment.json``); the functions it uses are what the chapter runs live.
Training uses one thread: given the seed, a run gives the same numbers on this machine (all but
the measured seconds). ``run_experiment`` refuses to run when the code or the stored data have
uncommitted changes (``uncommitted_changes``), so that the commit it records is the code that ran.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Sequence

import sacrebleu
import torch

from attention_course.corpus import CLAUSE_JOINER, SentencePair, ToyTranslationCorpus, Vocab, generate_pairs
from attention_course.seq2seq import Seq2Seq, _buckets, _translations, build_model, train

__all__ = [
    "CORPUS_SETTINGS",
    "MODELS",
    "EDGES",
    "corpus",
    "extrapolation_set",
    "parameter_count",
    "alignment_agreement",
    "held_out_scores",
    "decode_analysis",
    "teacher_forced_ends",
    "summarise_analysis",
    "uncommitted_changes",
    "committed_or_allowed",
    "git_commit",
    "DirtyTreeError",
    "run_one",
    "train_and_score",
    "checkpoint_record",
    "run_experiment",
    "load_results",
    "spread",
]

ROOT = Path(__file__).resolve().parents[1]
RESULTS_PATH = ROOT / "book" / "data" / "length_experiment.json"

CORPUS_SETTINGS = {"num_pairs": 2000, "seed": 0}  # chapter 5's corpus
MODELS = {  # build_model's arguments for each model (embeddings 32, states 64, attention 64)
    "plain": {"attention": False},
    "attention": {"attention": True},
    "bidirectional": {"attention": True, "bidirectional": True},
}
TRAINING = {"batch_size": 64, "lr": 3e-3, "clip_norm": 1.0}  # train's defaults, stated
EDGES = (5, 10, 15, 20)  # buckets 3–5, 6–10, 11–15, 16–20 and 21+ source tokens
STEPS = 500
MORE_STEPS = 1100  # the plain model's second budget, in every seed (see the module's docstring)
LONG_STEPS = (2000, 5000)
LOG_EVERY = 100
EXTRAPOLATION = {"num_pairs": 200, "seed": 4242, "min_clauses": 4, "max_clauses": 5}
JOINER = CLAUSE_JOINER[1]  # 而且


def corpus(**overrides) -> ToyTranslationCorpus:
    return ToyTranslationCorpus(**{**CORPUS_SETTINGS, **overrides})


def extrapolation_set(
    corpus: ToyTranslationCorpus, num_pairs: int = 200, *, seed: int = 4242, min_clauses: int = 4, max_clauses: int = 5
) -> list[SentencePair]:
    """``num_pairs`` sentences of ``min_clauses`` to ``max_clauses`` clauses that are longer than every
    training sentence, on the English side and on the Chinese side, and use only training words.

    Drawn with the corpus's own generator (``generate_pairs``), in its order; none is a training
    or held-out sentence (they are all longer than those).
    """
    longest_source = max(len(pair.source) for pair in corpus.train_pairs)
    longest_target = max(len(pair.target) for pair in corpus.train_pairs)
    chosen: list[SentencePair] = []
    candidates = 4 * num_pairs
    while len(chosen) < num_pairs:
        chosen = [
            pair
            for pair in generate_pairs(candidates, seed=seed, min_clauses=min_clauses, max_clauses=max_clauses)
            if len(pair.source) > longest_source
            and len(pair.target) > longest_target
            and all(word in corpus.source_vocab for word in pair.source)
            and all(word in corpus.target_vocab for word in pair.target)
        ][:num_pairs]
        candidates *= 2
    return chosen


def parameter_count(model: Seq2Seq) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------
# Scores.


def _bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize="none").score


def held_out_scores(model: Seq2Seq, corpus: ToyTranslationCorpus, edges: Sequence[int] = EDGES) -> dict:
    """Exact match (0–1) and BLEU (0–100) on the held-out set, overall and per bucket of source length.

    The same numbers as ``accuracy_by_length`` and ``bleu_by_length``, from one decoding pass.
    """
    pairs = corpus.held_out_pairs
    hypotheses = _translations(model, corpus, pairs)
    right = [h == p.target_text for h, p in zip(hypotheses, pairs)]
    buckets = []
    for low, high, indices in _buckets(pairs, edges):
        buckets.append({
            "label": f"{low}–{high}",
            "sentences": len(indices),
            "exact": sum(right[i] for i in indices) / len(indices),
            "bleu": _bleu([hypotheses[i] for i in indices], [pairs[i].target_text for i in indices]),
        })
    return {
        "exact": sum(right) / len(pairs),
        "bleu": _bleu(hypotheses, [p.target_text for p in pairs]),
        "buckets": buckets,
    }


@torch.no_grad()
def alignment_agreement(model: Seq2Seq, corpus: ToyTranslationCorpus, pairs: Sequence[SentencePair] | None = None) -> dict:
    """How well the attention matches the generator's true alignment (``SentencePair.alignment_matrix``).

    Teacher-forced weights (the decoder reads the reference's words), so every model is judged on
    the same target words. ``argmax``: share of target words whose largest weight is on a source
    token they translate; ``mass``: mean total weight on those tokens.
    """
    pairs = corpus.held_out_pairs if pairs is None else pairs
    model.eval()
    hits = mass = total = 0.0
    for start in range(0, len(pairs), 256):
        chunk = pairs[start : start + 256]
        batch = corpus.collate(chunk)
        _, weights = model(batch)  # (B, T, S)
        for b, pair in enumerate(chunk):
            w = weights[b, : len(pair.target), : len(pair.source)]  # (T, S), <eos> row left out
            truth = pair.alignment_matrix() > 0  # (T, S)
            hits += float(truth.gather(1, w.argmax(1, keepdim=True)).sum())
            mass += float((w * truth).sum())
            total += len(pair.target)
    return {"argmax": hits / total, "mass": mass / total}


@torch.no_grad()
def teacher_forced_ends(model: Seq2Seq, corpus: ToyTranslationCorpus, pairs: Sequence[SentencePair]) -> dict:
    """Feed the decoder the reference's words (teacher forcing) and see where it wants to stop.

    ``token_accuracy``: share of reference words (``<eos>`` included) the decoder predicts right
    from the right prefix; ``early_eos``: share of sentences where it predicts ``<eos>`` somewhere
    before the reference ends; ``mean_first_eos``: mean position of its first predicted ``<eos>`` over
    those sentences, counted from 1 as ``decode_analysis`` counts ``first_error``: an ``<eos>``
    predicted in place of the reference's word k is at position k. ``by_position``: [right, total] for
    the reference's word positions 1, 2, … (its ``<eos>`` not included), so that accuracy can be read
    against the position; ``accuracy_within`` and ``accuracy_beyond``: the word accuracy at the positions
    a training target reached (up to the longest) and past them.
    """
    model.eval()
    right = total = early = 0
    first_eos: list[int] = []
    by_position: list[list[int]] = []
    longest = max(len(p.target) for p in corpus.train_pairs)
    for start in range(0, len(pairs), 100):
        chunk = pairs[start : start + 100]
        batch = corpus.collate(chunk)
        logits, _ = model(batch)  # (B, T, vocab)
        predicted = logits.argmax(-1)  # (B, T)
        for b, pair in enumerate(chunk):
            n = len(pair.target) + 1  # the words and <eos>
            hits = (predicted[b, :n] == batch.target_output[b, :n]).tolist()
            right += sum(hits)
            total += n
            by_position.extend([0, 0] for _ in range(n - 1 - len(by_position)))
            for position, hit in enumerate(hits[: n - 1]):  # the words, not the <eos>
                by_position[position][0] += hit
                by_position[position][1] += 1
            eos = (predicted[b, : n - 1] == Vocab.eos_id).nonzero()
            if len(eos):
                early += 1
                first_eos.append(int(eos[0]) + 1)

    def accuracy(rows: list[list[int]]) -> float | None:
        counted = sum(t for _, t in rows)
        return sum(h for h, _ in rows) / counted if counted else None

    return {
        "token_accuracy": right / total,
        "early_eos": early / len(pairs),
        "mean_first_eos": statistics.fmean(first_eos) if first_eos else None,
        "by_position": by_position,
        "accuracy_within": accuracy(by_position[:longest]),
        "accuracy_beyond": accuracy(by_position[longest:]),
    }


def _clauses(words: Sequence[str]) -> list[tuple[str, ...]]:
    clauses, current = [], []
    for word in words:
        if word == JOINER:
            clauses.append(tuple(current))
            current = []
        else:
            current.append(word)
    clauses.append(tuple(current))
    return clauses


@torch.no_grad()
def decode_analysis(model: Seq2Seq, corpus: ToyTranslationCorpus, pairs: Sequence[SentencePair]) -> list[dict]:
    """Greedy-decode every pair with a generous length limit (2 S + 2 words, ``translate``'s) and
    describe each output against its reference.

    Per sentence: ``ref`` and ``out`` (words before ``<eos>``, or all of them), ``ended`` (wrote
    ``<eos>`` before the limit), ``limit``, ``exact``, ``first_error`` (position of the first wrong
    word, counted from 1 as ``teacher_forced_ends`` counts its ``<eos>``: k when the output's first k - 1
    words are the reference's and its word k is not, or is missing, or is one too many; None if the
    output is the reference), ``ref_clauses``, ``out_clauses``, ``right_clauses`` (leading clauses identical to
    the reference's), ``repeats`` (some output clause equal to the one before it), and, with
    attention, ``end_focus``: the source position, as a fraction of S (1 = the last word), of the
    largest weight at the step that wrote ``<eos>`` (None if it never did).
    """
    model.eval()
    results = []
    for start in range(0, len(pairs), 100):
        chunk = pairs[start : start + 100]
        batch = corpus.collate(chunk)
        limit = 2 * batch.source.shape[1] + 2
        tokens, weights = model.greedy_decode(batch.source, batch.source_lengths, max_len=limit)
        for b, pair in enumerate(chunk):
            # Each sentence's own limit, 2 S + 2 for its own S (the batch ran to the longest one's):
            # a row that has not written <eos> within it ran to the limit, as it would alone.
            own_limit = 2 * len(pair.source) + 2
            row = tokens[b, :own_limit].tolist()
            ended = Vocab.eos_id in row
            length = row.index(Vocab.eos_id) if ended else len(row)
            words = corpus.target_vocab.decode(row[:length], keep_special=True).split()
            ref_clauses, out_clauses = _clauses(pair.target), _clauses(words)
            right = 0
            for ours, theirs in zip(out_clauses, ref_clauses):
                if ours != theirs:
                    break
                right += 1
            # Positions count from 1 (word k is words[k - 1]), like teacher_forced_ends's <eos>.
            first_error = next((k for k, (a, b_) in enumerate(zip(words, pair.target), start=1) if a != b_), None)
            if first_error is None and len(words) != len(pair.target):
                first_error = min(len(words), len(pair.target)) + 1
            end_focus = None
            if ended and weights is not None:
                eos_row = weights[b, length, : len(pair.source)]
                end_focus = (int(eos_row.argmax()) + 1) / len(pair.source)
            results.append({
                "ref": len(pair.target),
                "out": len(words),
                "ended": ended,
                "limit": own_limit,
                "exact": words == list(pair.target),
                "first_error": first_error,
                "ref_clauses": len(ref_clauses),
                "out_clauses": len(out_clauses),
                "right_clauses": right,
                "repeats": any(a == b_ for a, b_ in zip(out_clauses, out_clauses[1:])),
                "end_focus": end_focus,
                "text": " ".join(words),
            })
    return results


def summarise_analysis(rows: Sequence[dict], pairs: Sequence[SentencePair], longest_train_target: int) -> dict:
    """Totals over ``decode_analysis`` rows: what a reader needs to say what the decoder does."""
    n = len(rows)
    ended = [r for r in rows if r["ended"]]
    focus = [r["end_focus"] for r in ended if r["end_focus"] is not None]
    return {
        "sentences": n,
        "exact": sum(r["exact"] for r in rows) / n,
        "bleu": _bleu([r["text"] for r in rows], [p.target_text for p in pairs]),
        "ended": len(ended) / n,
        "mean_ref_length": statistics.fmean(r["ref"] for r in rows),
        "mean_out_length": statistics.fmean(r["out"] for r in rows),
        "median_out_length": statistics.median(r["out"] for r in rows),
        "shorter": sum(r["out"] < r["ref"] for r in rows) / n,
        "longer": sum(r["out"] > r["ref"] for r in rows) / n,
        "within_train_max": sum(r["out"] <= longest_train_target for r in rows) / n,
        "repeats": sum(r["repeats"] for r in rows) / n,
        "mean_right_clauses": statistics.fmean(r["right_clauses"] for r in rows),
        "mean_ref_clauses": statistics.fmean(r["ref_clauses"] for r in rows),
        "mean_out_clauses": statistics.fmean(r["out_clauses"] for r in rows),
        # an exact output counts as wrong first at its <eos>, one past its last word
        "mean_first_error": statistics.fmean(
            r["first_error"] if r["first_error"] is not None else r["ref"] + 1 for r in rows
        ),
        "mean_end_focus": statistics.fmean(focus) if focus else None,
        # Per sentence, for the figures: reference length, output length, wrote <eos>, right clauses.
        "per_sentence": [[r["ref"], r["out"], int(r["ended"]), r["right_clauses"]] for r in rows],
    }


# ---------------------------------------------------------------------------------------------
# Runs.


def run_one(
    name: str,
    seed: int,
    checkpoints: Sequence[int],
    *,
    corpus_settings: dict | None = None,
    model_settings: dict | None = None,
    extrapolation: dict | None = None,
    log_every: int = LOG_EVERY,
) -> list[dict]:
    """Train model ``name`` with ``seed`` up to ``max(checkpoints)`` steps and score it at every checkpoint.

    Checkpoints must be multiples of ``log_every`` (the model is scored when ``train`` logs). The
    model at checkpoint n is the model ``train(..., steps=n)`` gives: training is deterministic, and
    scoring does not touch it. The keyword arguments override the experiment's settings (the
    corpus, ``build_model``'s sizes, the extrapolation set), for quick runs such as the tests'.
    """
    torch.set_num_threads(1)
    data = corpus(**(corpus_settings or {}))
    long_pairs = extrapolation_set(data, **{**EXTRAPOLATION, **(extrapolation or {})})
    model = build_model(data, seed=seed, **MODELS[name], **(model_settings or {}))
    return train_and_score(model, {"model": name, "seed": seed}, checkpoints, data, long_pairs, log_every)


def train_and_score(model, label: dict, checkpoints: Sequence[int], data: ToyTranslationCorpus,
                    long_pairs: Sequence[SentencePair], log_every: int = LOG_EVERY) -> list[dict]:
    """Train ``model`` with the experiment's recipe and seed ``label["seed"]`` to ``max(checkpoints)`` steps:
    at each checkpoint, a record of ``label``, ``checkpoint_record`` and the held-out curve so far."""
    if any(c % log_every for c in checkpoints):
        raise ValueError(f"checkpoints must be multiples of {log_every}, got {list(checkpoints)}")
    records: list[dict] = []
    curve: list[tuple[int, float]] = []

    def score(point) -> None:
        curve.append((point.step, point.accuracy))
        if point.step in checkpoints:
            records.append({**label, **checkpoint_record(model, data, long_pairs, point), "curve": list(curve)})

    train(model, data, steps=max(checkpoints), seed=label["seed"], log_every=log_every, on_log=score, **TRAINING)
    return records


def checkpoint_record(model, data: ToyTranslationCorpus, long_pairs: Sequence[SentencePair], point) -> dict:
    """Everything the experiment stores about ``model`` at the log point ``point`` of its training: held-out
    scores, the extrapolation set's analysis, its teacher-forced ends and, with attention, the agreement of
    the weights with the true alignments. ``model`` is a ``Seq2Seq`` or anything with its interface
    (chapter 10's ``Transformer``)."""
    longest_target = max(len(p.target) for p in data.train_pairs)
    rows = decode_analysis(model, data, long_pairs)
    record = {
        "steps": point.step,
        "train_seconds": point.seconds,
        "loss": point.loss,
        "held_out": held_out_scores(model, data),
        "extrapolation": summarise_analysis(rows, long_pairs, longest_target),
        "teacher_forced": teacher_forced_ends(model, data, long_pairs),
    }
    if getattr(model, "has_attention", True):
        record["alignment"] = alignment_agreement(model, data)
        record["extrapolation_alignment"] = alignment_agreement(model, data, long_pairs)
    return record


def git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


#: What the stored results depend on: a change under any of these, committed or not, is a change of
#: the experiment's code or of what it writes over.
WATCHED_PATHS = ("attention_course", "bench", "book/data")


class DirtyTreeError(RuntimeError):
    """The working tree has uncommitted changes where the experiment's code or results live."""


def uncommitted_changes(root: Path | str = ROOT, paths: Sequence[str] = WATCHED_PATHS) -> list[str] | None:
    """``git status --porcelain`` lines for ``paths`` under ``root`` (changed, staged, deleted or
    untracked files; ignored ones are not listed); None when git cannot say (no git, not a repository)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all", "--", *paths],
            capture_output=True, text=True, check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [line for line in out.splitlines() if line.strip()]


def committed_or_allowed(allow_dirty: bool = False) -> list[str] | None:
    """What ``uncommitted_changes`` lists, for the results to record; raises ``DirtyTreeError`` when that is
    anything (or git cannot tell) unless ``allow_dirty``. Every experiment whose results the book stores
    (this one, ``transformer_length``) calls it before any work."""
    changes = uncommitted_changes()
    if (changes is None or changes) and not allow_dirty:
        where = ", ".join(f"{path}/" for path in WATCHED_PATHS)
        listed = "\n  ".join(changes or ["(git could not list the changes: is this a git checkout?)"])
        raise DirtyTreeError(
            f"uncommitted changes under {where}:\n  {listed}\n"
            "The stored results must come from committed code: commit (or stash) these, then run again."
        )
    return changes


def experiment_jobs(
    seeds: Sequence[int], bidirectional_seeds: Sequence[int], long_seeds: Sequence[int],
    steps: int = STEPS, more_steps: int = MORE_STEPS, long_steps: Sequence[int] = LONG_STEPS,
) -> list[tuple[str, int, list[int]]]:
    """(model, seed, checkpoints) of every run, the longest first, then the most needed."""
    jobs = []
    for seed in long_seeds:  # the plain model trained longer: the longest runs, started first
        jobs.append(("plain", seed, sorted({steps, more_steps, *long_steps})))
    for seed in seeds:
        jobs.append(("attention", seed, [steps]))
        if seed not in long_seeds:
            jobs.append(("plain", seed, sorted({steps, more_steps})))
    jobs += [("bidirectional", seed, [steps]) for seed in bidirectional_seeds]
    return jobs


def run_experiment(
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    bidirectional_seeds: Sequence[int] = (0, 1, 2),
    long_seeds: Sequence[int] = (0,),
    processes: int = 2,
    steps: int = STEPS,
    more_steps: int = MORE_STEPS,
    long_steps: Sequence[int] = LONG_STEPS,
    partial_path: Path | str | None = None,
    allow_dirty: bool = False,
) -> dict:
    """The whole experiment (see the module's docstring), as a JSON-ready dict.

    ``seeds``: the plain and attention models at ``steps``, and the plain model at ``more_steps``;
    ``bidirectional_seeds``: the bidirectional model (each of its steps costs more);
    ``long_seeds``: the plain model trained on to ``long_steps``. With ``partial_path``, the header
    and each finished run's records are appended there as JSON lines as they come
    (``results_from_partial`` reads them back).

    Raises ``DirtyTreeError`` before any work when ``uncommitted_changes`` lists anything, or git
    cannot tell, unless ``allow_dirty`` (for runs whose results are not stored).
    """
    import json

    changes = committed_or_allowed(allow_dirty)
    started = time.time()
    load_before = list(os.getloadavg())
    data = corpus()
    jobs = experiment_jobs(seeds, bidirectional_seeds, long_seeds, steps, more_steps, long_steps)
    long_pairs = extrapolation_set(data, **EXTRAPOLATION)
    header = {
        "what": "chapter 6.2: plain vs attention vs bidirectional attention; held-out buckets, extrapolation, budgets",
        "made_by": "bench/length_experiment.py (attention_course.length_experiment.run_experiment)",
        "git_commit": git_commit(),
        # what uncommitted_changes listed (empty: the commit is the code that ran); None if git could not say
        "uncommitted_changes": changes,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
        },
        "config": {
            "corpus": CORPUS_SETTINGS,
            "models": MODELS,
            "training": {**TRAINING, "steps": steps, "log_every": LOG_EVERY, "num_threads": 1},
            "edges": list(EDGES),
            "extrapolation": EXTRAPOLATION,
            "seeds": list(seeds),
            "bidirectional_seeds": list(bidirectional_seeds),
            "long_seeds": list(long_seeds),
            "more_steps": more_steps,
            "long_steps": list(long_steps),
            "processes": processes,
            "jobs": [list(job) for job in jobs],
        },
        "corpus": {
            "train": len(data.train_pairs),
            "held_out": len(data.held_out_pairs),
            "longest_train_source": max(len(p.source) for p in data.train_pairs),
            "longest_train_target": max(len(p.target) for p in data.train_pairs),
            "extrapolation_sentences": len(long_pairs),
            "extrapolation_shortest_source": min(len(p.source) for p in long_pairs),
            "extrapolation_shortest_target": min(len(p.target) for p in long_pairs),
            "extrapolation_clauses": {
                str(k): sum(1 for p in long_pairs if p.source.count(CLAUSE_JOINER[0]) + 1 == k) for k in (4, 5)
            },
        },
        "parameters": {name: parameter_count(build_model(data, **kwargs)) for name, kwargs in MODELS.items()},
        "budget": {
            "note": f"every model {steps} steps; the plain model also {more_steps} steps (not a time match: each "
            "record's train_seconds is the wall-clock time of its training steps, evaluation left out, "
            f"measured while {processes} runs shared the machine)",
        },
        "started": started,
    }
    partial = None if partial_path is None else Path(partial_path)
    if partial is not None:
        partial.write_text(json.dumps(header, ensure_ascii=False) + "\n", encoding="utf-8")
    records: list[dict] = []
    with ProcessPoolExecutor(max_workers=processes) as pool:
        futures = [pool.submit(run_one, *job) for job in jobs]
        for future in as_completed(futures):
            result = future.result()
            records.extend(result)
            if partial is not None:
                with partial.open("a", encoding="utf-8") as out:
                    for record in result:
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return _assemble(header, records)


def _assemble(header: dict, records: list[dict]) -> dict:
    records = sorted(records, key=lambda r: (list(MODELS).index(r["model"]), r["seed"], r["steps"]))
    done = {(r["model"], r["seed"]) for r in records}
    results = {k: v for k, v in header.items() if k != "started"}
    results["complete"] = all((model, seed) in done for model, seed, _ in header["config"]["jobs"])
    results["records"] = records
    results["load_average_after"] = list(os.getloadavg())
    results["wall_seconds"] = time.time() - header["started"]
    return results


def results_from_partial(path: Path | str) -> dict:
    """The results of an interrupted run, from its ``partial_path`` file: the finished runs only.

    ``complete`` is False when some run of the plan is missing; the config still lists every seed
    planned, so a reader must take the seeds from the records.
    """
    import json

    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return _assemble(json.loads(lines[0]), [json.loads(line) for line in lines[1:] if line.strip()])


# ---------------------------------------------------------------------------------------------
# Reading the stored results (the chapter's cells).


def load_results(path: Path | str = RESULTS_PATH) -> dict:
    import json

    return json.loads(Path(path).read_text(encoding="utf-8"))


def records(results: dict, model: str, steps: int | None = None) -> list[dict]:
    """The stored records of ``model`` at ``steps`` (default: the step-matched 500), one per seed, by seed."""
    steps = results["config"]["training"]["steps"] if steps is None else steps
    return [r for r in results["records"] if r["model"] == model and r["steps"] == steps]


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, min, max) of ``values``."""
    values = list(values)
    if not values:
        return (math.nan, math.nan, math.nan)
    return (statistics.fmean(values), min(values), max(values))


def bucket_table(rows_by_model: dict[str, list[dict]], key: str, scale: float, names: dict[str, str], fmt: str = ".0f") -> str:
    """A text table of held-out scores per length bucket: the mean over seeds, (lowest–highest) seed.

    ``rows_by_model[model]`` holds stored records (one per seed); ``key`` is "exact" or "bleu".
    """
    first = next(rows for rows in rows_by_model.values() if rows)[0]["held_out"]["buckets"]
    lines = [f"{'tokens (sentences)':>33} " + " ".join(f"{b['label'] + ' (' + str(b['sentences']) + ')':>19}" for b in first)]
    for name, rows in rows_by_model.items():
        cells = []
        for k in range(len(first)):
            mean, low, high = spread([scale * r["held_out"]["buckets"][k][key] for r in rows])
            cells.append(f"{mean:{fmt}} ({low:{fmt}}–{high:{fmt}})")
        lines.append(f"{names.get(name, name) + f' ×{len(rows)}':>33} " + " ".join(f"{c:>19}" for c in cells))
    return "\n".join(lines)


EXTRAPOLATION_COLUMNS = (
    ("exact", "exact %", 100),
    ("bleu", "BLEU", 1),
    ("ended", "wrote <eos> %", 100),
    ("mean_out_length", "output words", 1),
    ("mean_ref_length", "reference words", 1),
    ("mean_right_clauses", "right clauses", 1),
    ("repeats", "repeats a clause %", 100),
)


def extrapolation_table(rows_by_model: dict[str, list[dict]], names: dict[str, str]) -> str:
    """A text table of the failure analysis on the extrapolation set: mean (lowest–highest) over seeds."""
    lines = [f"{'':>33} " + " ".join(f"{title:>19}" for _, title, _ in EXTRAPOLATION_COLUMNS)]
    for name, rows in rows_by_model.items():
        cells = []
        for key, _, scale in EXTRAPOLATION_COLUMNS:
            mean, low, high = spread([scale * r["extrapolation"][key] for r in rows])
            cells.append(f"{mean:.1f} ({low:.1f}–{high:.1f})")
        lines.append(f"{names.get(name, name) + f' ×{len(rows)}':>33} " + " ".join(f"{c:>19}" for c in cells))
    return "\n".join(lines)
