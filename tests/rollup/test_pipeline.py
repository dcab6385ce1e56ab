"""The chunk pipeline on its own (no database): order, the bound on chunks in flight,
overlap of reading and scoring, errors."""

from __future__ import annotations

import threading
import time

import pytest

from tracker.rollup.pipeline import ChunkPipeline


class Tally:
    """Counts the chunks read or being scored at once (a chunk is in flight from the start
    of its read to the end of its score)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.reading_while_scoring = False
        self.scoring = 0

    def read(self, chunk: int) -> int:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.reading_while_scoring |= self.scoring > 0
        time.sleep(0.002 * (chunk % 3))
        return chunk

    def score(self, chunk: int) -> int:
        with self.lock:
            self.scoring += 1
        time.sleep(0.004 * ((7 - chunk) % 4))  # later chunks often finish first
        with self.lock:
            self.scoring -= 1
            self.now -= 1
        return chunk * chunk


@pytest.mark.parametrize("in_flight", [1, 2, 3], ids=lambda n: f"{n}-in-flight")
def test_results_come_in_chunk_order_and_never_more_in_flight_than_the_bound(in_flight):
    tally = Tally()
    with ChunkPipeline(tally.read, tally.score, in_flight=in_flight, scorers=2) as pipeline:
        out = list(pipeline.run(range(12)))
    assert out == [c * c for c in range(12)]
    assert tally.most <= in_flight
    assert tally.now == 0


def test_the_next_chunk_is_read_while_one_is_scored():
    tally = Tally()
    with ChunkPipeline(tally.read, tally.score, in_flight=2, scorers=1) as pipeline:
        assert len(list(pipeline.run(range(8)))) == 8
    assert tally.most == 2 and tally.reading_while_scoring


def test_results_are_handed_back_before_the_last_chunk_is_read():
    read = []

    def slow_read(chunk: int) -> int:
        read.append(chunk)
        time.sleep(0.01)
        return chunk

    with ChunkPipeline(slow_read, lambda c: c, in_flight=2) as pipeline:
        first = next(iter(pipeline.run(range(10))))
        assert first == 0 and len(read) < 10


@pytest.mark.parametrize("stage", ["read", "score"])
def test_an_error_of_a_read_or_a_score_is_raised_to_the_caller(stage):
    def fails(chunk: int) -> int:
        if chunk == 3:
            raise ValueError(f"{stage} of chunk 3")
        return chunk

    read, score = (fails, lambda c: c) if stage == "read" else (lambda c: c, fails)
    with ChunkPipeline(read, score) as pipeline, pytest.raises(ValueError, match=stage):
        list(pipeline.run(range(6)))


def test_a_side_read_runs_beside_the_chunks_and_scores_can_wait_for_it():
    ready = threading.Event()

    def side() -> str:
        ready.wait(5)
        return "popularity"

    pipeline = ChunkPipeline(lambda c: c, lambda c: (c, waiting.result()))
    with pipeline:
        waiting = pipeline.side(side)
        ready.set()
        assert list(pipeline.run(range(3))) == [(c, "popularity") for c in range(3)]
