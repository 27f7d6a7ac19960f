"""Chapter 12's experiment: the stored results hold every run the pages read and say how they were made,
a run is reproducible, and the bench refuses to store numbers that uncommitted code made."""

from __future__ import annotations

import pytest

from attention_course.length_experiment import (
    EXTRAPOLATION, DirtyTreeError, corpus as experiment_corpus, parameter_count,
)
from attention_course.transformer import build_transformer
from attention_course.transformer_length import (
    CHECKPOINTS, MODEL, RESULTS_PATH, SCHEMES, load_results, run_one,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def results() -> dict:
    assert RESULTS_PATH.is_file(), "run bench/transformer_length.py to store the results chapters 9, 10 and 12 read"
    return load_results()


def test_the_stored_results_name_their_commit_machine_and_settings(results):
    assert len(results["git_commit"]) == 40 and results["torch"].startswith("2.13.0")
    assert set(results["machine"]) >= {"platform", "cpus", "load_average_before"}
    assert results["config"]["model"] == MODEL and results["config"]["extrapolation"] == EXTRAPOLATION
    assert results["config"]["schemes"] == list(SCHEMES)


def test_every_scheme_has_five_seeds_or_more_at_every_checkpoint(results):
    seeds = results["config"]["seeds"]
    assert len(seeds) >= 5
    stored = {(r["scheme"], r["seed"], r["steps"]) for r in results["records"]}
    assert stored == {(scheme, seed, steps) for scheme in SCHEMES for seed in seeds for steps in CHECKPOINTS}
    for record in results["records"]:
        assert record["extrapolation"]["sentences"] == EXTRAPOLATION["num_pairs"]
        assert len(record["extrapolation"]["per_sentence"]) == EXTRAPOLATION["num_pairs"]


def test_the_stored_parameter_counts_are_the_models_of_todays_code(results):
    data = experiment_corpus()
    for scheme in SCHEMES:
        assert results["parameters"][scheme] == parameter_count(build_transformer(data, positions=scheme, **MODEL))


def test_a_short_run_gives_the_same_numbers_twice():
    settings = dict(corpus_settings={"num_pairs": 300}, model_settings={"d_model": 16, "num_heads": 2, "d_ff": 16},
                    extrapolation={"num_pairs": 8}, log_every=10)
    first = run_one("rope", 3, (10, 20), **settings)
    second = run_one("rope", 3, (10, 20), **settings)
    for a, b in zip(first, second):
        a.pop("train_seconds"), b.pop("train_seconds")
        assert a == b
    assert [r["steps"] for r in first] == [10, 20]


def test_the_experiment_refuses_uncommitted_code_before_any_work(monkeypatch):
    """The same rule as section 6.2's experiment, through the same check."""
    from attention_course import length_experiment, transformer_length

    def no_training(*args, **kwargs):
        raise AssertionError("the experiment started work on a dirty tree")

    monkeypatch.setattr(transformer_length, "corpus", no_training)
    monkeypatch.setattr(length_experiment, "uncommitted_changes", lambda *a, **k: [" M attention_course/positions.py"])
    with pytest.raises(DirtyTreeError, match="positions.py"):
        transformer_length.run_experiment()
    with pytest.raises(AssertionError, match="started work"):  # --allow-dirty goes on
        transformer_length.run_experiment(allow_dirty=True)


def test_the_stored_results_come_from_committed_code(results):
    assert results["uncommitted_changes"] == []
