"""A decision per treatment arm: ship, do not ship, keep running, or no detectable effect.

The rule follows Schultzberg, Ankargren & Frånberg (2024), "Risk-Aware Product Decisions in
A/B Tests with Multiple Metrics" (Spotify; arXiv:2402.11609): ship when at least one success
(primary) metric is significantly better, after the multiple-comparison correction that
covers the primaries, *and* every guardrail is significantly non-inferior; a significant
deterioration blocks shipping. Sample sizes are planned so that the tests are powered: for
the primaries at α / m (Bonferroni over the m primary tests, the first step of Holm's
procedure, a conservative bound), for the guardrails at the one-sided α of their
non-inferiority tests. In order:

1. ``do_not_ship`` when
   - a health item fails (a sample-ratio mismatch, heavy crossover, stopped logging:
     :mod:`tracker.stats.health`), or
   - a primary is significantly *worse* after correction (adjusted p < α, effect in the bad
     direction), or
   - a guardrail fails. A guardrail **fails** when it is *shown inferior*: its one-sided
     non-inferiority p-value exceeds 1 − α, i.e. the one-sided (1 − α) bound on the good
     side lies beyond the margin (the loss is larger than tolerated, with confidence); or
     when it is *not shown non-inferior once powered*: the test had power ≥ ``power`` at a
     true effect of 0 (Φ(margin / SE − z_{1−α}), :func:`power_non_inferiority`) and still
     did not reject. A guardrail neither shown non-inferior nor failing is *unresolved*.
2. ``ship`` when a primary is significantly better, every guardrail is shown non-inferior,
   health does not block shipping (no failing item, every arm at the minimum sample), and
   no significantly better primary's lift is *fading*: shrinking significantly with the
   days since each user's first exposure (a novelty effect, :mod:`tracker.report.trends`),
   where the cumulative lift overstates the long run.
3. ``keep_running`` when the experiment is not yet powered: some primary's minimum
   detectable effect at today's users exceeds the target effect (relative, default 5 %),
   or a significant win waits for an unresolved guardrail, for the minimum sample or for a
   fading lift to settle. The
   reasons and :attr:`Decision.power` give each primary's MDE and the days to reach the
   target at the observed rate of new users.
4. ``no_detectable_effect``: powered for the target effect, and no primary significant.

Relative effects, MDEs and margins are fractions of the control mean (0.05 = 5 %); the
relative MDE is the absolute one over |control mean| (first order in the delta method).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tracker.stats.compare import Comparison, NonInferiority
from tracker.stats.estimates import moments
from tracker.stats.health import CheckStatus, HealthChecklist
from tracker.stats.power import (
    minimum_detectable_effect,
    power_non_inferiority,
    users_for_effect,
)
from tracker.stats.sufficient import ArmStats

DEFAULT_TARGET_EFFECT = 0.05
DEFAULT_POWER = 0.8


class Outcome(StrEnum):
    """What to do with a treatment arm."""

    SHIP = "ship"
    DO_NOT_SHIP = "do_not_ship"
    KEEP_RUNNING = "keep_running"
    NO_DETECTABLE_EFFECT = "no_detectable_effect"


class GuardrailState(StrEnum):
    """How a guardrail stands (see the module docstring for the definitions)."""

    NON_INFERIOR = "non_inferior"
    SHOWN_INFERIOR = "shown_inferior"
    NOT_NON_INFERIOR_POWERED = "not_non_inferior_powered"
    UNRESOLVED = "unresolved"


@dataclass(frozen=True, slots=True)
class ArmSample:
    """What judging power needs for one metric: users per arm today, the user-level
    variance per arm and the control mean (the rollup's sufficient statistics), and
    ``users_per_day``, new users per day in the two arms together, e.g. (users today − users
    a week ago) / 7 in the cumulative view (None: unknown)."""

    users_treatment: int
    users_control: int
    variance_treatment: float | None
    variance_control: float | None
    mean_control: float | None
    users_per_day: float | None = None

    @classmethod
    def from_stats(cls, treatment: ArmStats, control: ArmStats,
                   users_per_day: float | None = None) -> ArmSample:
        """From the two arms' sufficient statistics: the user-level variance is n times the
        variance of the arm's estimate (for a ratio metric, its delta-method equivalent)."""
        t, c = moments(treatment), moments(control)
        return cls(t.n, c.n, None if t.variance is None else t.variance * t.n,
                   None if c.variance is None else c.variance * c.n, c.estimate, users_per_day)


@dataclass(frozen=True, slots=True)
class PrimaryResult:
    """One primary metric of one treatment arm against control: the effect (relative lift
    when ``relative``, else the difference) with its two-sided interval, the p-value after
    the correction over the primaries, the metric's direction, and the sample for power."""

    metric: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    p_value_adjusted: float | None
    higher_is_better: bool = True
    sample: ArmSample | None = None
    relative: bool = True

    @classmethod
    def from_comparison(cls, metric: str, comparison: Comparison,
                        p_value_adjusted: float | None, *, higher_is_better: bool = True,
                        sample: ArmSample | None = None) -> PrimaryResult:
        """From :func:`tracker.stats.compare.compare`'s result: its relative lift and
        interval, with the p-value after the correction over the primaries."""
        lift = comparison.relative_lift
        return cls(metric, lift.estimate, lift.ci_low, lift.ci_high, p_value_adjusted,
                   higher_is_better, sample, relative=True)


@dataclass(frozen=True, slots=True)
class GuardrailResult:
    """One guardrail of one treatment arm: the one-sided non-inferiority test at ``margin``
    (:func:`tracker.stats.compare.non_inferiority`): effect, its standard error, one-sided
    p-value and ``non_inferior`` (None: could not be computed)."""

    metric: str
    margin: float
    estimate: float | None
    std_error: float | None
    p_value: float | None
    non_inferior: bool | None
    relative: bool = True

    @classmethod
    def from_test(cls, metric: str, test: NonInferiority) -> GuardrailResult:
        """From :func:`tracker.stats.compare.non_inferiority`'s result."""
        return cls(metric, test.margin, test.estimate, test.std_error, test.p_value,
                   test.non_inferior, test.relative)


@dataclass(frozen=True, slots=True)
class PrimaryPower:
    """Power of one primary at today's users. ``mde``: the relative minimum detectable
    effect (``mde_absolute`` in the metric's units) at α / m and ``power``; ``powered``:
    ``mde <= target``; ``days_to_target``: days of new users until the MDE reaches the
    target (0 when powered; None when it cannot be said, ``note`` says why)."""

    metric: str
    mde: float | None
    mde_absolute: float | None
    target: float
    powered: bool
    days_to_target: int | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "mde": self.mde, "mde_absolute": self.mde_absolute,
                "target": self.target, "powered": self.powered,
                "days_to_target": self.days_to_target, "note": self.note}


@dataclass(frozen=True, slots=True)
class Decision:
    """The decision for one treatment ``arm``: its ``outcome``, the short sentences that
    justify it (most decisive first) and each primary's power."""

    arm: str
    outcome: Outcome
    reasons: tuple[str, ...]
    power: tuple[PrimaryPower, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "outcome": self.outcome.value, "reasons": list(self.reasons),
                "power": [p.to_dict() for p in self.power]}


def _effect_text(value: float, relative: bool, rounding: str = "nearest") -> str:
    """An effect as printed: a relative one in % to 0.1 pp, else 4 significant digits.
    ``rounding="down"`` / ``"up"`` round a relative interval's ends outwards, as the report's
    table does, so the two print the same interval and an end never crosses 0 by rounding.

    >>> _effect_text(0.02849, True), _effect_text(0.02849, True, "down")
    ('+2.8%', '+2.8%')
    >>> _effect_text(0.02851, True, "down"), _effect_text(0.3101, True, "up")
    ('+2.8%', '+31.1%')
    """
    if not relative:
        return f"{value:+.4g}"
    if rounding != "nearest":
        step = math.floor if rounding == "down" else math.ceil
        value = step(value * 1000) / 1000
    return f"{value:+.1%}"


def _primary_text(p: PrimaryResult) -> str:
    if p.estimate is None:
        return f"{p.metric} could not be compared"
    text = f"{p.metric} {_effect_text(p.estimate, p.relative)}"
    if p.ci_low is not None and p.ci_high is not None:
        text += (f" [{_effect_text(p.ci_low, p.relative, 'down')}, "
                 f"{_effect_text(p.ci_high, p.relative, 'up')}]")
    return text


def significant_direction(p: PrimaryResult, alpha: float) -> int:
    """+1 significantly better, −1 significantly worse, 0 not significant (adjusted p ≥ α,
    or no test)."""
    if p.p_value_adjusted is None or p.estimate is None or not p.p_value_adjusted < alpha:
        return 0
    if p.estimate == 0:
        return 0
    return 1 if (p.estimate > 0) == p.higher_is_better else -1


def guardrail_state(g: GuardrailResult, *, alpha: float = 0.05,
                    power: float = DEFAULT_POWER) -> tuple[GuardrailState, float | None]:
    """The guardrail's state and the power of its test at a true effect of 0 (None when the
    test could not be computed)."""
    test_power = (power_non_inferiority(g.margin, g.std_error, alpha=alpha)
                  if g.std_error is not None else None)
    if g.non_inferior:
        return GuardrailState.NON_INFERIOR, test_power
    if g.p_value is not None and g.p_value > 1 - alpha:
        return GuardrailState.SHOWN_INFERIOR, test_power
    if g.non_inferior is False and test_power is not None and test_power >= power:
        return GuardrailState.NOT_NON_INFERIOR_POWERED, test_power
    return GuardrailState.UNRESOLVED, test_power


def _guardrail_text(g: GuardrailResult, state: GuardrailState, test_power: float | None) -> str:
    margin = f"{g.margin:.1%}" if g.relative else f"{g.margin:g}"
    head = g.metric if g.estimate is None else f"{g.metric} {_effect_text(g.estimate, g.relative)}"
    if state is GuardrailState.NON_INFERIOR:
        return f"{head}: non-inferior at the {margin} margin"
    if state is GuardrailState.SHOWN_INFERIOR:
        return f"{head}: shown worse than the {margin} margin tolerates"
    if state is GuardrailState.NOT_NON_INFERIOR_POWERED:
        return (f"{head}: not shown non-inferior at the {margin} margin although the test "
                f"is powered ({test_power:.0%})")
    if test_power is None:
        return f"{head}: the non-inferiority test at the {margin} margin cannot be computed yet"
    return (f"{head}: not yet shown non-inferior at the {margin} margin (power "
            f"{test_power:.0%} at today's users)")


def primary_power(p: PrimaryResult, *, alpha: float, power: float,
                  target: float) -> PrimaryPower:
    """MDE of ``p`` at today's users (two-sided test at ``alpha``, already divided by the
    family size) and the days until it reaches ``target`` at the observed daily rate."""
    s = p.sample

    def unknown(note: str) -> PrimaryPower:
        return PrimaryPower(p.metric, None, None, target, False, None, note)

    if s is None or s.variance_treatment is None or s.variance_control is None:
        return unknown(f"{p.metric}: power cannot be judged yet (no variance: too few users)")
    if min(s.users_treatment, s.users_control) < 2:
        return unknown(f"{p.metric}: power cannot be judged with fewer than 2 users per arm")
    if not s.mean_control:
        return unknown(f"{p.metric}: the control mean is 0, a relative MDE is undefined")
    sd_t, sd_c = math.sqrt(s.variance_treatment), math.sqrt(s.variance_control)
    absolute = minimum_detectable_effect(sd_t, sd_c, s.users_treatment, s.users_control,
                                         alpha=alpha, power=power)
    relative = absolute / abs(s.mean_control)
    users = s.users_treatment + s.users_control
    head = (f"{p.metric}: MDE {relative:.1%} at today's {s.users_treatment:,} + "
            f"{s.users_control:,} users (target {target:.1%})")
    if relative <= target:
        return PrimaryPower(p.metric, relative, absolute, target, True, 0, f"{head}: powered")
    if not s.users_per_day or s.users_per_day <= 0:
        return PrimaryPower(p.metric, relative, absolute, target, False, None,
                            f"{head}; no new users per day, the target is out of reach")
    needed = users_for_effect(target * abs(s.mean_control), sd_t, sd_c,
                              s.users_treatment / users, alpha=alpha, power=power)
    days = max(1, math.ceil((needed - users) / s.users_per_day))
    return PrimaryPower(p.metric, relative, absolute, target, False, days,
                        f"{head}; about {days} more day(s) at {s.users_per_day:,.0f} new "
                        "users a day")


def decide(
    arm: str,
    primaries: Sequence[PrimaryResult],
    guardrails: Sequence[GuardrailResult],
    health: HealthChecklist,
    *,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    target_effect: float = DEFAULT_TARGET_EFFECT,
    correction: str = "Holm",
    family_size: int | None = None,
    fading: Mapping[str, str] | None = None,
) -> Decision:
    """The decision for treatment ``arm`` after the rule of the module docstring.

    ``primaries`` carry p-values already adjusted over the family (``correction`` names the
    method in the reasons); ``family_size``: the number of tests in that family (default:
    the primaries given; the report corrects primaries × treatment arms), used to plan power
    at α / family_size. ``target_effect``: the relative effect the experiment must be able to
    detect. ``fading``: primaries whose lift fades with exposure, each with the sentence
    that says so; one of them significantly better keeps the arm running instead of shipping.
    """
    family = _check_decision_inputs(primaries, alpha, power, target_effect, family_size)
    directions = {p.metric: significant_direction(p, alpha) for p in primaries}
    powers = tuple(primary_power(p, alpha=alpha / family, power=power, target=target_effect)
                   for p in primaries)
    guards = [(g, *guardrail_state(g, alpha=alpha, power=power)) for g in guardrails]

    failing_health = [i for i in health.items if i.status is CheckStatus.FAIL]
    worse = [p for p in primaries if directions[p.metric] < 0]
    better = [p for p in primaries if directions[p.metric] > 0]
    failed = [(g, s, tp) for g, s, tp in guards if s in (GuardrailState.SHOWN_INFERIOR,
                                                        GuardrailState.NOT_NON_INFERIOR_POWERED)]
    unresolved = [(g, s, tp) for g, s, tp in guards if s is GuardrailState.UNRESOLVED]
    small_sample = [i for i in health.items if i.blocks_ship and i.status is not CheckStatus.FAIL]
    novelty = [(fading or {})[p.metric] for p in better if p.metric in (fading or {})]

    def primary_reason(p: PrimaryResult) -> str:
        return _primary_reason(p, directions[p.metric], correction)

    if failing_health or worse or failed:
        reasons = ([f"health: {i.message}" for i in failing_health]
                   + [primary_reason(p) for p in worse]
                   + [_guardrail_text(g, s, tp) for g, s, tp in failed])
        return Decision(arm, Outcome.DO_NOT_SHIP, tuple(reasons), powers)
    if better and not unresolved and not small_sample and not novelty:
        reasons = ([primary_reason(p) for p in better]
                   + [_guardrail_text(g, s, tp) for g, s, tp in guards])
        return Decision(arm, Outcome.SHIP, tuple(reasons), powers)
    if better or not all(pw.powered for pw in powers):
        reasons = ([primary_reason(p) for p in better] + novelty
                   + [f"health: {i.message}" for i in small_sample]
                   + [_guardrail_text(g, s, tp) for g, s, tp in unresolved]
                   + [pw.note for pw in powers if not pw.powered])
        return Decision(arm, Outcome.KEEP_RUNNING, tuple(reasons), powers)
    reasons = [primary_reason(p) for p in primaries] + [pw.note for pw in powers]
    return Decision(arm, Outcome.NO_DETECTABLE_EFFECT, tuple(reasons), powers)


def _check_decision_inputs(primaries: Sequence[PrimaryResult], alpha: float, power: float,
                           target_effect: float, family_size: int | None) -> int:
    """The family size :func:`decide` plans power with; ValueError on inputs it cannot use."""
    if not primaries:
        raise ValueError("a decision needs at least one primary metric (declare one with "
                         "`tracker experiments update KEY --primary METRIC@K`)")
    if not (0 < alpha < 1) or not (alpha < power < 1) or not target_effect > 0:
        raise ValueError(f"need 0 < alpha < power < 1 and target_effect > 0, got alpha="
                         f"{alpha!r}, power={power!r}, target_effect={target_effect!r}")
    family = len(primaries) if family_size is None else family_size
    if family < len(primaries):
        raise ValueError(f"family_size {family} is smaller than the {len(primaries)} primaries")
    return family


def _primary_reason(p: PrimaryResult, direction: int, correction: str) -> str:
    """A primary's effect and verdict after the correction, as a decision's reason."""
    verdict = {1: "significantly better", -1: "significantly worse",
               0: "not significant"}[direction]
    p_text = "" if p.p_value_adjusted is None else f" (p {p.p_value_adjusted:.3g})"
    return f"{_primary_text(p)}, {verdict} after {correction}{p_text}"
