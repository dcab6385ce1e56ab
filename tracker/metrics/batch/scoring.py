"""Scoring a batch: the kernels run block by block, on a few threads for large batches.

This is the one loop over lists in the package (over blocks of thousands of lists, not
over single lists).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tracker.metrics.batch.inputs import EncodedLists, ServedPositions, check_k
from tracker.metrics.batch.judged import Kernel

# Ranks (list positions) per block of lists judged at once.
BLOCK_RANKS = 1 << 16
# Batches of at least this many lists are scored by up to MAX_WORKERS threads.
PARALLEL_LISTS = 50_000
MAX_WORKERS = 4


def block_rows(width: int) -> int:
    """Lists per block so that a block holds about ``BLOCK_RANKS`` ranks."""
    return max(64, BLOCK_RANKS // max(width, 1))


def score_blocks(
    blocks: Iterable[EncodedLists | ServedPositions],
    n_lists: int,
    kernels: Mapping[str, Kernel],
    depth: int | None,
    workers: int | None = None,
) -> dict[str, np.ndarray]:
    """Judge each block of lists to ``depth`` and run every kernel on it.

    Returns one float64 array of ``n_lists`` values per kernel name; ``blocks`` must
    cover the lists in order. This is the one loop over lists in the package (over
    blocks of thousands of lists, not over single lists). ``workers`` threads score
    blocks at once (numpy's sorts and array operations release the GIL; each block
    writes its own slice of the outputs): ``None`` picks :func:`default_workers`, 1
    scores in the calling thread.
    """
    out = {name: np.empty(n_lists, dtype=np.float64) for name in kernels}

    def score(block: EncodedLists | ServedPositions, start: int) -> None:
        judged = block.judged(depth)
        stop = start + judged.n_lists
        for name, kernel in kernels.items():
            out[name][start:stop] = kernel(judged)

    workers = default_workers(n_lists) if workers is None else check_k(workers, "workers")
    start = 0
    if workers == 1:
        for block in blocks:
            score(block, start)
            start += block.n_lists
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="tracker-metrics") as pool:
            pending = []
            for block in blocks:
                pending.append(pool.submit(score, block, start))
                start += block.n_lists
            for future in pending:
                future.result()  # re-raises a kernel's error
    if start != n_lists:
        raise RuntimeError(f"blocks covered {start} lists, expected {n_lists}")
    return out


def default_workers(n_lists: int) -> int:
    """Threads worth scoring ``n_lists`` lists with: one per CPU up to ``MAX_WORKERS``,
    and one alone for batches too small to pay for a thread pool."""
    if n_lists < PARALLEL_LISTS:
        return 1
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def score_encoded(
    lists: EncodedLists | ServedPositions,
    kernels: Mapping[str, Kernel],
    depth: int | None,
    workers: int | None = None,
) -> dict[str, np.ndarray]:
    """:func:`score_blocks` over an encoded batch cut into blocks."""
    width = lists.width if depth is None else min(depth, lists.width)
    blocks = lists.blocks(block_rows(width))
    return score_blocks(blocks, lists.n_lists, kernels, depth, workers)


