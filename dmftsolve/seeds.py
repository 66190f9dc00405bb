"""One seed convention for every random quantity of the library.

Every function that draws random numbers takes ``seed: SeedLike``:

* ``None`` — fresh entropy from the operating system;
* an ``int >= 0`` — ``numpy.random.SeedSequence(seed)``;
* a :class:`numpy.random.SeedSequence` — used as it is (never mutated);
* a :class:`numpy.random.Generator` — used as it is by :func:`as_generator`;
  :func:`as_seed_sequence` draws a fresh ``SeedSequence`` from it (which
  advances the generator).

Independent streams are children of a root ``SeedSequence``: :func:`child`
makes the ``i``-th child exactly as ``SeedSequence.spawn`` would, without
mutating the root, so child ``i`` never depends on how many children are
made or in which order.

Examples
--------
>>> from dmftsolve.seeds import as_generator, spawn, child
>>> [s.spawn_key for s in spawn(7, 3)]
[(0,), (1,), (2,)]
>>> child(spawn(7, 3)[1], 4).spawn_key
(1, 4)
>>> float(as_generator(0).standard_normal()) == float(np.random.default_rng(0).standard_normal())
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SeedLike", "as_seed_sequence", "as_generator", "spawn", "child", "seed_record", "from_record"]

#: Anything accepted as a seed (see the module docstring).
SeedLike = int | np.random.SeedSequence | np.random.Generator | None


def as_seed_sequence(seed: SeedLike, *, parameter: str = "seed") -> np.random.SeedSequence:
    """Normalise ``seed`` to a :class:`numpy.random.SeedSequence`.

    Parameters
    ----------
    seed : int, SeedSequence, Generator or None
        See :data:`SeedLike`. A ``SeedSequence`` is returned as it is; a
        ``Generator`` gives a new ``SeedSequence`` from four of its draws.
    parameter : str
        Name of the caller's parameter, for the error message.

    Raises
    ------
    ValueError
        If ``seed`` is a bool, a negative integer or of another type.
    """
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2**63, size=4).tolist())
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(
            f"{parameter} must be None, an integer >= 0, a numpy SeedSequence or a numpy "
            f"Generator, got {seed!r}"
        )
    return np.random.SeedSequence(int(seed))


def as_generator(seed: SeedLike, *, parameter: str = "seed") -> np.random.Generator:
    """Return ``seed`` as a :class:`numpy.random.Generator`.

    A ``Generator`` is returned as it is (so its state is shared with the
    caller); anything else goes through :func:`as_seed_sequence`. For an
    integer this is the stream of ``numpy.random.default_rng(seed)``.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(as_seed_sequence(seed, parameter=parameter))


def child(seed: SeedLike, i: int) -> np.random.SeedSequence:
    """The ``i``-th child of ``as_seed_sequence(seed)``, as ``spawn`` makes it, without mutating it."""
    if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) or i < 0:
        raise ValueError(f"child index i must be an integer >= 0, got {i!r}")
    ss = as_seed_sequence(seed)
    return np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, int(i)), pool_size=ss.pool_size)


def spawn(seed: SeedLike, n: int) -> list[np.random.SeedSequence]:
    """Children ``0 … n−1`` of ``as_seed_sequence(seed)`` (see :func:`child`); the root is not mutated.

    A ``Generator`` seed is drawn from once, so all children share one root.
    """
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    root = as_seed_sequence(seed)
    return [child(root, i) for i in range(int(n))]


def seed_record(ss: np.random.SeedSequence) -> dict[str, Any]:
    """JSON-ready record of a ``SeedSequence``: ``{"entropy": …, "spawn_key": [...]}``.

    ``numpy.random.SeedSequence(r["entropy"], spawn_key=tuple(r["spawn_key"]))``
    rebuilds it.
    """
    if not isinstance(ss, np.random.SeedSequence):
        raise ValueError(f"ss must be a numpy SeedSequence, got {ss!r}")
    return {"entropy": ss.entropy, "spawn_key": list(ss.spawn_key)}


def from_record(record: dict[str, Any]) -> np.random.SeedSequence:
    """Rebuild the ``SeedSequence`` of a :func:`seed_record` (e.g. a result's ``settings["root_seed"]``)."""
    try:
        return np.random.SeedSequence(record["entropy"], spawn_key=tuple(record["spawn_key"]))
    except (KeyError, TypeError) as exc:
        raise ValueError(
            f"record must be a seed_record dict with entropy and spawn_key, got {record!r}"
        ) from exc
