"""Training the encoder–decoders of chapters 5 and 6 on the toy corpus: how fast, how well, and by sentence length.

Measures, on this machine:
  1. seconds per training step of each model, with torch on 1 and on 2 threads (median of repeats);
  2. the attention model: training seconds until held-out exact-match accuracy first reaches 99 %
     (evaluated every 25 steps; evaluation time not counted), and its accuracy when the budget ends;
  3. the length experiment (as Bahdanau et al. 2015, fig. 2): both models trained with the same seed
     for the same number of training seconds, then exact-match accuracy and BLEU (sacrebleu,
     tokenize="none") on the same held-out sentences, bucketed by source length.

Goals (the seq2seq issue): the attention model reaches >= 99 % held-out accuracy within 60 s of
training; the model without attention loses accuracy as sources grow, the attention model does not.
Run with ``.venv/bin/python bench/seq2seq_training.py``; writes bench/results/seq2seq_training.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from attention_course.corpus import ToyTranslationCorpus
from attention_course.seq2seq import (
    accuracy_by_length,
    bleu_by_length,
    build_model,
    sequence_loss,
    train,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "seq2seq_training.json"
GOAL_ACCURACY = 0.99
GOAL_SECONDS = 60.0
LENGTH_EDGES = (10, 20)  # buckets of 1–10, 11–20 and 21+ source tokens
MODEL = dict(embed_dim=32, hidden_dim=64, attention_dim=64)
TRAINING = dict(batch_size=64, lr=3e-3, clip_norm=1.0)
KINDS = {"attention": True, "plain": False}


def seconds_per_step(corpus: ToyTranslationCorpus, attention: bool, threads: int, steps: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean time of ``steps`` training steps (forward, backward, clip, Adam)."""
    batches = list(corpus.batches("train", TRAINING["batch_size"], shuffle_seed=0))[:steps]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        timings = []
        for _ in range(repeats):
            model = build_model(corpus, attention=attention, **MODEL)
            optimizer = torch.optim.Adam(model.parameters(), lr=TRAINING["lr"])
            start = time.perf_counter()
            for batch in batches:
                optimizer.zero_grad()
                logits, _ = model(batch)
                sequence_loss(logits, batch.target_output).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), TRAINING["clip_norm"])
                optimizer.step()
            timings.append((time.perf_counter() - start) / len(batches))
        return statistics.median(timings)
    finally:
        torch.set_num_threads(before)


def buckets(rows) -> list[dict]:
    return [dict(lengths=row.label, sentences=row.sentences, score=round(row.score, 4)) for row in rows]


def run(corpus: ToyTranslationCorpus, kind: str, seed: int, budget_s: float, log_every: int) -> dict:
    model = build_model(corpus, attention=KINDS[kind], seed=seed, **MODEL)
    history = train(model, corpus, time_budget_s=budget_s, seed=seed, log_every=log_every, num_threads=1, **TRAINING)
    reached = history.seconds_to_accuracy(GOAL_ACCURACY)
    return dict(
        kind=kind,
        seed=seed,
        steps=len(history.step_losses),
        train_seconds=round(history.train_seconds, 2),
        eval_seconds=round(history.eval_seconds, 2),
        seconds_per_step=round(history.seconds_per_step, 4),
        seconds_to_99=None if reached is None else round(reached, 2),
        steps_to_99=next((s for s, a in zip(history.steps, history.accuracies) if a >= GOAL_ACCURACY), None),
        final_accuracy=history.accuracies[-1],
        accuracy_by_length=buckets(accuracy_by_length(model, corpus, edges=LENGTH_EDGES)),
        bleu_by_length=buckets(bleu_by_length(model, corpus, edges=LENGTH_EDGES)),
        history=dict(steps=history.steps, losses=[round(x, 5) for x in history.losses],
                     accuracies=history.accuracies, seconds=[round(x, 2) for x in history.seconds]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="model and shuffling seeds")
    parser.add_argument("--budget", type=float, default=GOAL_SECONDS, help="training seconds per model and seed")
    parser.add_argument("--timing-steps", type=int, default=15, help="steps per step-time measurement")
    parser.add_argument("--timing-repeats", type=int, default=3, help="repeats per step-time measurement")
    args = parser.parse_args()

    corpus = ToyTranslationCorpus()  # the book's corpus: 2000 pairs of 1–3 clauses, seed 0, 400 held out
    unseen = not {pair.source for pair in corpus.train_pairs} & {pair.source for pair in corpus.held_out_pairs}
    print(corpus, f"held-out sources unseen in training: {unseen}", sep="\n")
    load_before = os.getloadavg()

    step_times = {
        kind: {f"{threads}_thread{'s' * (threads > 1)}": round(seconds_per_step(
            corpus, attention, threads, args.timing_steps, args.timing_repeats), 4) for threads in (1, 2)}
        for kind, attention in KINDS.items()
    }
    print("seconds per training step (batch 64):", json.dumps(step_times))

    runs = []
    for seed in args.seeds:
        for kind in KINDS:
            result = run(corpus, kind, seed, args.budget, log_every=25 if kind == "attention" else 100)
            runs.append(result)
            print(f"{kind:9} seed {seed}: {result['steps']} steps in {result['train_seconds']} s "
                  f"({1000 * result['seconds_per_step']:.1f} ms/step), 99 % after {result['seconds_to_99']} s, "
                  f"final accuracy {result['final_accuracy']:.4f}")
            print("   accuracy by length:", ", ".join(f"{b['lengths']}: {b['score']:.3f} ({b['sentences']})"
                                                      for b in result["accuracy_by_length"]))
            print("   BLEU by length:    ", ", ".join(f"{b['lengths']}: {b['score']:.1f}"
                                                      for b in result["bleu_by_length"]))

    attention_runs = [r for r in runs if r["kind"] == "attention"]
    plain_runs = [r for r in runs if r["kind"] == "plain"]
    goals = {
        "attention_99_percent_within_60_s": all(
            r["seconds_to_99"] is not None and r["seconds_to_99"] <= GOAL_SECONDS for r in attention_runs),
        "attention_stays_high_in_every_length_bucket": all(
            min(b["score"] for b in r["accuracy_by_length"]) >= GOAL_ACCURACY - 0.02 for r in attention_runs),
        "plain_accuracy_falls_with_length": all(
            r["accuracy_by_length"][0]["score"] > r["accuracy_by_length"][-1]["score"] + 0.5 for r in plain_runs),
        "plain_bleu_falls_with_length": all(
            r["bleu_by_length"][0]["score"] > r["bleu_by_length"][-1]["score"] for r in plain_runs),
    }
    for goal, met in goals.items():
        print(f"{'PASS' if met else 'FAIL'}  {goal}")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(dict(
        machine=dict(platform=platform.platform(), python=platform.python_version(), torch=torch.__version__,
                     cpus=os.cpu_count(), load_average_before=load_before, load_average_after=os.getloadavg()),
        corpus=dict(description=repr(corpus), held_out_unseen=unseen, length_edges=LENGTH_EDGES),
        model=MODEL, training=dict(**TRAINING, budget_s=args.budget, num_threads=1, seeds=args.seeds),
        seconds_per_step=step_times,
        runs=runs,
        goals=goals,
    ), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
