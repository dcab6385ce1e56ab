"""Read ahead while scoring: the threads of one day's chunks, in one object.

A day is read and scored in chunks of impressions. Reading (the database, the driver,
Arrow) and scoring (numpy, which releases the GIL) overlap: while one chunk is scored the
next one is read. :class:`ChunkPipeline` owns the two thread pools and the bound on the
chunks in flight (read or being scored: each holds its tables in memory), and hands the
results back in chunk order, as soon as the first ones are done, so the caller folds them
while later chunks are still read: memory follows the chunks in flight, not the day.

It knows nothing of the rollup: ``read(chunk)`` and ``score(tables)`` are the caller's.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

Chunk = TypeVar("Chunk")
Tables = TypeVar("Tables")
Result = TypeVar("Result")

SCORERS = 2  # chunks scored at once (the machines this runs on: 2+ cores)
IN_FLIGHT = 3  # chunks read or being scored at once: one read while SCORERS score
# (with 2, a chunk was read only once one was scored: reads and scores took turns)


class ChunkPipeline(Generic[Chunk, Tables, Result]):
    """``read`` each chunk in a reader thread and ``score`` its tables in a scorer thread,
    with at most ``in_flight`` chunks read or being scored at once; :meth:`run` yields the
    results in chunk order. :meth:`side` runs another read (one the scorers wait for, say)
    in the reader pool. Use as a context manager: leaving it waits for every thread.

    >>> with ChunkPipeline(lambda c: c * 10, lambda t: t + 1) as pipeline:
    ...     list(pipeline.run([1, 2, 3]))
    [11, 21, 31]
    """

    def __init__(self, read: Callable[[Chunk], Tables], score: Callable[[Tables], Result],
                 *, in_flight: int = IN_FLIGHT, scorers: int = SCORERS) -> None:
        self._read, self._score = read, score
        self.in_flight = max(1, in_flight)
        self._slots = threading.Semaphore(self.in_flight)
        # the readers: the chunks in flight, and two side reads
        self._readers = ThreadPoolExecutor(max_workers=self.in_flight + 2)
        self._scorers = ThreadPoolExecutor(max_workers=max(1, scorers))

    def __enter__(self) -> ChunkPipeline[Chunk, Tables, Result]:
        return self

    def __exit__(self, *exc) -> None:
        self._readers.shutdown(wait=True, cancel_futures=True)
        self._scorers.shutdown(wait=True, cancel_futures=True)

    def side(self, read: Callable[[], Tables]) -> Future:
        """Run ``read`` in the reader pool (outside the bound on chunks in flight)."""
        return self._readers.submit(read)

    def _scored(self, tables: Future) -> Result:
        try:
            return self._score(tables.result())
        finally:
            self._slots.release()

    def run(self, chunks: Iterable[Chunk]) -> Iterator[Result]:
        """The results of the chunks, in order; the next chunk is read as soon as any
        chunk in flight is done. An error of a read or a score is raised here."""
        started: deque[Future] = deque()
        for chunk in chunks:
            self._slots.acquire()
            started.append(self._scorers.submit(self._scored,
                                                self._readers.submit(self._read, chunk)))
            while started and started[0].done():
                yield started.popleft().result()
        while started:
            yield started.popleft().result()
