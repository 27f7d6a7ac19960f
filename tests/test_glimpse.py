"""Chapter 1's glance at a scene: attention focuses on what the query asks for."""

from __future__ import annotations

import pytest
import torch

from attention_course.glimpse import PALETTE, glimpse, make_scene


def test_a_scene_is_seeded_and_has_exactly_one_red_patch():
    scene = make_scene(rows=5, cols=7, seed=3)
    assert scene.shape == (5, 7, 3)
    assert torch.equal(scene, make_scene(rows=5, cols=7, seed=3))
    assert not torch.equal(scene, make_scene(rows=5, cols=7, seed=4))
    nearest = torch.cdist(scene.reshape(-1, 3), PALETTE).argmin(dim=1)
    assert (nearest == 0).sum() == 1


def test_looking_for_red_finds_the_red_patch():
    scene = make_scene(seed=0)
    seen, weights = glimpse(scene, PALETTE[0], temperature=0.05)
    assert weights.shape == scene.shape[:2]
    assert weights.sum().item() == pytest.approx(1.0, abs=1e-6)
    red_patch = torch.cdist(scene.reshape(-1, 3), PALETTE[:1]).argmin()
    assert weights.flatten().argmax() == red_patch
    assert torch.allclose(seen, scene.reshape(-1, 3)[red_patch], atol=0.05)


def test_a_hot_temperature_sees_the_plain_average():
    scene = make_scene(seed=1)
    seen, weights = glimpse(scene, PALETTE[0], temperature=1e4)
    assert torch.allclose(weights, torch.full_like(weights, 1 / weights.numel()), atol=1e-5)
    assert torch.allclose(seen, scene.reshape(-1, 3).mean(0), atol=1e-4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(scene=torch.zeros(4, 3)), "scene must have shape"),
        (dict(query=torch.zeros(4)), "query must be one colour"),
        (dict(temperature=0.0), "temperature must be positive"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(kwargs, message):
    args = dict(scene=make_scene(), query=PALETTE[0], temperature=0.1) | kwargs
    with pytest.raises(ValueError, match=message):
        glimpse(**args)


def test_a_scene_needs_two_patches():
    with pytest.raises(ValueError, match="at least two patches"):
        make_scene(rows=1, cols=1)
