"""The batch kernel every ranking metric shares.

Data path, for any number of lists at once::

    ids (any hashable)  --encoding-->  EncodedLists (integer codes)
                        --judge-->     Judged (a lists x depth hit/grade matrix, or
                                       one hit bit pattern per list)
                        --kernels-->   one float per list per metric

One module per step:

- :mod:`~tracker.metrics.batch.inputs`: :class:`EncodedLists` (served item codes and
  relevance judgements as integer arrays) and :class:`ServedPositions` (the rank of each
  relevant item already known), their validation, and :func:`pad` (the one
  ragged-to-padded routine of the project). A caller that already holds integer item codes
  (the rollup job) builds these directly and skips hashing ids.
- :mod:`~tracker.metrics.batch.judging`: :func:`judge` matches every served item against
  the relevance judgements of its list in one vectorised pass (a sort of int64 keys within
  each list, or one global sort) and applies the conventions every metric relies on:

  - only positive grades are relevant; |G| counts the distinct items with a grade > 0;
  - an item repeated within one list is relevant only at its first position;
  - a judgement listed twice for the same (list, item) keeps its largest grade.

- :mod:`~tracker.metrics.batch.judged`: :class:`Judged`, what every metric kernel reads.
  Binary lists judged to at most ``PATTERN_WIDTH`` ranks (the usual top-10 or top-16
  evaluation) are summarised as one int64 bit pattern per list, and a metric that reads
  only the hits (counts, first hit, DCG, AP's precision sum) is then one lookup in a table
  of its value for each of the ``2**k`` patterns (:meth:`Judged.hit_pattern`,
  :func:`pattern_table`): no matrix products, no scatter back to ranks.
- :mod:`~tracker.metrics.batch.scoring`: :func:`score_blocks` runs the kernels over
  bounded blocks of lists (about 65,000 ranks each): the arrays stay a few MiB, which
  keeps memory flat and the work in cache (about 2x faster than blocks of a million
  lists); large batches are scored by a few threads, since numpy releases the GIL in its
  sorts and array operations. The batching over lists lives only there.

The metric kernels (one file per family) are a few array operations over :class:`Judged`;
nothing loops over lists in Python. The tuning constants (``BLOCK_RANKS``,
``ROW_SORT_WASTE``, ``PATTERN_WIDTH``, ``PARALLEL_LISTS``, ``MAX_WORKERS``) are read from
the module that uses them; the names below are re-exported for convenience.
"""

from tracker.metrics.batch.inputs import (
    EncodedLists,
    ServedPositions,
    check_grades,
    check_k,
    pad,
)
from tracker.metrics.batch.judged import (
    PATTERN_WIDTH,
    Judged,
    Kernel,
    count_hits,
    discounts,
    first_hit_rank,
    pattern_table,
)
from tracker.metrics.batch.judging import ROW_SORT_WASTE, judge
from tracker.metrics.batch.scoring import (
    BLOCK_RANKS,
    MAX_WORKERS,
    PARALLEL_LISTS,
    block_rows,
    default_workers,
    score_blocks,
    score_encoded,
)

__all__ = [
    "BLOCK_RANKS",
    "MAX_WORKERS",
    "PARALLEL_LISTS",
    "PATTERN_WIDTH",
    "ROW_SORT_WASTE",
    "EncodedLists",
    "Judged",
    "Kernel",
    "ServedPositions",
    "block_rows",
    "check_grades",
    "check_k",
    "count_hits",
    "default_workers",
    "discounts",
    "first_hit_rank",
    "judge",
    "pad",
    "pattern_table",
    "score_blocks",
    "score_encoded",
]
