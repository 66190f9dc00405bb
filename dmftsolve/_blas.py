"""Limiting BLAS threads around small, many-call linear algebra."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    """One controller for the process: building one scans the loaded libraries (about 2 ms,
    paid by every DMFT draw before)."""
    return ThreadpoolController()


@contextlib.contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Limit BLAS to ``threads`` threads inside the block (None: leave unchanged).

    Uses :meth:`threadpoolctl.ThreadpoolController.limit` on a controller built once (the
    BLAS libraries loaded when it was first used). On small problems a single
    thread is much faster: waking BLAS worker threads for every small
    product costs more than the product, most of all on a loaded machine.
    """
    if threads is None:
        yield
        return
    with _controller().limit(limits=int(threads), user_api="blas"):
        yield
