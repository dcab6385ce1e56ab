"""A decision per treatment arm: ship, do not ship, keep running, or no detectable effect.

The rule follows Schultzberg, Ankargren & Frånberg (2024), "Risk-Aware Product Decisions in
A/B Tests with Multiple Metrics" (Spotify; arXiv:2402.11609): ship when at least one success
(primary) metric is significantly better, after the multiple-comparison correction that
covers the primaries, *and* every guardrail is significantly non-inferior; a significant
deterioration blocks shipping. Sample sizes are planned so that the tests are powered: for
the primaries at α / m (Bonferroni over the m primary tests, the first step of Holm's
procedure, a conservative bound), for the guardrails at the one-sided α of their
non-inferiority tests.

Two things are kept apart, and every reason says which it is (:class:`Evidence`): evidence
of **harm** (a test that rejects "no harm"), and a mere **lack of evidence** (a test that
has not yet rejected "harm"). Only harm, or health that makes the numbers untrustworthy,
says ``do_not_ship``; a lack of evidence keeps the experiment running. So that an A/A
experiment is told ``do_not_ship`` at most α of the time, the harm tests share α: the
primaries' two-sided tests after the correction spend at most α / 2 in the harmful
direction, and the G guardrails' inferiority tests α / (2G) each (Bonferroni), so
P(do not ship | no effect anywhere, health passing) ≤ α / 2 + G · α / (2G) = α.

In order:

1. ``do_not_ship`` when
   - a health item fails (a sample-ratio mismatch, heavy crossover, stopped logging:
     :mod:`tracker.stats.health`): the numbers cannot be trusted (:attr:`Evidence.UNTRUSTED`),
   - a primary is significantly *worse* after correction (adjusted p < α, effect in the bad
     direction): harm, or
   - a guardrail is *shown inferior*: the one-sided test of "the loss is at most the
     margin" rejects at α / (2G) (``p_value_inferior``; fixed horizon 1 − the
     non-inferiority p-value): harm beyond the tolerated margin, with confidence.
2. ``ship`` when a primary is significantly better, every guardrail is shown non-inferior,
   health does not block shipping (no failing item, every arm at the minimum sample), and
   no significantly better primary's lift is *fading*: shrinking significantly with the
   days since each user's first exposure (a novelty effect, :mod:`tracker.report.trends`),
   where the cumulative lift overstates the long run.
3. ``keep_running`` when the experiment is not yet powered: some primary's minimum
   detectable effect at today's users exceeds the target effect (relative, default 5 %),
   or a significant win waits for a guardrail not yet shown non-inferior ("not shown safe":
   a lack of evidence, whether or not its test is already powered), for the minimum sample
   or for a fading lift to settle. The reasons and :attr:`Decision.power` give each
   primary's MDE and the days to reach the target from a model of arrivals
   (:mod:`tracker.stats.arrivals`: the daily new users, declining as the pool is exhausted),
   capped at the planned end or a year: beyond it the reason says plainly that the target
   is not reachable at the current traffic and which effect is detectable by then.
4. ``no_detectable_effect``: powered for the target effect, and no primary significant.

**The interval mode decides how power is judged.** With always-valid intervals
(``sequential``, :mod:`tracker.stats.sequential`) a primary is powered when the confidence
sequence at today's users excludes 0 with probability ``power`` at the target effect: the MDE
is solved with the sequence's boundary in place of z_{1−α/2}, so "no detectable effect" is
never said of an effect the sequential test cannot detect; guardrails are judged by the
always-valid non-inferiority test (the report passes it) and their power uses the same
boundary.

Relative effects, MDEs and margins are fractions of the control mean (0.05 = 5 %); the
relative MDE is the absolute one over |control mean| (first order in the delta method).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tracker.stats import distributions as dist
from tracker.stats.compare import Comparison, NonInferiority
from tracker.stats.detectable import ArmSample, PrimaryPower, primary_power
from tracker.stats.health import CheckStatus, HealthChecklist
from tracker.stats.results import IntervalKind
from tracker.stats.sequential import DEFAULT_TUNING_N, sequential_critical

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


class Evidence(StrEnum):
    """What a decision's reason shows: ``harm`` (a test rejected "no harm"), ``benefit`` (a
    primary significantly better), ``lack_of_evidence`` (not shown yet: an unpowered primary,
    a guardrail not shown safe, a lift still settling; never harm), ``no_effect`` (powered and
    not significant), ``untrusted`` (failing health: the numbers cannot be trusted), ``safe``
    (a guardrail shown non-inferior)."""

    HARM = "harm"
    BENEFIT = "benefit"
    LACK_OF_EVIDENCE = "lack_of_evidence"
    NO_EFFECT = "no_effect"
    UNTRUSTED = "untrusted"
    SAFE = "safe"


@dataclass(frozen=True, slots=True)
class DecisionReason:
    """One reason of a decision: its sentence and what it shows."""

    text: str
    shows: Evidence

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.text, "shows": self.shows.value}


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
    (:func:`tracker.stats.compare.non_inferiority`, or its always-valid form): effect, its
    standard error, one-sided p-value and ``non_inferior`` (None: could not be computed);
    ``p_value_inferior`` the p-value of the opposite test, "the loss is at most the margin"
    (None: 1 − ``p_value``, the fixed-horizon relation); ``users`` of both arms (the
    sequential boundary depends on it); ``interval_kind`` which test it was."""

    metric: str
    margin: float
    estimate: float | None
    std_error: float | None
    p_value: float | None
    non_inferior: bool | None
    relative: bool = True
    p_value_inferior: float | None = None
    users: int | None = None
    interval_kind: IntervalKind = IntervalKind.FIXED_HORIZON

    @classmethod
    def from_test(cls, metric: str, test: NonInferiority,
                  users: int | None = None) -> GuardrailResult:
        """From :func:`tracker.stats.compare.non_inferiority`'s result (or the sequential
        one's); ``users``: both arms' users."""
        return cls(metric, test.margin, test.estimate, test.std_error, test.p_value,
                   test.non_inferior, test.relative, test.p_value_inferior, users,
                   test.interval_kind)

    @property
    def harm_p_value(self) -> float | None:
        """The p-value of "the loss is at most the margin": small when harm is shown."""
        if self.p_value_inferior is not None:
            return self.p_value_inferior
        return None if self.p_value is None else 1.0 - self.p_value


@dataclass(frozen=True, slots=True)
class Decision:
    """The decision for one treatment ``arm``: its ``outcome``, the reasons that justify it
    (most decisive first), each saying what it shows (harm, lack of evidence, ...), and each
    primary's power."""

    arm: str
    outcome: Outcome
    explained: tuple[DecisionReason, ...]
    power: tuple[PrimaryPower, ...]

    @property
    def reasons(self) -> tuple[str, ...]:
        """The reasons' sentences."""
        return tuple(r.text for r in self.explained)

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "outcome": self.outcome.value, "reasons": list(self.reasons),
                "evidence": [r.to_dict() for r in self.explained],
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


def guardrail_power(g: GuardrailResult, *, alpha: float = 0.05,
                    tuning_n: float = DEFAULT_TUNING_N) -> float | None:
    """Power of the guardrail's non-inferiority test at a true effect of 0: Φ(margin / SE −
    c) with c = z_{1−α} (fixed horizon, :func:`tracker.stats.power.power_non_inferiority`) or
    the confidence sequence's boundary at the guardrail's users (always-valid); None when
    the test could not be computed.

    >>> g = GuardrailResult("g", 0.05, 0.0, 0.02, 0.5, False)
    >>> round(guardrail_power(g), 3)
    0.804
    """
    if g.std_error is None:
        return None
    if g.std_error == 0:
        return 1.0 if g.margin > 0 else alpha
    if g.interval_kind is IntervalKind.SEQUENTIAL:
        if not g.users:
            return None
        critical = sequential_critical(g.users, alpha, tuning_alpha=alpha, tuning_n=tuning_n)
    else:
        critical = float(dist.norm_ppf(1 - alpha))
    return float(dist.norm_cdf(g.margin / g.std_error - critical))


def guardrail_state(g: GuardrailResult, *, alpha: float = 0.05, power: float = DEFAULT_POWER,
                    harm_alpha: float | None = None,
                    tuning_n: float = DEFAULT_TUNING_N) -> tuple[GuardrailState, float | None]:
    """The guardrail's state and the power of its test at a true effect of 0 (None when the
    test could not be computed). ``harm_alpha``: the level of the inferiority (harm) test,
    α / (2G) for G guardrails in :func:`decide` (default α / 2, one guardrail)."""
    harm_alpha = alpha / 2 if harm_alpha is None else harm_alpha
    test_power = guardrail_power(g, alpha=alpha, tuning_n=tuning_n)
    if g.non_inferior:
        return GuardrailState.NON_INFERIOR, test_power
    harm = g.harm_p_value
    if harm is not None and harm < harm_alpha:
        return GuardrailState.SHOWN_INFERIOR, test_power
    if g.non_inferior is False and test_power is not None and test_power >= power:
        return GuardrailState.NOT_NON_INFERIOR_POWERED, test_power
    return GuardrailState.UNRESOLVED, test_power


_GUARDRAIL_SHOWS = {GuardrailState.NON_INFERIOR: Evidence.SAFE,
                    GuardrailState.SHOWN_INFERIOR: Evidence.HARM,
                    GuardrailState.NOT_NON_INFERIOR_POWERED: Evidence.LACK_OF_EVIDENCE,
                    GuardrailState.UNRESOLVED: Evidence.LACK_OF_EVIDENCE}


def _guardrail_reason(g: GuardrailResult, state: GuardrailState,
                      test_power: float | None) -> DecisionReason:
    margin = f"{g.margin:.1%}" if g.relative else f"{g.margin:g}"
    head = g.metric if g.estimate is None else f"{g.metric} {_effect_text(g.estimate, g.relative)}"
    shows = _GUARDRAIL_SHOWS[state]
    if state is GuardrailState.NON_INFERIOR:
        return DecisionReason(f"{head}: non-inferior at the {margin} margin", shows)
    if state is GuardrailState.SHOWN_INFERIOR:
        return DecisionReason(f"{head}: shown worse than the {margin} margin tolerates (harm)",
                              shows)
    if state is GuardrailState.NOT_NON_INFERIOR_POWERED:
        return DecisionReason(
            f"{head}: not shown safe: not shown non-inferior at the {margin} margin although "
            f"the test is powered ({test_power:.0%}); a lack of evidence, not harm", shows)
    if test_power is None:
        return DecisionReason(f"{head}: not shown safe: the non-inferiority test at the "
                              f"{margin} margin cannot be computed yet", shows)
    return DecisionReason(f"{head}: not yet shown non-inferior at the {margin} margin (power "
                          f"{test_power:.0%} at today's users); not shown safe yet, no harm "
                          "shown", shows)


def decide(arm: str, primaries: Sequence[PrimaryResult], guardrails: Sequence[GuardrailResult],
           health: HealthChecklist, *, alpha: float = 0.05, power: float = DEFAULT_POWER,
           target_effect: float = DEFAULT_TARGET_EFFECT, correction: str = "Holm",
           family_size: int | None = None, fading: Mapping[str, str] | None = None,
           interval_kind: IntervalKind | str = IntervalKind.FIXED_HORIZON,
           tuning_n: float = DEFAULT_TUNING_N, days_left: int | None = None) -> Decision:
    """The decision for treatment ``arm`` after the rule of the module docstring.

    ``primaries`` carry p-values adjusted over a family of ``family_size`` tests (default: the
    primaries; power is planned at α / family_size), ``correction`` names the method;
    ``fading``: primaries whose lift fades, with the sentence that says so (a significant win
    among them keeps running); ``interval_kind``: the analysis' mode (sequential: power from
    the confidence sequence tuned for α and ``tuning_n``); ``days_left``: days to the planned
    end (None: a year at most).
    """
    family = _check_decision_inputs(primaries, alpha, power, target_effect, family_size)
    directions = {p.metric: significant_direction(p, alpha) for p in primaries}
    powers = tuple(primary_power(p.metric, p.sample, alpha=alpha / family, power=power,
                                 target=target_effect, interval_kind=IntervalKind(interval_kind),
                                 tuning_alpha=alpha, tuning_n=tuning_n, days_left=days_left)
                   for p in primaries)
    harm_alpha = alpha / (2 * max(1, len(guardrails)))
    guards = [_guardrail_reason(g, *guardrail_state(g, alpha=alpha, power=power,
                                                    harm_alpha=harm_alpha, tuning_n=tuning_n))
              for g in guardrails]
    powered = {pw.metric: pw.powered for pw in powers}

    def primary_reason(p: PrimaryResult) -> DecisionReason:
        direction = directions[p.metric]
        shows = {1: Evidence.BENEFIT, -1: Evidence.HARM}.get(
            direction, Evidence.NO_EFFECT if powered[p.metric] else Evidence.LACK_OF_EVIDENCE)
        return DecisionReason(_primary_reason(p, direction, correction), shows)

    failing = [DecisionReason(f"health: {i.message}", Evidence.UNTRUSTED)
               for i in health.items if i.status is CheckStatus.FAIL]
    worse = [primary_reason(p) for p in primaries if directions[p.metric] < 0]
    better = [primary_reason(p) for p in primaries if directions[p.metric] > 0]
    harmed = [g for g in guards if g.shows is Evidence.HARM]
    not_safe = [g for g in guards if g.shows is Evidence.LACK_OF_EVIDENCE]
    waiting = [DecisionReason(f"health: {i.message}", Evidence.LACK_OF_EVIDENCE)
               for i in health.items if i.blocks_ship and i.status is not CheckStatus.FAIL]
    novelty = [DecisionReason(note, Evidence.LACK_OF_EVIDENCE) for p in primaries
               if directions[p.metric] > 0 and (note := (fading or {}).get(p.metric))]
    unpowered = [DecisionReason(pw.note, Evidence.LACK_OF_EVIDENCE)
                 for pw in powers if not pw.powered]

    if failing or worse or harmed:
        return Decision(arm, Outcome.DO_NOT_SHIP, (*failing, *worse, *harmed), powers)
    if better and not not_safe and not waiting and not novelty:
        return Decision(arm, Outcome.SHIP, (*better, *guards), powers)
    if better or unpowered:
        return Decision(arm, Outcome.KEEP_RUNNING,
                        (*better, *novelty, *waiting, *not_safe, *unpowered), powers)
    reasons = ([primary_reason(p) for p in primaries]
               + [DecisionReason(pw.note, Evidence.NO_EFFECT) for pw in powers] + not_safe)
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
