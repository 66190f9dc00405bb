"""The seed convention of dmftsolve.seeds (reference: numpy's own SeedSequence.spawn)."""

from __future__ import annotations

import numpy as np
import pytest

from dmftsolve.seeds import as_generator, as_seed_sequence, child, seed_record, spawn


def test_children_equal_numpy_spawn_and_do_not_mutate_the_root():
    root = np.random.SeedSequence(1234)
    ours = spawn(root, 3)
    assert root.n_children_spawned == 0
    theirs = np.random.SeedSequence(1234).spawn(3)
    for a, b in zip(ours, theirs, strict=True):
        assert a.spawn_key == b.spawn_key
        assert np.array_equal(a.generate_state(4), b.generate_state(4))
    assert child(child(root, 1), 2).spawn_key == (1, 2)


def test_int_seed_gives_the_default_rng_stream():
    assert np.array_equal(as_generator(5).standard_normal(4), np.random.default_rng(5).standard_normal(4))
    g = np.random.default_rng(0)
    assert as_generator(g) is g
    assert as_seed_sequence(None).entropy != as_seed_sequence(None).entropy


def test_generator_seed_is_reproducible():
    a = as_seed_sequence(np.random.default_rng(3))
    b = as_seed_sequence(np.random.default_rng(3))
    assert a.entropy == b.entropy


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3", [1]])
def test_bad_seed_names_the_parameter(bad):
    with pytest.raises(ValueError, match="my_seed must be"):
        as_seed_sequence(bad, parameter="my_seed")
    with pytest.raises(ValueError, match="rng must be"):
        as_generator(bad, parameter="rng")


def test_bad_counts_and_records():
    with pytest.raises(ValueError, match="n must be"):
        spawn(0, -1)
    with pytest.raises(ValueError, match="child index"):
        child(0, -2)
    with pytest.raises(ValueError, match="ss must be"):
        seed_record(3)
    r = seed_record(child(9, 2))
    ss = np.random.SeedSequence(r["entropy"], spawn_key=tuple(r["spawn_key"]))
    assert np.array_equal(ss.generate_state(2), child(9, 2).generate_state(2))
