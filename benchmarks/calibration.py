"""A/A (and A/B) calibration of ``tracker.stats`` on simulated recommender experiments.

Not a test: a reproducible simulation that prints the figures quoted in
``benchmarks/README.md`` ("Statistics calibration"). Run from the repository root:

    .venv/bin/python benchmarks/calibration.py

What it checks, each against the rate it should have:

1. Fixed-horizon Welch test, one look at the end (day 14), α = 0.05, in 2,000 A/A
   experiments: the false-positive rate must fall inside the binomial 99 % band
   around 5 %.
2. The same test looked at every day for 14 days, stopping at the first p < 0.05:
   the false-positive rate inflates. The always-valid confidence sequences
   (``compare_sequential``) looked at every day must stay at or below 5 %.
3. SRM: the chi-square test's false-alarm rate at p < 0.001 matches 0.1 %, the
   sequential test's stays below it despite 14 daily looks, and both catch an
   injected mismatch (assignment 51/49 instead of 50/50) at 100k users.
4. Power: in A/B experiments with a true +10 % lift in click propensity the
   fixed-horizon test detects the effect at the rate ``power_two_sample``
   predicts.
5. Small samples (n = 20 and 200 per arm, skewed exponential and binary outcomes):
   the A/A false-positive rate of the deciding test, the coverage of the 95 %
   relative-lift interval at a true +10 % lift, the pass rate of a relative
   guardrail whose true effect sits exactly on its 10 % margin (higher- and
   lower-is-better; should be 5 %), each beside the symmetric delta-method
   interval used before for contrast, and Holm's family-wise error over three
   primary metrics in A/A experiments (should be ≤ 5 %). Coverage is counted among
   the replicates whose Fieller interval is bounded (the rest are counted apart).
   ``--small-only`` runs just this part (about 30 s).
6. Decisions: in A/A experiments with two primaries and two guardrails (5 % margin), the
   rate at which the report's decision path (Welch per metric, Holm over the primaries,
   the guardrails' non-inferiority tests, the health checklist, ``decide``) says ``ship``
   must stay at or below α / 2 (a primary significantly *better* after Holm) and
   ``do not ship`` at or below α; at n = 50, 500 and 5,000 per arm; the same in sequential
   mode, and the always-valid power at the always-valid MDE. ``--decision-only`` runs just
   this part.
7. Trend of the lift over days since exposure (novelty), ``--trend-only``: the false-alarm
   rate of the report's test before issue 30 (``trend_test``) and of ``exposure_trend``
   (independent days, what the store's sums allow today; user-clustered, with the users'
   cross-day sums) in dense, staggered and sparse exposure, A/A and a constant lift; each
   should fall in the binomial 99 % band around 5 %.

The outcome model (per user, independently):

- impressions m = 1 + NegBin(0.8, 0.2): mean 4.2, most users see 1-3 lists, a
  long tail sees dozens;
- click propensity θ ~ Beta(0.3, 6): mean 4.8 %, most users almost never click;
- clicks ~ Binomial(m, θ · (1 + lift) for treatment);
- arm ~ Bernoulli(0.5); first-seen day front-loaded, P(day d) ∝ 0.85^d.

Two metrics are analysed: user-level click-through (the mean over a user's
impressions, then the mean over users; ``MeanStats``; ~87 % of users are 0)
and per-impression click-through with the user as the unit (``RatioStats``).
A user's whole outcome is attributed to her first day, so the cumulative
sufficient statistics of a day are the sums of the daily ones.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from tracker.stats import (
    ArmSample,
    MeanStats,
    RatioStats,
    Reason,
    compare,
    compare_sequential,
    holm,
    non_inferiority,
    power_two_sample,
    sequential_srm,
    srm_test,
)
from tracker.stats.compare import contrast
from tracker.stats.decision import GuardrailResult, PrimaryResult, decide
from tracker.stats.health import health_checklist
from tracker.stats.sequential import non_inferiority_sequential_of
from tracker.stats.trend import ExposureDays, exposure_trend, trend_test

ALPHA = 0.05
SRM_THRESHOLD = 0.001


@dataclass(frozen=True)
class Model:
    users: int  # users per experiment (both arms)
    days: int
    lift: float = 0.0  # relative lift of the treatment's click propensity
    treatment_share: float = 0.5

    @property
    def arrival(self) -> np.ndarray:
        p = 0.85 ** np.arange(self.days)
        return p / p.sum()


def simulate_users(rng: np.random.Generator, model: Model, count: int) -> dict[str, np.ndarray]:
    """``count`` independent users: arm (1 = treatment), first day, impressions, clicks."""
    arm = (rng.random(count) < model.treatment_share).astype(np.int64)
    day = rng.choice(model.days, size=count, p=model.arrival)
    impressions = 1 + rng.negative_binomial(0.8, 0.2, count)
    propensity = rng.beta(0.3, 6.0, count)
    propensity = np.where(arm == 1, np.minimum(propensity * (1 + model.lift), 1.0), propensity)
    clicks = rng.binomial(impressions, propensity)
    return {"arm": arm, "day": day, "impressions": impressions, "clicks": clicks}


def true_ctr(lift: float) -> tuple[float, float]:
    """Exact mean and standard deviation of a user's CTR under the model.

    CTR = clicks / m with clicks ~ Binomial(m, θ'), θ' = min(θ (1 + lift), 1),
    θ ~ Beta(0.3, 6) independent of m, so E[CTR] = E[θ'] and
    Var(CTR) = E[θ'(1 − θ')] · E[1/m] + Var(θ').
    """
    theta = sps.beta(0.3, 6.0)
    e1 = theta.expect(lambda t: np.minimum(t * (1 + lift), 1.0))
    e2 = theta.expect(lambda t: np.minimum(t * (1 + lift), 1.0) ** 2)
    k = np.arange(20_000)
    inverse_m = float(np.sum(sps.nbinom.pmf(k, 0.8, 0.2) / (1 + k)))
    return float(e1), float(np.sqrt((e1 - e2) * inverse_m + e2 - e1 * e1))


def cumulative_sums(
    rng: np.random.Generator, model: Model, experiments: int
) -> dict[str, np.ndarray]:
    """Sufficient statistics per (experiment, arm, day), cumulative over days.

    Returns arrays of shape (experiments, 2, days): users ``n``; user-level CTR
    sums ``sx``, ``sx2``; ratio sums ``sy``, ``sm``, ``sy2``, ``sm2``, ``sym``.
    """
    u = simulate_users(rng, model, experiments * model.users)
    experiment = np.repeat(np.arange(experiments), model.users)
    cell = (experiment * 2 + u["arm"]) * model.days + u["day"]
    size = experiments * 2 * model.days
    y = u["clicks"].astype(float)
    m = u["impressions"].astype(float)
    x = y / m
    weights = {"n": None, "sx": x, "sx2": x * x, "sy": y, "sm": m, "sy2": y * y,
               "sm2": m * m, "sym": y * m}
    out = {}
    for name, w in weights.items():
        daily = np.bincount(cell, weights=w, minlength=size).reshape(experiments, 2, model.days)
        out[name] = np.cumsum(daily, axis=2)
    return out


def analyse(sums: dict[str, np.ndarray], sequential: bool) -> dict[str, np.ndarray]:
    """p-values (fixed) and 'CS excludes 0' (sequential) per experiment and day."""
    experiments, _, days = sums["n"].shape
    fixed_p = {k: np.ones((experiments, days)) for k in ("mean", "ratio")}
    seq_reject = {k: np.zeros((experiments, days), dtype=bool) for k in ("mean", "ratio")}
    for e in range(experiments):
        for d in range(days):
            arms = []
            for a in (1, 0):  # treatment, control
                n = int(sums["n"][e, a, d])
                arms.append((
                    MeanStats(n, sums["sx"][e, a, d], sums["sx2"][e, a, d]),
                    RatioStats(n, sums["sy"][e, a, d], sums["sm"][e, a, d],
                               sums["sy2"][e, a, d], sums["sm2"][e, a, d],
                               sums["sym"][e, a, d]),
                ))
            for i, kind in enumerate(("mean", "ratio")):
                t, c = arms[0][i], arms[1][i]
                p = compare(t, c, level=1 - ALPHA).p_value
                fixed_p[kind][e, d] = 1.0 if p is None else p
                if sequential:
                    tested = compare_sequential(t, c, level=1 - ALPHA).decisive
                    if tested.ci_low is not None and tested.ci_high is not None:
                        seq_reject[kind][e, d] = tested.ci_low > 0 or tested.ci_high < 0
    return {"fixed_p": fixed_p, "seq_reject": seq_reject}


def run_experiments(
    rng: np.random.Generator, model: Model, experiments: int, chunk: int, sequential: bool
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    fixed = {"mean": [], "ratio": []}
    seq = {"mean": [], "ratio": []}
    final_users = []
    for start in range(0, experiments, chunk):
        size = min(chunk, experiments - start)
        sums = cumulative_sums(rng, model, size)
        result = analyse(sums, sequential)
        for kind in fixed:
            fixed[kind].append(result["fixed_p"][kind])
            seq[kind].append(result["seq_reject"][kind])
        final_users.append(sums["n"][:, :, -1])
    return (
        {k: np.concatenate(v) for k, v in fixed.items()},
        {k: np.concatenate(v) for k, v in seq.items()},
        np.concatenate(final_users).astype(np.int64),
    )


def band(rate: float, trials: int, coverage: float = 0.99) -> tuple[float, float]:
    """Central binomial band of the observed rate when the true rate is ``rate``."""
    low = sps.binom.ppf((1 - coverage) / 2, trials, rate) / trials
    high = sps.binom.ppf((1 + coverage) / 2, trials, rate) / trials
    return float(low), float(high)


def pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def srm_section(rng: np.random.Generator, replicates: int, users: int, days: int) -> None:
    arrival = Model(users, days).arrival

    def cumulative(share: float, count: int) -> np.ndarray:
        probs = np.outer(arrival, [share, 1 - share]).ravel()
        daily = rng.multinomial(users, probs, size=count).reshape(count, days, 2)
        return np.cumsum(daily, axis=1)

    print(f"\nSRM ({users:,} users, 50/50 declared, {days} daily looks)")
    print("| case | replicates | chi-square, last day | chi-square, any day "
          "| sequential, any day |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, share, count in (
        ("A/A (no mismatch)", 0.5, replicates),
        ("assignment 50.5/49.5", 0.505, replicates // 10),
        ("assignment 51/49 (injected 1 pp)", 0.51, replicates // 10),
    ):
        cum = cumulative(share, count)
        final_flag = np.array([srm_test(c[-1], [1, 1]).flagged for c in cum])
        # daily peeking with the fixed-horizon test, for contrast (vectorised chi-square)
        expected = cum.sum(axis=2, keepdims=True) / 2
        chi2 = ((cum - expected) ** 2 / expected).sum(axis=2)
        any_day = (sps.chi2.sf(chi2, 1) < SRM_THRESHOLD).any(axis=1)
        seq_flag = np.array([sequential_srm(c, [1, 1]).flagged for c in cum])
        print(f"| {label} | {count:,} | {pct(final_flag.mean())} | {pct(any_day.mean())} "
              f"| {pct(seq_flag.mean())} |")
    low, high = band(SRM_THRESHOLD, replicates)
    print(f"binomial 99 % band around {pct(SRM_THRESHOLD)} for {replicates:,} A/A replicates: "
          f"[{pct(low)}, {pct(high)}]")


# --- small samples: relative intervals, guardrails at the margin, Holm ----------------------

#: Outcome families: draw n values with a given mean (control mean 1 or 0.3).
OUTCOMES = {
    "exponential": (1.0, lambda rng, mean, size: rng.exponential(mean, size)),
    "binary": (0.3, lambda rng, mean, size: (rng.random(size) < mean).astype(float)),
}


def _delta_interval(t: MeanStats, c: MeanStats, one_sided: bool) -> tuple[float, float] | None:
    """The symmetric delta-method lift interval used before (r ± t_{Welch df} · SE(r))."""
    pair = contrast(t, c)
    if pair.lift is None or pair.lift_variance is None or pair.df is None:
        return None
    q = 1 - ALPHA if one_sided else 1 - ALPHA / 2
    half = float(sps.t.ppf(q, pair.df)) * float(np.sqrt(pair.lift_variance))
    return pair.lift - half, pair.lift + half


def _arms(rng, family: str, n: int, treatment_scale: float) -> tuple[MeanStats, MeanStats]:
    base, draw = OUTCOMES[family]
    return (MeanStats.from_values(draw(rng, base * treatment_scale, n)),
            MeanStats.from_values(draw(rng, base, n)))


def small_sample_section(rng: np.random.Generator, reps: int) -> None:
    se = float(np.sqrt(0.05 * 0.95 / reps))
    print(f"\nSmall samples: {reps:,} replicates per cell (Monte-Carlo SE at 5 %: "
          f"{100 * se:.2f} pp, 95 % +-{196 * se:.2f} pp), alpha = {ALPHA}")
    print("| outcome | n per arm | A/A false positives | coverage of the 95 % relative "
          "interval at +10 % (before: delta) | guardrail at a 10 % margin passes, higher is "
          "better (before) | same, lower is better (before) | no bounded interval |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for family in OUTCOMES:
        for n in (20, 200):
            aa = cover = old_cover = undefined = 0
            passes = {True: 0, False: 0}
            old_passes = {True: 0, False: 0}
            for _ in range(reps):
                r = compare(*_arms(rng, family, n, 1.0))
                aa += r.p_value is not None and r.p_value < ALPHA
                t, c = _arms(rng, family, n, 1.1)
                lift = compare(t, c).relative_lift
                if lift.reason is not Reason.OK:
                    undefined += 1
                else:
                    cover += lift.ci_low <= 0.1 <= lift.ci_high
                    old = _delta_interval(t, c, one_sided=False)
                    old_cover += old is not None and old[0] <= 0.1 <= old[1]
                for higher in (True, False):
                    t, c = _arms(rng, family, n, 0.9 if higher else 1.1)
                    g = non_inferiority(t, c, margin=0.1, higher_is_better=higher)
                    passes[higher] += bool(g.non_inferior)
                    old = _delta_interval(t, c, one_sided=True)
                    if old is not None:
                        old_passes[higher] += old[0] > -0.1 if higher else old[1] < 0.1
            bounded = max(1, reps - undefined)  # coverage among bounded intervals
            print(f"| {family} | {n} | {pct(aa / reps)} | {pct(cover / bounded)} "
                  f"({pct(old_cover / bounded)}) | {pct(passes[True] / reps)} "
                  f"({pct(old_passes[True] / reps)}) | {pct(passes[False] / reps)} "
                  f"({pct(old_passes[False] / reps)}) | {undefined} |")
    holm_section(rng, reps)


def holm_section(rng: np.random.Generator, reps: int, metrics: int = 3) -> None:
    """Family-wise error over ``metrics`` primary metrics in A/A experiments."""
    print(f"\nHolm over {metrics} primary metrics, A/A, {reps:,} experiments per cell "
          f"(family-wise error: any primary significant)")
    print("| outcome | n per arm | uncorrected | Holm |")
    print("| --- | ---: | ---: | ---: |")
    for family in OUTCOMES:
        for n in (20, 200):
            raw = corrected = 0
            for _ in range(reps):
                p = [compare(*_arms(rng, family, n, 1.0)).p_value for _ in range(metrics)]
                p = np.array([1.0 if v is None else v for v in p])
                raw += bool((p < ALPHA).any())
                corrected += bool((holm(p) < ALPHA).any())
            print(f"| {family} | {n} | {pct(raw / reps)} | {pct(corrected / reps)} |")


def _decision(rng: np.random.Generator, family: str, n: int, now, sequential: bool) -> str:
    """One A/A experiment through the report's decision path: two primaries and two
    guardrails (5 % margin), each its own independent metric, in the given interval mode;
    returns the outcome."""
    kind = "sequential" if sequential else "fixed_horizon"
    primaries = [_arms(rng, family, n, 1.0) for _ in range(2)]
    test = compare_sequential if sequential else compare
    compared = [test(t, c, level=1 - ALPHA) for t, c in primaries]
    adjusted = holm(np.array([1.0 if r.p_value is None else r.p_value for r in compared]))
    results = [PrimaryResult.from_comparison(
        f"primary{i}", r, float(p), sample=ArmSample.from_stats(t, c, users_per_day=2 * n / 14))
        for i, ((t, c), r, p) in enumerate(zip(primaries, compared, adjusted, strict=True))]
    guards = []
    for i in range(2):
        t, c = _arms(rng, family, n, 1.0)
        options = {"margin": 0.05, "relative": True, "level": 1 - ALPHA}
        result = (non_inferiority_sequential_of(contrast(t, c), **options) if sequential
                  else non_inferiority(t, c, **options))
        guards.append(GuardrailResult.from_test(f"guardrail{i}", result, 2 * n))
    health = health_checklist(users={"control": n, "treatment": n},
                              weights={"control": 1.0, "treatment": 1.0}, now=now,
                              newest_event=now, last_rollup=now)
    return decide("treatment", results, guards, health, alpha=ALPHA,
                  family_size=len(results), interval_kind=kind).outcome.value


def decision_section(rng: np.random.Generator, reps: int) -> None:
    """A/A outcome rates of the decision: ship at most alpha / 2, do not ship at most alpha."""
    from datetime import UTC, datetime

    now = datetime(2026, 11, 24, tzinfo=UTC)
    outcomes = ("ship", "do_not_ship", "keep_running", "no_detectable_effect")
    se = float(np.sqrt(ALPHA * (1 - ALPHA) / reps))
    print(f"\nDecisions in A/A experiments, {reps:,} per cell: two primaries (Holm), two "
          f"guardrails at a 5 % margin, health passing (below 100 users an arm the sample "
          f"item blocks ship); ship should be <= {pct(ALPHA / 2)}, do not ship <= "
          f"{pct(ALPHA)} (Monte-Carlo SE at 5 %: {100 * se:.2f} pp)")
    print("| mode | outcome | n per arm | " + " | ".join(outcomes) + " |")
    print("| --- | --- | ---: |" + " ---: |" * len(outcomes))
    for sequential in (False, True):
        for family in OUTCOMES:
            for n in (50, 500, 5000):
                counts = dict.fromkeys(outcomes, 0)
                for _ in range(reps):
                    counts[_decision(rng, family, n, now, sequential)] += 1
                mode = "sequential" if sequential else "fixed horizon"
                print(f"| {mode} | {family} | {n:,} | "
                      + " | ".join(pct(counts[o] / reps) for o in outcomes) + " |", flush=True)
    sequential_power_section(rng, reps)


def sequential_power_section(rng: np.random.Generator, reps: int) -> None:
    """How often a single look detects an effect of the size the decision calls detectable:
    the fixed-horizon MDE seen by the always-valid test (what the decision used before issue
    30) and the always-valid MDE (what it uses now); both should be 80 % by their own
    definition, and the first is not."""
    from tracker.stats.power import mde_multiplier
    from tracker.stats.sequential import sequential_critical

    print(f"\nPower at the MDE, sequential mode: {reps:,} A/B experiments per row, binary "
          "outcome (control rate 0.3), one primary at alpha = 0.05, power 0.8 planned; "
          f"detected = the always-valid interval excludes 0 at that look (Monte-Carlo SE at "
          f"80 %: {100 * np.sqrt(0.16 / reps):.2f} pp)")
    print("| n per arm | fixed-horizon MDE | detected by the always-valid test | always-valid MDE "
          "| detected by the always-valid test |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    base = OUTCOMES["binary"][0]
    sd = float(np.sqrt(base * (1 - base)))
    for n in (500, 5000, 20_000):
        se = sd * np.sqrt(2 / n) / base  # relative, at the control's spread
        fixed = mde_multiplier(alpha=ALPHA, power=0.8) * se
        critical = sequential_critical(2 * n, ALPHA, tuning_alpha=ALPHA)
        always = mde_multiplier(alpha=ALPHA, power=0.8, critical=critical) * se
        cells = []
        for mde in (fixed, always):
            hits = 0
            for _ in range(reps):
                r = compare_sequential(*_arms(rng, "binary", n, 1 + mde), level=1 - ALPHA)
                hits += r.p_value is not None and r.p_value < ALPHA
            cells += [f"{mde:+.2%}", pct(hits / reps)]
        print(f"| {n:,} | " + " | ".join(cells) + " |", flush=True)


# --- trend of the lift over days since exposure ---------------------------------------------

TREND_DAYS = 14

#: name -> (users per arm, entry staggered over the days, daily return probability per unit
#: of engagement: None = every user every day)
TREND_SCENARIOS = {
    "dense (all enter on day 0, every user every day)": (3000, False, None),
    "staggered (entry over 14 days, return 0.5 x engagement)": (5000, True, 0.5),
    "sparse (1,500 users, return 0.2 x engagement)": (1500, True, 0.2),
}


def exposure_arm(rng: np.random.Generator, users: int, staggered: bool, returning: float | None,
                 lifts: np.ndarray) -> dict[str, np.ndarray]:
    """One arm's per-user hit rates by day since first exposure, as the rollup's exposure-day
    view sees them, and the users' cross-day sums the user-clustered test needs.

    Users have an engagement e ~ Gamma(1, 1); hit propensity min(0.9, 0.12 e) x (1 + lift on
    that exposure day); 1 + Poisson(0.4 e) lists a day present; the value of a present day
    is hits / lists. Entry day P(c) ∝ 0.85^c (or day 0), a user present on her entry day and
    then each later calendar day of the 14 with probability min(0.95, ``returning`` x e);
    exposure day = calendar day − entry day."""
    e = rng.gamma(1.0, 1.0, users)
    if staggered:
        p = 0.85 ** np.arange(TREND_DAYS)
        entry = rng.choice(TREND_DAYS, size=users, p=p / p.sum())
    else:
        entry = np.zeros(users, dtype=np.int64)
    d = np.arange(TREND_DAYS)[None, :]
    present = d <= (TREND_DAYS - 1 - entry)[:, None]
    if returning is not None:
        back = rng.random((users, TREND_DAYS)) < np.minimum(0.95, returning * e)[:, None]
        present &= (d == 0) | back
    lists = 1 + rng.poisson(0.4 * e[:, None], (users, TREND_DAYS))
    q = np.minimum(np.minimum(0.9, 0.12 * e)[:, None] * (1 + lifts[None, :]), 1.0)
    p_present = present.astype(float)
    x = rng.binomial(lists, q) / lists * p_present
    return {"n": p_present.sum(0), "s": x.sum(0), "s2": (x * x).sum(0),
            "nn": p_present.T @ p_present, "xp": x.T @ p_present, "xx": x.T @ x}


def _exposure_days(arm: dict[str, np.ndarray], clustered: bool) -> ExposureDays:
    days = tuple(range(TREND_DAYS))
    if not clustered:
        return ExposureDays(days, arm["n"], arm["s"], arm["s2"])
    return ExposureDays(days, arm["n"], arm["s"], arm["s2"], arm["nn"], arm["xp"], arm["xx"])


def _before(t: dict[str, np.ndarray], c: dict[str, np.ndarray]):
    """The report's trend before issue 30: each day's delta-method lift and variance into
    ``trend_test`` (weights from each day's own variance, residual dispersion)."""
    days, lifts, variances = [], [], []
    for k in range(TREND_DAYS):
        if t["n"][k] < 2 or c["n"][k] < 2:
            continue
        pair = contrast(MeanStats(int(t["n"][k]), t["s"][k], t["s2"][k]),
                        MeanStats(int(c["n"][k]), c["s"][k], c["s2"][k]))
        if pair.lift is None or not pair.lift_variance:
            continue
        days.append(k)
        lifts.append(pair.lift)
        variances.append(pair.lift_variance)
    return trend_test(days, lifts, variances)


def trend_section(rng: np.random.Generator, reps: int) -> None:
    """False alarms of the trend test (any significant slope; fading apart) per scenario."""
    low, high = band(ALPHA, reps)
    se = float(np.sqrt(ALPHA * (1 - ALPHA) / reps))
    print(f"\nTrend of the lift over days since exposure: {reps:,} experiments per row, "
          f"alpha = {ALPHA}; 99 % band around 5 %: [{pct(low)}, {pct(high)}] (Monte-Carlo "
          f"SE at 5 %: {100 * se:.2f} pp)")
    print("| exposure | true lift | before: trend_test (fading) | independent days (fading) "
          "| user-clustered (fading) | rows in band |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    cases = (("A/A", np.zeros(TREND_DAYS)), ("constant +5 %", np.full(TREND_DAYS, 0.05)),
             ("novelty +30 % x 0.8^day", 0.30 * 0.8 ** np.arange(TREND_DAYS)))
    for name, (users, staggered, returning) in TREND_SCENARIOS.items():
        for label, lifts in cases:
            counts = {k: [0, 0] for k in ("before", "independent", "clustered")}
            runs = reps // 4 if label.startswith("novelty") else reps  # power needs fewer
            for _ in range(runs):
                t = exposure_arm(rng, users, staggered, returning, lifts)
                c = exposure_arm(rng, users, staggered, returning, np.zeros(TREND_DAYS))
                results = {"before": _before(t, c),
                           "independent": exposure_trend(_exposure_days(t, False),
                                                         _exposure_days(c, False)),
                           "clustered": exposure_trend(_exposure_days(t, True),
                                                       _exposure_days(c, True))}
                for key, r in results.items():
                    counts[key][0] += r.p_value is not None and r.p_value < ALPHA
                    counts[key][1] += r.direction == "fading"
            rates = {k: (v[0] / runs, v[1] / runs) for k, v in counts.items()}
            inside = ("" if label.startswith("novelty") else ", ".join(
                k for k, (r, _) in rates.items() if low <= r <= high) or "none")
            print(f"| {name} | {label} | " + " | ".join(
                f"{pct(r)} ({pct(f)})" for r, f in rates.values()) + f" | {inside} |",
                flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=2000)
    parser.add_argument("--users", type=int, default=20_000, help="users per experiment")
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--lift", type=float, default=0.10, help="true lift for the power check")
    parser.add_argument("--srm-replicates", type=int, default=50_000)
    parser.add_argument("--srm-users", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=100, help="experiments simulated at once")
    parser.add_argument("--seed", type=int, default=20240605)
    parser.add_argument("--small-reps", type=int, default=4000,
                        help="replicates per small-sample cell (4,000: +-0.7 pp at 5 %%)")
    parser.add_argument("--small-only", action="store_true",
                        help="run only the small-sample section")
    parser.add_argument("--decision-reps", type=int, default=1000,
                        help="A/A experiments per decision cell")
    parser.add_argument("--decision-only", action="store_true",
                        help="run only the A/A decision section")
    parser.add_argument("--trend-reps", type=int, default=1000,
                        help="experiments per trend row (1,000: band [3.30 %%, 6.90 %%]; "
                             "a quarter for the novelty rows)")
    parser.add_argument("--trend-only", action="store_true",
                        help="run only the trend (novelty) section")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    if args.trend_only:
        trend_section(rng, args.trend_reps)
        print(f"\nelapsed {time.perf_counter() - started:.0f} s")
        return
    if args.decision_only:
        decision_section(rng, args.decision_reps)
        print(f"\nelapsed {time.perf_counter() - started:.0f} s")
        return
    if args.small_only:
        small_sample_section(rng, args.small_reps)
        print(f"\nelapsed {time.perf_counter() - started:.0f} s")
        return
    n_exp = args.experiments

    aa = Model(args.users, args.days)
    fixed, seq, final_users = run_experiments(rng, aa, n_exp, args.chunk, sequential=True)
    low, high = band(ALPHA, n_exp)
    print(f"A/A: {n_exp:,} experiments x {args.users:,} users, {args.days} daily looks, "
          f"alpha = {ALPHA}, seed {args.seed}")
    print(f"binomial 99 % band around 5 % for {n_exp:,} experiments: [{pct(low)}, {pct(high)}]")
    print("| metric | fixed horizon, last day | fixed horizon, any of 14 days "
          "| always-valid CS, any of 14 days |")
    print("| --- | ---: | ---: | ---: |")
    labels = {"mean": "user-level CTR (MeanStats)", "ratio": "per-impression CTR (RatioStats)"}
    for kind, label in labels.items():
        last = (fixed[kind][:, -1] < ALPHA).mean()
        peeking = (fixed[kind] < ALPHA).any(axis=1).mean()
        always = seq[kind].any(axis=1).mean()
        inside = "inside" if low <= last <= high else "OUTSIDE"
        print(f"| {label} | {pct(last)} ({inside} band) | {pct(peeking)} | {pct(always)} |")
    print(f"SRM flags among the {n_exp:,} A/A experiments (chi-square, last day): "
          f"{sum(srm_test(u, [1, 1]).flagged for u in final_users)}")

    srm_section(rng, args.srm_replicates, args.srm_users, args.days)

    # Power: the true effect and user-level spread follow from the model (see true_ctr).
    ab = Model(args.users, args.days, lift=args.lift)
    mean_c, sd_c = true_ctr(0.0)
    mean_t, sd_t = true_ctr(args.lift)
    delta = mean_t - mean_c
    sample = simulate_users(rng, aa, 200_000)
    zero_share = float((sample["clicks"] == 0).mean())
    predicted = power_two_sample(
        delta, sd_t, sd_c, args.users // 2, args.users // 2, alpha=ALPHA
    )
    fixed_ab, seq_ab, _ = run_experiments(rng, ab, n_exp, args.chunk, sequential=True)
    detected = (fixed_ab["mean"][:, -1] < ALPHA).mean()
    seq_detected = seq_ab["mean"].any(axis=1).mean()
    p_low, p_high = band(predicted, n_exp)
    print(f"\nPower (A/B, +{args.lift:.0%} click propensity, user-level CTR, "
          f"{args.users // 2:,} users per arm)")
    print(f"true user-level CTR: control mean {mean_c:.5f} (sd {sd_c:.5f}), treatment mean "
          f"{mean_t:.5f} (sd {sd_t:.5f}); users with CTR 0: {pct(zero_share)}")
    print(f"predicted power {pct(predicted)}; 99 % band for {n_exp:,} experiments "
          f"[{pct(p_low)}, {pct(p_high)}]")
    verdict = "inside" if p_low <= detected <= p_high else "OUTSIDE"
    print(f"detected, fixed horizon at day {args.days}: {pct(detected)} ({verdict} band); "
          f"always-valid CS by day {args.days}: {pct(seq_detected)}")
    small_sample_section(rng, args.small_reps)
    decision_section(rng, args.decision_reps)
    trend_section(rng, args.trend_reps)
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
