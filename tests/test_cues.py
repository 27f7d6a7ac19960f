"""Chapter 3's playroom: moving animals stand out, a query for the car finds the car, and interest outlasts salience."""

from __future__ import annotations

import math
import warnings

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

from attention_course.attention import softmax
from attention_course.cues import (
    FEATURE_NAMES,
    SALIENCE_WEIGHTS,
    attention_over_time,
    describe,
    interest_scores,
    make_toy_scene,
    salience_scores,
)

SEEDS = range(10)


def test_a_scene_is_seeded_and_its_toys_do_not_overlap():
    scene = make_toy_scene(seed=3)
    again = make_toy_scene(seed=3)
    assert torch.equal(scene.positions, again.positions) and torch.equal(scene.colours, again.colours)
    assert not torch.equal(scene.positions, make_toy_scene(seed=4).positions)
    n = len(scene)
    assert scene.positions.shape == scene.velocities.shape == (n, 2)
    assert scene.colours.shape == (n, 3) and scene.sizes.shape == (n,)
    gaps = torch.cdist(scene.positions, scene.positions) - scene.sizes[:, None] - scene.sizes[None, :]
    assert (gaps + 10 * torch.eye(n)).min() > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_only_the_animals_move_and_the_car_is_the_farthest_toy(seed):
    scene = make_toy_scene(seed)
    features = scene.features()
    assert features.shape == (len(scene), len(FEATURE_NAMES))
    speed = features[:, FEATURE_NAMES.index("speed")]
    animals = torch.tensor([k == "animal" for k in scene.kinds])
    assert (speed[animals] > 0.5).all() and (speed[~animals] == 0).all()
    distance = (scene.positions - scene.child).norm(dim=-1)
    assert distance.argmax() == scene.index("car")
    visibility = features[:, FEATURE_NAMES.index("visibility")]
    assert visibility.max() == 1.0 and (visibility > 0).all()


def test_salience_is_the_contrast_with_the_other_toys_mean():
    # Three toys, one feature: the others' means are 0.5, 0.5 and 0, so the contrasts are 0.5, 0.5, 1.
    features = torch.tensor([[0.0], [0.0], [1.0]])
    assert torch.allclose(salience_scores(features, torch.tensor([1.0])), torch.tensor([0.5, 0.5, 1.0]))
    assert torch.allclose(salience_scores(features, torch.tensor([2.0])), torch.tensor([1.0, 1.0, 2.0]))
    # Toys that all look alike: nothing stands out.
    assert torch.equal(salience_scores(torch.ones(4, 8)), torch.zeros(4))


def test_what_a_toy_is_does_not_change_its_salience():
    features = make_toy_scene(0).features()
    relabelled = features.clone()
    kinds = torch.rand(len(features), 3, generator=torch.Generator().manual_seed(0))  # wheels, legs, round
    relabelled[:, FEATURE_NAMES.index("wheels"):] = kinds
    assert torch.equal(salience_scores(features), salience_scores(relabelled))
    assert SALIENCE_WEIGHTS.shape == (len(FEATURE_NAMES),)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_moving_animals_are_the_most_salient_toys(seed):
    scene = make_toy_scene(seed)
    top3 = salience_scores(scene.features()).topk(3).indices.tolist()
    assert {scene.kinds[i] for i in top3} == {"animal"}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_query_for_wheels_finds_the_car(seed):
    scene = make_toy_scene(seed)
    scores = interest_scores(scene.features(), describe(wheels=1.0))
    expected = torch.zeros(len(scene))
    expected[scene.index("car")] = 1.0
    assert torch.equal(scores, expected)
    weights = softmax(4.0 * scores)
    n = len(scene)
    assert weights[scene.index("car")].item() == pytest.approx(math.e**4 / (math.e**4 + n - 1))


def test_a_query_for_legs_shares_attention_among_the_animals():
    scene = make_toy_scene(0)
    weights = softmax(4.0 * interest_scores(scene.features(), describe(legs=1.0)))
    animals = [i for i, k in enumerate(scene.kinds) if k == "animal"]
    assert torch.allclose(weights[animals], weights[animals[0]].expand(len(animals)))
    assert weights[animals].sum() > 0.9


def test_describe_names_features_and_rejects_unknown_ones():
    assert describe(wheels=1.0, speed=0.5).tolist() == [0, 0, 0, 0.5, 0, 1.0, 0, 0]
    with pytest.raises(ValueError, match="unknown feature"):
        describe(tail=1.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_attention_moves_from_the_animals_to_the_car_and_stays(seed):
    scene = make_toy_scene(seed)
    features = scene.features()
    salience = salience_scores(features) / 0.25
    interest = 4.0 * interest_scores(features, describe(wheels=1.0))
    times = torch.linspace(0, 60, 121)
    weights = attention_over_time(salience, interest, times)
    assert weights.shape == (121, len(scene))
    assert torch.allclose(weights.sum(dim=-1), torch.ones(121))
    assert torch.allclose(weights[0], softmax(salience))
    assert scene.kinds[weights[0].argmax()] == "animal"
    car = scene.index("car")
    assert weights[-1].argmax() == car
    # Stronger: the car ends up with more weight than any toy had at first.
    assert weights[-1, car] > weights[0].max()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(interest=torch.zeros(3)), "must both have shape"),
        (dict(habituation=0.0), "must be > 0"),
    ],
)
def test_attention_over_time_rejects_bad_input(kwargs, message):
    args = dict(salience=torch.zeros(4), interest=torch.zeros(4), times=torch.arange(3.0)) | kwargs
    with pytest.raises(ValueError, match=message):
        attention_over_time(**args)


def test_score_functions_reject_bad_shapes():
    with pytest.raises(ValueError, match="features must have shape"):
        salience_scores(torch.zeros(1, 8))
    with pytest.raises(ValueError, match="weights must have shape"):
        salience_scores(torch.zeros(3, 8), torch.ones(3))
    with pytest.raises(ValueError, match="query must have shape"):
        interest_scores(torch.zeros(3, 8), torch.zeros(4))


def test_the_figures_draw_every_toy_and_both_cues():
    from attention_course.figures.cues import draw_attention_over_time, draw_two_cues
    from attention_course.plotting import use_course_style

    scene = make_toy_scene(3)
    features = scene.features()
    salience = softmax(salience_scores(features) / 0.25)
    interest = softmax(4.0 * interest_scores(features, describe(wheels=1.0)))
    times = torch.linspace(0, 60, 31)
    # The course style changes rcParams and warning filters; keep both to this test.
    with matplotlib.rc_context(), warnings.catch_warnings():
        use_course_style()
        warnings.simplefilter("error")  # a missing glyph or any other warning fails the test
        fig = draw_two_cues(scene, salience, interest)
        fig.canvas.draw()
        titles = " ".join(ax.get_title() for ax in fig.axes)
        assert "非自主性提示" in titles and "自主性提示" in titles
        assert len(fig.axes[2].patches) == len(scene)  # one bar per toy
        fig = draw_attention_over_time(scene, times, attention_over_time(salience.log(), interest.log(), times))
        fig.canvas.draw()
        assert len(fig.axes[0].lines) >= 5
        plt.close("all")
