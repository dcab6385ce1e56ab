"""Multiple comparisons across metrics × arms: Holm and Benjamini–Hochberg.

Ten primary metrics against two treatments are twenty tests; at α = 0.05 one
of them "wins" by chance alone. The experiment's primary metrics form the
family that is corrected (Holm by default); guardrails are not (a guardrail should alarm
easily, and correcting it would make it quieter; the decision splits its harm tests'
α itself, :mod:`tracker.stats.decision`). Secondary metrics form a second family,
corrected by Benjamini–Hochberg (:func:`adjust_by_role`): a report shows a dozen of them,
and uncorrected they gave about 1.5 spurious "better/worse" verdicts per A/A report; their
verdicts are exploratory (they never decide) and controlling the share of false ones is
what a reader scanning them needs.

- Holm (1979), "A simple sequentially rejective multiple test procedure":
  controls the family-wise error rate, uniformly more powerful than Bonferroni.
- Benjamini & Hochberg (1995), "Controlling the false discovery rate":
  controls the expected share of false discoveries, more powerful still.

Both return adjusted p-values (compare them with α as usual), identical to
``statsmodels.stats.multitest.multipletests(method="holm" / "fdr_bh")``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike


class Correction(StrEnum):
    """Which multiple-comparison correction to apply to the primary family."""

    HOLM = "holm"
    BENJAMINI_HOCHBERG = "bh"


def _p_array(p_values: ArrayLike) -> np.ndarray:
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p_values must be 1-D, got shape {p.shape}")
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    return p


def holm(p_values: ArrayLike) -> np.ndarray:
    """Holm step-down adjusted p-values, in the input order.

    Sorted ascending p₍₁₎ ≤ … ≤ p₍ₘ₎: p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1) p₍ⱼ₎).

    Worked example: (0.01, 0.04, 0.03) → sorted 0.01, 0.03, 0.04 times 3, 2, 1
    → 0.03, 0.06, 0.04 → running max 0.03, 0.06, 0.06.

    >>> holm([0.01, 0.04, 0.03]).tolist()
    [0.03, 0.06, 0.06]
    """
    p = _p_array(p_values)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def benjamini_hochberg(p_values: ArrayLike) -> np.ndarray:
    """Benjamini–Hochberg step-up adjusted p-values (q-values), in the input order.

    Sorted ascending: p̃₍ᵢ₎ = min_{j ≥ i} min(1, m p₍ⱼ₎ / j).

    Worked example: (0.01, 0.04, 0.03) → sorted 0.01, 0.03, 0.04 times 3/1, 3/2, 3/3
    → 0.03, 0.045, 0.04 → running min from the top 0.03, 0.04, 0.04.

    >>> benjamini_hochberg([0.01, 0.04, 0.03]).tolist()
    [0.03, 0.04, 0.04]
    """
    p = _p_array(p_values)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, m * p[order] / np.arange(1, m + 1))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    return adjusted


def adjust_primary(
    p_values: Sequence[float | None],
    primary: Sequence[bool],
    *,
    method: Correction | str = Correction.HOLM,
) -> tuple[float | None, ...]:
    """Correct the primary tests as one family; return the others unchanged.

    ``p_values`` has one entry per (metric, treatment arm) test, ``primary``
    says whether that metric is primary. Primary p-values are adjusted together
    with ``method``; the rest (guardrails, secondary metrics) are returned as
    they are. ``None`` (a test that could not be computed, see its reason) is
    not part of the family and stays ``None``.

    >>> adjust_primary([0.01, 0.04, None, 0.03], [True, True, True, False])
    (0.02, 0.04, None, 0.03)
    >>> adjust_primary([0.01, 0.04, 0.03], [True, True, True], method="bh")
    (0.03, 0.04, 0.04)
    """
    correction = Correction(method)
    if len(p_values) != len(primary):
        raise ValueError(
            f"need one primary flag per p-value, got {len(p_values)} p-values "
            f"and {len(primary)} flags"
        )
    result: list[float | None] = [None if p is None else float(p) for p in p_values]
    _p_array([p for p in result if p is not None])
    family = [i for i, p in enumerate(result) if p is not None and primary[i]]
    adjust = holm if correction is Correction.HOLM else benjamini_hochberg
    for i, q in zip(family, adjust([result[i] for i in family]), strict=True):
        result[i] = float(q)
    return tuple(result)


def adjust_by_role(
    p_values: Sequence[float | None],
    roles: Sequence[str],
    *,
    method: Correction | str = Correction.HOLM,
) -> tuple[float | None, ...]:
    """Correct each family of a report: ``"primary"`` tests with ``method``, ``"secondary"``
    ones by Benjamini–Hochberg among themselves (exploratory), ``"guardrail"`` ones (and any
    other role) unchanged; ``None`` stays ``None``.

    >>> adjust_by_role([0.01, 0.04, 0.02, 0.03, 0.2],
    ...                ["primary", "primary", "secondary", "secondary", "guardrail"])
    (0.02, 0.04, 0.03, 0.03, 0.2)
    """
    if len(p_values) != len(roles):
        raise ValueError(f"need one role per p-value, got {len(p_values)} p-values and "
                         f"{len(roles)} roles")
    result = list(adjust_primary(p_values, [r == "primary" for r in roles], method=method))
    secondary = [i for i, r in enumerate(roles) if r == "secondary" and result[i] is not None]
    for i, q in zip(secondary, benjamini_hochberg([result[i] for i in secondary]), strict=True):
        result[i] = float(q)
    return tuple(result)
