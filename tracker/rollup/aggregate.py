"""From impression values to unit-day outcomes, and from units to arm sufficient statistics.

- **Unit = user.** A user's value for a metric over a period is the mean of that metric over
  the user's impressions in the period (impressions where the metric is defined); the arm's
  value is the mean over its users. Users with impressions but no interactions count, with 0.
- **Crossover users** (seen in more than one arm over the period) are counted, and excluded
  from the metrics.
- Stored per (arm, metric, k): users n, Σx, Σx² over the users' values, and for the ratio
  (per-impression) view with the user as the unit: Σm, Σm², Σy, Σy², Σy·m where m is the
  user's number of impressions and y = x·m the user's sum (see
  :class:`tracker.stats.RatioStats`).

Everything is vectorised numpy over (user, arm) rows; no Python loop per user.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracker.rollup.outcomes import Layout


@dataclass(frozen=True)
class UnitTotals:
    """Per (user, arm) totals over a period: impressions, and per layout column the sum of
    the values and the number of impressions where the metric is defined."""

    users: np.ndarray  # object array of user ids
    arms: np.ndarray  # int64 arm ids
    impressions: np.ndarray  # int64
    sums: np.ndarray  # float64 (rows, columns)
    counts: np.ndarray  # float64 (rows, columns)

    @property
    def size(self) -> int:
        return int(self.users.size)

    @classmethod
    def empty(cls, columns: int) -> UnitTotals:
        return cls(np.empty(0, dtype=object), np.empty(0, dtype=np.int64),
                   np.empty(0, dtype=np.int64), np.zeros((0, columns)), np.zeros((0, columns)))

    @classmethod
    def concat(cls, parts: list[UnitTotals], columns: int) -> UnitTotals:
        if not parts:
            return cls.empty(columns)
        return cls(np.concatenate([p.users for p in parts]),
                   np.concatenate([p.arms for p in parts]),
                   np.concatenate([p.impressions for p in parts]),
                   np.concatenate([p.sums for p in parts]),
                   np.concatenate([p.counts for p in parts]))

    def reduce(self) -> UnitTotals:
        """Add up rows of the same (user, arm); rows come out sorted by (user, arm)."""
        if self.size == 0:
            return self
        user_codes, user_index = _factorize(self.users)
        arm_codes, arm_index = np.unique(self.arms, return_inverse=True)
        key = user_index.astype(np.int64) * arm_codes.size + arm_index
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        keys = key[starts]
        sums = np.add.reduceat(self.sums[order], starts, axis=0)
        counts = np.add.reduceat(self.counts[order], starts, axis=0)
        impressions = np.add.reduceat(self.impressions[order], starts)
        return UnitTotals(user_codes[keys // arm_codes.size], arm_codes[keys % arm_codes.size],
                          impressions, sums, counts)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and each value's index among them (hash-based)."""
    codes, uniques = pd.factorize(values, sort=True)
    return np.asarray(uniques, dtype=object), codes


def unit_totals(users: np.ndarray, arms: np.ndarray, values: np.ndarray,
                defined: np.ndarray) -> UnitTotals:
    """Per (user, arm) totals of per-impression values (one row per impression in)."""
    return UnitTotals(users.astype(object), arms.astype(np.int64),
                      np.ones(users.size, dtype=np.int64), np.where(defined, values, 0.0),
                      defined.astype(np.float64)).reduce()


@dataclass(frozen=True)
class ArmStats:
    """Sufficient statistics of one arm for every layout column (arrays over columns)."""

    arm_id: int
    users: np.ndarray
    sum: np.ndarray
    sum_sq: np.ndarray
    impressions: np.ndarray
    impressions_sq: np.ndarray
    ratio_sum: np.ndarray
    ratio_sum_sq: np.ndarray
    ratio_cross: np.ndarray


@dataclass(frozen=True)
class Health:
    """Users and impressions per arm (crossover users included in each arm they were in),
    crossover users per arm, and the experiment's distinct users and crossover users."""

    arms: dict[int, tuple[int, int, int]]  # arm -> (users, impressions, crossover users)
    users: int
    impressions: int
    crossover_users: int


def crossover_mask(totals: UnitTotals) -> np.ndarray:
    """Rows whose user appears with more than one arm (``totals`` reduced, sorted by user)."""
    if totals.size == 0:
        return np.zeros(0, dtype=bool)
    _, index = _factorize(totals.users)
    per_user = np.bincount(index)
    return per_user[index] > 1


def health(totals: UnitTotals) -> Health:
    crossed = crossover_mask(totals)
    arms = {}
    for arm in np.unique(totals.arms):
        rows = totals.arms == arm
        arms[int(arm)] = (int(rows.sum()), int(totals.impressions[rows].sum()),
                          int((rows & crossed).sum()))
    distinct = _factorize(totals.users)[0].size if totals.size else 0
    crossed_users = _factorize(totals.users[crossed])[0].size if crossed.any() else 0
    return Health(arms, int(distinct), int(totals.impressions.sum()), int(crossed_users))


def arm_stats(totals: UnitTotals, arm_ids: list[int]) -> list[ArmStats]:
    """Per arm, the sufficient statistics of every column over its non-crossover users."""
    keep = ~crossover_mask(totals)
    out = []
    for arm in arm_ids:
        rows = keep & (totals.arms == arm)
        sums, counts = totals.sums[rows], totals.counts[rows]
        present = counts > 0
        x = np.divide(sums, counts, out=np.zeros_like(sums), where=present)
        m = np.where(present, counts, 0.0)
        out.append(ArmStats(
            arm_id=int(arm), users=present.sum(axis=0), sum=x.sum(axis=0),
            sum_sq=(x * x).sum(axis=0), impressions=m.sum(axis=0),
            impressions_sq=(m * m).sum(axis=0), ratio_sum=sums.sum(axis=0),
            ratio_sum_sq=(sums * sums).sum(axis=0), ratio_cross=(sums * m).sum(axis=0),
        ))
    return out


def metric_rows(stats: list[ArmStats], layout: Layout) -> list[dict]:
    """``rollup_metric`` rows (without experiment, day, cumulative, provisional)."""
    rows = []
    for arm in stats:
        for j, (metric, k) in enumerate(layout.columns):
            rows.append({
                "arm_id": arm.arm_id, "metric": metric, "k": k, "kind": "user",
                "users": int(arm.users[j]), "sum": float(arm.sum[j]),
                "sum_sq": float(arm.sum_sq[j]), "impressions": float(arm.impressions[j]),
                "impressions_sq": float(arm.impressions_sq[j]),
                "ratio_sum": float(arm.ratio_sum[j]), "ratio_sum_sq": float(arm.ratio_sum_sq[j]),
                "ratio_cross": float(arm.ratio_cross[j]),
            })
    return rows
