"""CUPED and the trend test on simulated recommender experiments with persistent users.

Not a test: a reproducible simulation that prints the figures quoted in
``benchmarks/README.md`` ("Variance reduction (CUPED) and trends"). Run from the
repository root:

    .venv/bin/python benchmarks/cuped.py            # about 2-3 minutes on the shared machine

The outcome model (per user, independently; every user's whole outcome is
attributed to her first day, so the cumulative sums of a day are sums of daily ones):

- persistent engagement e ~ Gamma(1, 1); per-list hit propensity q = min(0.9, 0.12 e)
  (× (1 + lift) in the treatment arm);
- 20 % of users are new (no history at all; a second run has none); the others have 10 e expected
  interactions in the 14 pre-exposure days (Poisson) and Poisson(3 e) lists served;
- in the experiment, 1 + Poisson(3 e) lists; each list is a hit with probability q, and
  its NDCG-like value is hit × Uniform(0.3, 1);
- metrics per user: **hit rate** (binary: any hit during the experiment) and
  **NDCG-like** (mean over the user's lists, bounded in [0, 1]);
- covariates per metric (``CovariateMeanStats``): the pre-period interaction count, the
  pre-period value of the same metric (0 when no list was served before) and the
  indicator of no pre-period lists;
- first day since the start P(d) ∝ 0.85^d over 14 days (daily looks).

The trend section simulates per-day outcomes by days since exposure for the same users
(persistent engagement, so the days' estimates are correlated) and tests the slope of
the daily relative lift of the per-impression hit rate (``RatioStats``, delta method).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from calibration import band, pct  # benchmarks/ is on sys.path when run as a script
from scipy import stats as sps

from tracker.stats import (
    CovariateMeanStats,
    RatioStats,
    compare,
    compare_adjusted,
    compare_adjusted_sequential,
    trend_test,
)

ALPHA = 0.05
DAYS = 14
METRICS = ("hit_rate", "ndcg")


def simulate(
    rng: np.random.Generator, n: int, lift: float, new_share: float = 0.2
) -> dict[str, np.ndarray]:
    """Per-user outcomes and covariates of one arm (see the module docstring)."""
    engagement = rng.gamma(1.0, 1.0, n)
    q = np.minimum(0.9, 0.12 * engagement)
    q_arm = np.minimum(1.0, q * (1 + lift))
    has_history = rng.random(n) >= new_share
    pre_count = np.where(has_history, rng.poisson(10 * engagement), 0).astype(float)
    pre_lists = np.where(has_history, rng.poisson(3 * engagement), 0)
    lists = 1 + rng.poisson(3 * engagement)
    out = {"day": np.minimum(rng.geometric(0.15, n) - 1, DAYS - 1), "pre_count": pre_count,
           "no_pre": (pre_lists == 0).astype(float)}
    for prefix, count, prob in (("", lists, q_arm), ("pre_", pre_lists, q)):
        hits = rng.binomial(count, prob)
        # Σ over hit lists of Uniform(0.3, 1): a sum of `hits` uniforms, drawn at once
        gains = 0.3 * hits + 0.7 * _sum_uniforms(rng, hits)
        out[prefix + "hit_rate"] = (hits > 0).astype(float)
        out[prefix + "ndcg"] = np.divide(gains, count, out=np.zeros(n), where=count > 0)
    return out


def _sum_uniforms(rng: np.random.Generator, counts: np.ndarray) -> np.ndarray:
    total = np.zeros(counts.size)
    np.add.at(total, np.repeat(np.arange(counts.size), counts), rng.random(int(counts.sum())))
    return total


def arm_stats(users: dict[str, np.ndarray], metric: str, mask: np.ndarray) -> CovariateMeanStats:
    x = np.column_stack([users["pre_count"], users["pre_" + metric], users["no_pre"]])
    return CovariateMeanStats.from_values(users[metric][mask], x[mask])


def run(
    rng: np.random.Generator, reps: int, users: int, lift: float, new_share: float
) -> dict[str, np.ndarray]:
    """Per experiment and metric: p-values, lift-interval widths, always-valid rejections."""
    rows: dict[str, list] = {}
    for _ in range(reps):
        t = simulate(rng, users // 2, lift, new_share)
        c = simulate(rng, users // 2, 0.0, new_share)
        for metric in METRICS:
            last = compare_adjusted(arm_stats(t, metric, t["day"] >= 0),
                                    arm_stats(c, metric, c["day"] >= 0))
            seq_any = {"adj": False, "raw": False}
            for day in range(DAYS):
                s = compare_adjusted_sequential(arm_stats(t, metric, t["day"] <= day),
                                                arm_stats(c, metric, c["day"] <= day))
                seq_any["adj"] |= (s.comparison.p_value or 1.0) < ALPHA
                seq_any["raw"] |= (s.unadjusted.p_value or 1.0) < ALPHA
            for key, comparison in (("adj", last.comparison), ("raw", last.unadjusted)):
                lift_ci = comparison.relative_lift
                width = (lift_ci.ci_high - lift_ci.ci_low) if lift_ci.ok else np.nan
                rows.setdefault(f"{metric}/{key}/p", []).append(comparison.p_value)
                rows.setdefault(f"{metric}/{key}/width", []).append(width)
                rows.setdefault(f"{metric}/{key}/seq", []).append(seq_any[key])
            rows.setdefault(f"{metric}/reduction", []).append(last.variance_reduction)
    return {k: np.asarray(v, dtype=float) for k, v in rows.items()}


def width_and_power(
    rng: np.random.Generator, reps: int, users: int, lift: float, new_share: float
) -> None:
    aa, ab = run(rng, reps, users, 0.0, new_share), run(rng, reps, users, lift, new_share)
    low, high = band(ALPHA, reps)
    print(f"\n{new_share:.0%} new users. {reps:,} A/A and {reps:,} A/B experiments x {users:,} "
          f"users, {DAYS} daily looks; binomial 99 % band around 5 %: [{pct(low)}, {pct(high)}]")
    print("| metric | variance removed | lift-interval width, CUPED / raw | power +"
          f"{lift:.0%}, raw | power, CUPED | A/A fixed, CUPED (raw) | A/A always-valid any day, "
          "CUPED (raw) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for metric in METRICS:
        ratio = np.nanmean(aa[f"{metric}/adj/width"]) / np.nanmean(aa[f"{metric}/raw/width"])
        fp = float(np.mean(aa[f"{metric}/adj/p"] < ALPHA))
        inside = "inside" if low <= fp <= high else "OUTSIDE"
        print(f"| {metric} | {np.mean(aa[f'{metric}/reduction']):.1%} | {ratio:.3f} "
              f"({1 - ratio:.1%} narrower) | {pct(np.mean(ab[f'{metric}/raw/p'] < ALPHA))} | "
              f"{pct(np.mean(ab[f'{metric}/adj/p'] < ALPHA))} | {pct(fp)} ({inside} band) "
              f"({pct(np.mean(aa[f'{metric}/raw/p'] < ALPHA))}) | "
              f"{pct(np.mean(aa[f'{metric}/adj/seq']))} ({pct(np.mean(aa[f'{metric}/raw/seq']))})"
              " |")
    print("A/B always-valid power by day 14, CUPED (raw): " + ", ".join(
        f"{m} {pct(np.mean(ab[f'{m}/adj/seq']))} ({pct(np.mean(ab[f'{m}/raw/seq']))})"
        for m in METRICS))


def daily_series(rng: np.random.Generator, users: int, lifts: np.ndarray):
    """Relative lift of the per-impression hit rate on each day since exposure."""
    arms = []
    for arm_lift in (lifts, np.zeros(DAYS)):
        engagement = rng.gamma(1.0, 1.0, users)
        q = np.minimum(0.9, 0.12 * engagement)[:, None] * (1 + arm_lift)[None, :]
        lists = rng.poisson(0.4 * engagement[:, None], (users, DAYS))
        arms.append((rng.binomial(lists, np.minimum(q, 1.0)).astype(float), lists.astype(float)))
    estimates, variances = [], []
    for day in range(DAYS):
        (yt, mt), (yc, mc) = ((y[:, day], m[:, day]) for y, m in arms)
        r = compare(RatioStats.from_values(yt[mt > 0], mt[mt > 0]),
                    RatioStats.from_values(yc[mc > 0], mc[mc > 0])).relative_lift
        estimates.append(r.estimate)
        variances.append(r.std_error**2)
    return np.arange(DAYS, dtype=float), np.array(estimates), np.array(variances)


def trend_section(rng: np.random.Generator, reps: int, users: int) -> None:
    scenarios = {"A/A (no effect)": np.zeros(DAYS),
                 "constant +10 %": np.full(DAYS, 0.10),
                 "novelty: +30 % fading (0.8^day)": 0.30 * 0.8 ** np.arange(DAYS),
                 "novelty over a loss: -5 % + 30 % x 0.8^day":
                     -0.05 + 0.30 * 0.8 ** np.arange(DAYS)}
    low, high = band(ALPHA, reps)
    print(f"\nTrend test: {reps:,} experiments per scenario x {users:,} users per arm, "
          f"{DAYS} days since exposure; 99 % band around 5 %: [{pct(low)}, {pct(high)}]")
    print("| scenario | slope significant (WLS, dispersion-scaled t) | called fading "
          "| called growing | slope significant, variances at face value (z) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, lifts in scenarios.items():
        sig = fading = growing = face = 0
        for _ in range(reps):
            r = trend_test(*daily_series(rng, users, lifts))
            sig += r.p_value < ALPHA
            fading += r.direction == "fading"
            growing += r.direction == "growing"
            face_se = r.std_error / np.sqrt(r.dispersion)
            face += 2 * sps.norm.sf(abs(r.slope) / face_se) < ALPHA
        print(f"| {name} | {pct(sig / reps)} | {pct(fading / reps)} | {pct(growing / reps)} | "
              f"{pct(face / reps)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--users", type=int, default=4000, help="users per experiment")
    parser.add_argument("--lift", type=float, default=0.10)
    parser.add_argument("--trend-reps", type=int, default=2000)
    parser.add_argument("--trend-users", type=int, default=5000, help="users per arm")
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--trend-only", action="store_true", help="just the trend section")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    if args.trend_only:
        trend_section(rng, args.trend_reps, args.trend_users)
        print(f"\nelapsed {time.perf_counter() - started:.0f} s")
        return
    sample = simulate(rng, 200_000, 0.0)
    for metric in METRICS:
        has = sample["no_pre"] == 0
        r = np.corrcoef(sample[metric][has], sample["pre_" + metric][has])[0, 1]
        print(f"{metric}: mean {sample[metric].mean():.4f}; correlation with its pre-period "
              f"value among users with pre-period lists ({has.mean():.0%}): {r:.3f}")
    for new_share in (0.2, 0.0):
        width_and_power(rng, args.reps, args.users, args.lift, new_share)
    trend_section(rng, args.trend_reps, args.trend_users)
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
