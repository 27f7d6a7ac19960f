"""Section 6.2's experiment: the stored results hold what the page reads, a run is reproducible,
the extrapolation set is what it claims to be, the failure analysis counts what it says, and the
model cache returns the model it stored."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attention_course.corpus import ToyTranslationCorpus, Vocab
from attention_course.length_experiment import (
    EXTRAPOLATION,
    MODELS,
    RESULTS_PATH,
    WATCHED_PATHS,
    DirtyTreeError,
    corpus as experiment_corpus,
    decode_analysis,
    extrapolation_set,
    load_results,
    parameter_count,
    records,
    run_experiment,
    run_one,
    teacher_forced_ends,
    uncommitted_changes,
)
from attention_course.model_cache import cache_key, trained_model
from attention_course.seq2seq import build_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def results() -> dict:
    assert RESULTS_PATH.is_file(), "run bench/length_experiment.py to store the results section 6.2 reads"
    return load_results()


@pytest.fixture(scope="module")
def chapter_corpus() -> ToyTranslationCorpus:
    return experiment_corpus()


# --- the stored results ------------------------------------------------------------------------------


def test_the_stored_results_say_how_they_were_made(results):
    assert len(results["git_commit"]) == 40 and results["torch"]
    assert results["uncommitted_changes"] == [], "the stored results must come from committed code"
    assert set(results["machine"]) >= {"platform", "cpus", "load_average_before"}
    assert len(results["config"]["seeds"]) >= 5, "the step-matched comparison needs at least five seeds"
    assert set(results["config"]["models"]) == set(MODELS)


def test_every_run_the_page_reads_is_stored(results):
    config = results["config"]
    assert results["complete"]
    expected = [
        ("plain", config["seeds"], [500, config["more_steps"]]),
        ("attention", config["seeds"], [500]),
        ("bidirectional", config["bidirectional_seeds"], [500]),
        ("plain", config["long_seeds"], config["long_steps"]),
    ]
    for model, seeds, steps_list in expected:
        for steps in steps_list:
            assert set(seeds) <= {r["seed"] for r in records(results, model, steps)}, (model, steps)
    labels = [b["label"] for b in records(results, "plain")[0]["held_out"]["buckets"]]
    for record in results["records"]:
        assert [b["label"] for b in record["held_out"]["buckets"]] == labels
        assert sum(b["sentences"] for b in record["held_out"]["buckets"]) == results["corpus"]["held_out"]
        assert len(record["extrapolation"]["per_sentence"]) == results["corpus"]["extrapolation_sentences"]
        assert ("alignment" in record) == (record["model"] != "plain")
        assert record["train_seconds"] > 0


# --- the experiment runs only from committed code ------------------------------------------------------


def _git(repo, *args):
    import subprocess

    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_uncommitted_changes_lists_changed_and_new_files_where_the_experiment_lives(tmp_path):
    for path in ("attention_course/model.py", "bench/run.py", "book/data/results.json", "book/page.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x\n")
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "all")
    assert uncommitted_changes(tmp_path) == []
    (tmp_path / "book/page.md").write_text("prose may change\n")  # not what the experiment runs
    (tmp_path / "attention_course/__pycache__").mkdir()
    (tmp_path / "attention_course/__pycache__/model.pyc").write_text("ignored")
    assert uncommitted_changes(tmp_path) == []
    (tmp_path / "attention_course/model.py").write_text("y\n")
    (tmp_path / "bench/new.py").write_text("new\n")
    (tmp_path / "book/data/results.json").unlink()
    changed = uncommitted_changes(tmp_path)
    assert sorted(line[3:] for line in changed) == ["attention_course/model.py", "bench/new.py", "book/data/results.json"]
    assert uncommitted_changes(tmp_path / "not-a-repository") is None
    assert set(WATCHED_PATHS) == {"attention_course", "bench", "book/data"}


def test_the_experiment_refuses_a_dirty_tree_before_any_work(monkeypatch):
    from attention_course import length_experiment

    def no_training(*args, **kwargs):
        raise AssertionError("the experiment started work on a dirty tree")

    monkeypatch.setattr(length_experiment, "corpus", no_training)
    for listed in (["?? bench/scratch.py"], None):
        monkeypatch.setattr(length_experiment, "uncommitted_changes", lambda *a, listed=listed, **k: listed)
        with pytest.raises(DirtyTreeError, match="commit"):
            run_experiment()
    monkeypatch.setattr(length_experiment, "uncommitted_changes", lambda *a, **k: [" M attention_course/x.py"])
    with pytest.raises(AssertionError, match="started work"):  # --allow-dirty goes on
        run_experiment(allow_dirty=True)


def test_the_bench_script_says_why_it_refuses_and_exits_non_zero(monkeypatch, capsys):
    import runpy
    import sys

    from attention_course import length_experiment

    monkeypatch.setattr(length_experiment, "uncommitted_changes", lambda *a, **k: [" M attention_course/x.py"])
    monkeypatch.setattr(sys, "argv", ["length_experiment.py"])
    bench = Path(length_experiment.ROOT) / "bench" / "length_experiment.py"
    with pytest.raises(SystemExit) as stopped:
        runpy.run_path(str(bench), run_name="__main__")
    assert stopped.value.code == 2
    message = capsys.readouterr().err
    assert "refusing to run" in message and "attention_course/x.py" in message and "--allow-dirty" in message


def test_the_stored_parameter_counts_are_the_models(results, chapter_corpus):
    for name, kwargs in MODELS.items():
        assert results["parameters"][name] == parameter_count(build_model(chapter_corpus, **kwargs))


# --- the extrapolation set -----------------------------------------------------------------------------


def test_the_extrapolation_set_is_longer_than_training_and_uses_only_known_words(chapter_corpus):
    pairs = extrapolation_set(chapter_corpus, **EXTRAPOLATION)
    assert len(pairs) == EXTRAPOLATION["num_pairs"] == len({p.source for p in pairs})
    assert min(len(p.source) for p in pairs) > max(len(p.source) for p in chapter_corpus.train_pairs)
    assert min(len(p.target) for p in pairs) > max(len(p.target) for p in chapter_corpus.train_pairs)
    assert {p.source.count("and") + 1 for p in pairs} <= {4, 5}
    for pair in pairs:
        assert Vocab.unk_id not in chapter_corpus.source_vocab.encode(pair.source)
        assert Vocab.unk_id not in chapter_corpus.target_vocab.encode(pair.target)


# --- runs and their analysis ----------------------------------------------------------------------------

SMALL = {
    "corpus_settings": {"num_pairs": 400},
    "model_settings": {"embed_dim": 8, "hidden_dim": 16, "attention_dim": 8},
    "extrapolation": {"num_pairs": 12},
    "log_every": 10,
}


def _without_times(records_: list[dict]) -> list[dict]:
    return [{k: v for k, v in record.items() if k != "train_seconds"} for record in records_]


def test_a_short_run_gives_the_same_results_twice():
    first = run_one("bidirectional", 3, [10, 20], **SMALL)
    second = run_one("bidirectional", 3, [10, 20], **SMALL)
    assert [r["steps"] for r in first] == [10, 20]
    assert _without_times(first) == _without_times(second)
    other_seed = run_one("bidirectional", 4, [10], **SMALL)
    assert other_seed[0]["loss"] != first[0]["loss"]


def rig(model, token_id):
    """Make the decoder always predict ``token_id``."""
    with torch.no_grad():
        model.decoder.output.weight.zero_()
        model.decoder.output.bias.zero_()
        model.decoder.output.bias[token_id] = 10.0


def test_the_failure_analysis_tells_an_early_stop_from_a_run_to_the_limit(chapter_corpus):
    pairs = extrapolation_set(chapter_corpus, num_pairs=3)
    model = build_model(chapter_corpus, embed_dim=8, hidden_dim=16, attention_dim=8)
    rig(model, Vocab.eos_id)  # stops at once
    for row, pair in zip(decode_analysis(model, chapter_corpus, pairs), pairs):
        # positions count from 1: an <eos> in place of the first word is wrong at word 1
        assert row["ended"] and row["out"] == 0 and row["first_error"] == 1 and row["right_clauses"] == 0
        assert row["end_focus"] is not None and 0 < row["end_focus"] <= 1
    ends = teacher_forced_ends(model, chapter_corpus, pairs)  # counted the same way: <eos> at word 1
    assert ends["early_eos"] == 1 and ends["mean_first_eos"] == 1
    joiner = chapter_corpus.target_vocab.encode(["而且"])[0]
    rig(model, joiner)  # writes 而且 for ever: empty clauses, repeated, to the limit
    for row, pair in zip(decode_analysis(model, chapter_corpus, pairs), pairs):
        assert not row["ended"] and row["out"] == row["limit"] == 2 * len(pair.source) + 2
        assert row["repeats"] and row["out_clauses"] == row["out"] + 1 and row["end_focus"] is None


# --- the model cache -------------------------------------------------------------------------------------


def test_the_model_cache_returns_the_model_it_trained(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_COURSE_MODEL_CACHE", str(tmp_path))
    small = ToyTranslationCorpus(num_pairs=200, seed=0)
    kwargs = {"model_kwargs": {"attention": True, "embed_dim": 8, "hidden_dim": 16, "attention_dim": 8},
              "steps": 6, "batch_size": 32, "log_every": 3}
    model, history = trained_model(small, **kwargs)
    assert len(list(tmp_path.glob("*.pt"))) == 1
    again, again_history = trained_model(small, **kwargs)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    assert again_history == history
    assert cache_key(small, kwargs["model_kwargs"], {"steps": 6}) != cache_key(small, kwargs["model_kwargs"], {"steps": 7})
    other = ToyTranslationCorpus(num_pairs=200, seed=1)
    assert cache_key(small, {}, {}) != cache_key(other, {}, {})


# --- the section's figures -------------------------------------------------------------------------------

DRAW_THE_FIGURES = """
    import io
    import torch
    from attention_course.figures import encoder_decoder as figures
    from attention_course.plotting import use_course_style

    use_course_style()
    labels = ["3–5", "6–10", "21–30"]
    exact = {"plain": [[1.0, 0.5, 0.0], [0.9, 0.4, 0.1]], "attention": [[1.0, 1.0, 1.0], [1.0, 1.0, 0.98]]}
    bleu = {name: [[100 * x for x in run] for run in runs] for name, runs in exact.items()}
    lengths = {"plain": [[25, 60, 0, 0], [30, 29, 1, 1]], "bidirectional": [[25, 20, 1, 2], [31, 23, 1, 3]]}
    source = "Tom chase Jerry and the cat see Spike".split()
    output = "汤姆 追逐 杰瑞 而且 猫 看见".split()
    weights = torch.softmax(torch.randn(len(output) + 1, len(source)), -1)
    drawn = [
        figures.draw_seed_bands(labels, exact, bleu, {"plain": "without attention"}),
        figures.draw_output_lengths(lengths, 23, {"plain": "without attention"}),
        figures.draw_long_attention(weights, source, output, 4, title="a long sentence"),
    ]
    for fig in drawn:
        fig.savefig(io.BytesIO(), format="png")
    try:
        figures.draw_seed_bands(labels[:2], exact, bleu)
    except ValueError:
        print("refused")
    print(len(drawn))
"""


def test_the_sections_figures_draw_without_a_word_on_stderr_and_refuse_mismatched_buckets():
    from fresh_python import run_python

    result = run_python(DRAW_THE_FIGURES, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.split() == ["refused", "3"]


def test_teacher_forced_accuracy_is_counted_per_word_position(chapter_corpus):
    """by_position counts every reference word once, at its position; within and beyond split it at the
    longest training target."""
    from attention_course.length_experiment import teacher_forced_ends

    model = build_model(chapter_corpus, seed=0)
    long_pairs = extrapolation_set(chapter_corpus, num_pairs=12)
    ends = teacher_forced_ends(model, chapter_corpus, long_pairs)
    longest = max(len(p.target) for p in chapter_corpus.train_pairs)
    totals = [t for _, t in ends["by_position"]]
    assert sum(totals) == sum(len(p.target) for p in long_pairs)
    assert totals[0] == len(long_pairs) and totals == sorted(totals, reverse=True)
    assert len(totals) == max(len(p.target) for p in long_pairs) > longest
    within = ends["by_position"][:longest]
    assert ends["accuracy_within"] == pytest.approx(sum(h for h, _ in within) / sum(t for _, t in within))
