"""A realistic 14-day recommender A/B test, simulated (numpy and the standard library only).

The world:

- a **catalog** of items in genres, each with a quality of its own and a Zipf popularity
  (proportional to 1 / popularity rank: the top 1% of items draw over 40% of the interest);
- **users** with their own tastes (a Dirichlet mix over genres plus latent factors) and their
  own activity: each user visits on a given day with their own probability (a few come almost
  every day and several times a day, many rarely); each visit is one request for a list of
  ``list_length`` items on a surface (:data:`SURFACES`: the home feed, search results, an
  item page);
- every (user, item) pair has a **true relevance**: the probability that the user, having
  looked at the item, clicks it (a logistic function of the user's taste for the item's genre,
  the latent factors, the item's quality and, a little, its popularity).

The experiment (traffic 1/3 each, by a stable hash of the experiment key and user id):

- ``control``: a popularity baseline (the 30 most popular items, lightly shuffled per
  request);
- ``personalised``: a truly better model, which ranks by the user's true relevance seen through
  its own errors (a fixed error per (user, item) and a little noise per request), for the
  users it knows: to users without a click in the 14 days before their first list
  (:data:`KNOWN_US`: those new to the product, :attr:`DemoConfig.new_share` of them, who
  join on a day of the experiment, and the rare visitors) it serves the popularity list
  (cold start). The
  experiment changes the home feed only: search and item pages serve their own ranker in
  every arm. So its win is concentrated in returning users, on the home surface (what the
  demo's dimensions ``cohort`` and ``surface:list`` show);
- ``diverse``: a diversity-oriented model (of its own signals: it knows every user) that
  interleaves its best guesses, the personalised model's ranking, with discoveries from the
  long tail (random picks among the user's 600 best long-tail guesses): catalog coverage
  near 100% and more unexpected lists, for a lower precision than the personalised arm and a
  lift over control that shrinks as its **novelty effect** (clicks out of curiosity) fades
  with the days since each user's first exposure (:data:`NOVELTY`).

Every impression also carries ``baseline_items``: what the control model would have served for
the same request (a shadow list; for the control arm, the list itself).

Behaviour: a user looks at rank r with probability ``1 / (1 + r) ** 0.9`` (position bias) and
clicks a looked-at item with its true relevance; a click may lead to a ``play``, a ``save``
or a ``purchase`` (graded events). Users also find items outside the list (browsing, search).
Events come seconds to hours after the list; a few purchases come after the 24-hour attribution
window.

Real logs are messy, and so is this one: ~0.5% of users are exposed to two arms (crossover),
~3% of interactions reach the tracker one to three days late (in a later day's batch), ~1% are
sent twice (a retry with the same event id and the same payload), ~5% name their impression
explicitly.

:func:`simulate` yields one :class:`DayBatch` per day: the records a production service would
have logged by the end of that day, ready for ``Tracker.log_impressions`` /
``log_interactions``. Deterministic for a seed (and a start).

>>> config = DemoConfig(users=50, items=200, days=2, start=datetime(2026, 1, 1, tzinfo=UTC))
>>> batches = list(simulate(config))
>>> [b.day.isoformat() for b in batches]
['2026-01-01', '2026-01-02']
>>> sorted(batches[0].impressions[0])
['arm', 'baseline_items', 'context', 'experiment', 'impression_id', 'items', 'scores',
 'served_at', 'user_id']
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import accumulate

import numpy as np

ARMS = ("control", "personalised", "diverse")
RELEVANCE = {"click": 1, "play": 1, "save": 2, "purchase": 3}
PRIMARY = ("ndcg@10", "hit_rate@10")
"""The demo's success metrics: the ranking quality of the served lists and whether a user
clicked one of the top 10."""
GUARDRAILS = {"song_clicks": 0.05}
"""The demo's guardrail: a model may not cost more than 5% of the clicks on recommended
songs."""
EVENTS = tuple(RELEVANCE)  # codes 0..3 in the arrays below
NOVELTY, NOVELTY_DECAY = 1.0, 0.75
"""The diverse arm's novelty effect: its click probabilities are 1 + 1.0 × 0.75^d times what
they would be on a user's d-th day since their first exposure (twice on day 0, +44% on day
5, +12% on day 13): a lift that fades with the days since exposure, which the report's
``trends`` and the dashboard's chart by days since exposure show."""

_DAY_US = 86_400_000_000
_HOUR_US = 3_600_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# share of visits per hour of the day (UTC): quiet nights, a lunch bump, a busy evening
_DIURNAL = np.array([2, 1, 1, 1, 1, 2, 3, 5, 6, 5, 5, 6, 8, 7, 5, 5, 5, 6, 8, 10, 11, 10, 7, 4],
                    dtype=float)
_DEVICES = ("web", "ios", "android")
SURFACES = {"home": 0.8, "search": 0.12, "item": 0.08}
"""Where a list is served, with the share of requests of each."""
KNOWN_US = 14 * 86_400_000_000
"""How recent a click the personalised model needs to know a user: the experiment's
``cuped_days`` (14 by default), so that it knows the users the ``cohort`` calls returning."""
_NEVER = -(2**62)
SEGMENTS = ("surface:list", "cohort")
"""The demo's declared dimensions: the surface of each list, and new against returning
users."""


@dataclass(frozen=True)
class DemoConfig:
    """What to simulate. ``start`` is the first instant of day 0 (timezone-aware; None: UTC
    midnight ``days`` days before today, so that every day lies in the past). The shares are
    those of the messy parts of real logs."""

    key: str = "demo-home-recs"
    days: int = 14
    users: int = 3000
    items: int = 2000
    list_length: int = 10
    seed: int = 3
    start: datetime | None = None
    genres: int = 12
    weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)  # traffic of ARMS, in order
    crossover_share: float = 0.005   # users exposed to two arms
    late_share: float = 0.03         # interactions logged one to three days late
    retry_share: float = 0.01        # interactions sent twice (same id, same payload)
    explicit_share: float = 0.05     # interactions that name their impression
    outside_share: float = 0.15      # visits followed by a click on an item not in the list
    engagement: float = 0.8          # spread (log-odds) of the users' persistent engagement
    history_days: int = 14           # days of interactions logged before the experiment
    new_share: float = 0.2           # users new to the product: no history, join on a day

    def __post_init__(self) -> None:
        if self.days < 1 or self.users < 1:
            raise ValueError(f"days and users must be at least 1, got {self.days}, "
                             f"{self.users}")
        if not 2 <= self.list_length <= 50 or self.items < 5 * self.list_length:
            raise ValueError(f"need 2 <= list_length <= 50 and items >= 5 * list_length, got "
                             f"{self.list_length} and {self.items}")
        if len(self.weights) != len(ARMS) or min(self.weights) <= 0:
            raise ValueError(f"weights: one positive number per arm of {ARMS}, got "
                             f"{self.weights}")
        if not 0 <= self.new_share < 1:
            raise ValueError(f"new_share must lie in [0, 1), got {self.new_share}")
        if self.start is not None and self.start.utcoffset() is None:
            raise ValueError("start must be timezone-aware, e.g. datetime(..., tzinfo=UTC)")

    def first_day(self) -> datetime:
        """The start of day 0, in UTC."""
        if self.start is not None:
            return self.start.astimezone(UTC)
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return today - timedelta(days=self.days)


@dataclass
class DayBatch:
    """The records logged at the end of ``day``: that day's impressions, and the interactions
    that reached the tracker that day (including late ones that occurred days before)."""

    day: date
    impressions: list[dict] = field(default_factory=list)
    interactions: list[dict] = field(default_factory=list)


def experiment_spec(config: DemoConfig) -> dict:
    """Keyword arguments for ``Tracker.create_experiment`` (``key`` included)."""
    return {
        "key": config.key, "name": "Home page recommendations (simulated)",
        "description": "tracker demo: a popularity baseline (control) against a personalised "
                       "model and a diversity-oriented model",
        "arms": dict(zip(ARMS, config.weights, strict=True)), "control": "control",
        "attribution_window": timedelta(hours=24), "relevance": dict(RELEVANCE),
        "timezone": "UTC", "cutoffs": (5, 10, 20), "starts_at": config.first_day(),
        "primary": PRIMARY, "guardrails": dict(GUARDRAILS), "segments": list(SEGMENTS),
    }


def assign_arm(key: str, user_id: str, weights: tuple[float, ...]) -> int:
    """The arm index of a user: a stable hash of (experiment, user) placed on the cumulative
    weights, as a production bucketing service does.

    >>> assign_arm("demo-home-recs", "user-00001", (1, 1, 1)) in (0, 1, 2)
    True
    """
    digest = hashlib.sha256(f"{key}/{user_id}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64 * sum(weights)
    return min(bisect_right(list(accumulate(weights)), point), len(weights) - 1)


def simulate(config: DemoConfig = DemoConfig()) -> Iterator[DayBatch]:
    """One :class:`DayBatch` per simulated day (see the module docstring)."""
    rng = np.random.default_rng(config.seed)
    world = _World(config, rng)
    world.last_click_us = _last_clicks(world)
    start_us = _start_us(config)
    pending: dict[int, list[dict]] = {}  # arrival day -> interactions
    counter = 0
    for d in range(config.days):
        visits = world.visits(rng, start_us + d * _DAY_US)
        ids = [f"{config.key}-imp-{counter + i:07d}" for i in range(visits.n)]
        counter += visits.n
        impressions = world.impression_records(visits, ids)
        for arrival, record in world.interaction_records(rng, visits, ids, start_us):
            if arrival < config.days:  # later ones have not reached the tracker yet
                pending.setdefault(arrival, []).append(record)
        interactions = pending.pop(d, [])
        interactions.sort(key=lambda r: (r["occurred_at"], r["event_id"]))
        yield DayBatch((_EPOCH + timedelta(microseconds=start_us + d * _DAY_US)).date(),
                       impressions, interactions)


@dataclass
class _Visits:
    """One day's requests, in time order: who, which arm, when, what was served."""

    n: int
    user: np.ndarray
    arm: np.ndarray
    served_us: np.ndarray
    items: np.ndarray      # (n, list_length) item indexes
    scores: np.ndarray     # (n, list_length)
    baseline: np.ndarray   # (n, list_length) what control would have served
    surface: np.ndarray    # (n,) index into SURFACES


class _World:
    """The catalog, the users, their true relevances and what each model knows of them."""

    def __init__(self, config: DemoConfig, rng: np.random.Generator):
        self.config = config
        n_items, n_users, n_genres = config.items, config.users, config.genres
        length = config.list_length
        # catalog: genre, Zipf popularity, quality, latent factors
        self.genre = rng.integers(0, n_genres, n_items)
        self.popularity = (rng.permutation(n_items) + 1.0) ** -1.0
        self.popularity /= self.popularity.sum()
        self.quality = rng.normal(0.0, 0.4, n_items)
        self.item_factors = rng.normal(0.0, 1.0, (n_items, 8))
        by_popularity = np.argsort(-self.popularity, kind="stable")
        self.head = by_popularity[: 3 * length]  # what the popularity baseline ranks
        self.tail = by_popularity[n_items // 5:]
        # users: tastes, activity, device
        self.visit_p = rng.beta(0.6, 0.9, n_users)
        self.device = rng.integers(0, len(_DEVICES), n_users)
        self.first_exposure = np.full(n_users, np.iinfo(np.int64).max)  # UTC day numbers
        # arms: a stable hash; a few (heavy, multi-device) users leak into a second arm
        self.user_ids = [f"user-{u:05d}" for u in range(n_users)]
        self.home = np.array([assign_arm(config.key, u, config.weights) for u in self.user_ids])
        self.other = np.full(n_users, -1)
        n_leaky = min(n_users, round(config.crossover_share * n_users)
                      or int(config.crossover_share > 0))
        leaky = rng.choice(n_users, n_leaky, replace=False)
        self.other[leaky] = (self.home[leaky] + rng.integers(1, len(ARMS), leaky.size)
                             ) % len(ARMS)
        self.visit_p[leaky] = np.maximum(self.visit_p[leaky], 0.8)
        # per user: true relevance of every item, and the models' candidates (in blocks of
        # users, so that memory stays bounded for large simulations)
        self.relevance = np.empty((n_users, n_items), dtype=np.float32)
        n_cand, n_tail, n_found = min(100, n_items // 2), min(600, self.tail.size), \
            min(300, n_items // 2)
        self.candidates = np.empty((n_users, n_cand), dtype=np.int64)
        self.cand_estimate = np.empty((n_users, n_cand))
        self.tail_candidates = np.empty((n_users, n_tail), dtype=np.int64)
        self.found = np.empty((n_users, n_found), dtype=np.int64)
        self.found_logit = np.empty((n_users, n_found))
        for block in range(0, n_users, 1000):
            rows = slice(block, min(block + 1000, n_users))
            logit = self._true_logit(rng, rows.stop - rows.start)
            self.relevance[rows] = 1.0 / (1.0 + np.exp(-logit))
            # the personalised model's estimate carries a fixed error per (user, item)
            estimate = logit + rng.normal(0.0, 1.1, logit.shape)
            self.candidates[rows] = _best(estimate, n_cand)
            self.cand_estimate[rows] = np.take_along_axis(estimate, self.candidates[rows], 1)
            self.tail_candidates[rows] = self.tail[_best(estimate[:, self.tail], n_tail)]
            # what users find on their own (search, browsing): their truest tastes
            self.found[rows] = _best(logit, n_found)
            self.found_logit[rows] = np.take_along_axis(logit, self.found[rows], axis=1)
        self.item_ids = np.array([f"item-{i:05d}" for i in range(n_items)], dtype=object)
        self.examination = 1.0 / (1.0 + np.arange(length)) ** 0.9
        _engage(self, config)
        self.joins_us = _joins(config)
        self.last_click_us = np.full(n_users, _NEVER)  # :func:`simulate` sets them
        self.first_us = np.full(n_users, np.iinfo(np.int64).max)  # first list served (µs)
        self._surfaces = np.random.default_rng([config.seed, 4])  # its own: same stream

    def _true_logit(self, rng: np.random.Generator, n_users: int) -> np.ndarray:
        """Logit of the true relevance of every item for ``n_users`` new users: their taste
        for the item's genre (a Dirichlet mix), latent factors, the item's quality and, a
        little, its popularity."""
        n_genres, n_items = self.config.genres, self.config.items
        taste = rng.dirichlet(np.full(n_genres, 0.4), n_users)
        factors = rng.normal(0.0, 1.0, (n_users, self.item_factors.shape[1]))
        return (-5.15 + 0.9 * np.log(taste[:, self.genre] * n_genres + 0.05)
                + 0.6 / np.sqrt(factors.shape[1]) * factors @ self.item_factors.T
                + self.quality + 0.35 * np.log(self.popularity * n_items))

    # ------------------------------------------------------------------ serving
    def visits(self, rng: np.random.Generator, day_us: int) -> _Visits:
        """The day's requests (day_us: its first instant) and what each arm served."""
        n_users = self.config.users
        active = (rng.random(n_users) < self.visit_p) & (self.joins_us <= day_us)
        count = np.where(active, 1 + rng.poisson(4.0 * self.visit_p), 0)
        user = np.repeat(np.arange(n_users), count)
        hour = rng.choice(24, user.size, p=_DIURNAL / _DIURNAL.sum())
        served = day_us + hour * _HOUR_US + rng.integers(0, _HOUR_US, user.size)
        order = np.argsort(served, kind="stable")
        user, served = user[order], served[order]
        arm = self.home[user].copy()
        leak = (self.other[user] >= 0) & (rng.random(user.size) < 0.5)
        arm[leak] = self.other[user[leak]]
        baseline, base_scores = self._control(rng, user.size)
        items, scores = baseline.copy(), base_scores.copy()
        for code, model in ((1, self._personalised), (2, self._diverse)):
            rows = np.flatnonzero(arm == code)
            if rows.size:
                items[rows], scores[rows] = model(rng, user[rows])
        surface = self._surfaces.choice(len(SURFACES), user.size, p=list(SURFACES.values()))
        # the personalised model knows the users who clicked in the KNOWN_US before their
        # first exposure (what the cohort "returning" holds); the others get the
        # popularity list (cold start)
        np.minimum.at(self.first_us, user, served)
        cold = (arm == 1) & (self.first_us[user] - self.last_click_us[user] > KNOWN_US)
        items[cold], scores[cold] = baseline[cold], base_scores[cold]
        self._elsewhere(np.flatnonzero(surface != 0), user, items, scores, baseline)
        self._remember_first_exposure(user, served)
        return _Visits(user.size, user, arm, served, items, scores, baseline, surface)

    def _elsewhere(self, rows: np.ndarray, user: np.ndarray, items: np.ndarray,
                   scores: np.ndarray, baseline: np.ndarray) -> None:
        """Off the home feed (search, item pages) the experiment changes nothing: every
        arm serves the page's own ranker, which finds what the user looks for (some of
        their true favourites, in a random order) among the items that neither the
        popularity list nor the personalised model would serve them (so that no home list
        takes credit for their clicks, nor they for the home lists'), the same for the
        request whatever the arm."""
        if not rows.size:
            return
        length = items.shape[1]
        pool = self.found[user[rows]]
        served = np.concatenate([self.candidates[user[rows]],
                                 np.broadcast_to(self.head, (rows.size, self.head.size))],
                                axis=1)
        taken = (pool[:, :, None] == served[:, None, :]).any(axis=2)
        keys = self._surfaces.random(pool.shape) + taken  # the others first, shuffled
        keep = np.argsort(keys, axis=1)[:, :length]
        items[rows] = baseline[rows] = np.take_along_axis(pool, keep, axis=1)
        scores[rows] = 1.0 - 0.05 * np.arange(length)[None, :]

    # ------------------------------------------------------------------ novelty
    def _remember_first_exposure(self, user: np.ndarray, served_us: np.ndarray) -> None:
        """Record each user's first day (UTC day number) with a served list."""
        np.minimum.at(self.first_exposure, user, served_us // _DAY_US)

    def _novelty(self, visits: _Visits) -> np.ndarray:
        """Per visit, the factor on its click probabilities: the diverse arm's unusual lists
        draw clicks out of curiosity at first, ``1 + NOVELTY * NOVELTY_DECAY ** d`` on the
        user's d-th day since their first exposure, fading to 1 (1 in the other arms and
        off the home feed, where every arm serves the same lists)."""
        days = visits.served_us // _DAY_US - self.first_exposure[visits.user]
        return np.where((visits.arm == ARMS.index("diverse")) & (visits.surface == 0),
                        1.0 + NOVELTY * NOVELTY_DECAY ** days.astype(float), 1.0)

    def _control(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        length = self.config.list_length
        score = self.popularity[self.head] * 1000 * rng.lognormal(0.0, 0.35, (n, self.head.size))
        top = np.argsort(-score, axis=1)[:, :length]
        return self.head[top], np.take_along_axis(score, top, axis=1)

    def _personalised(self, rng: np.random.Generator, user: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        length = self.config.list_length
        estimate = self.cand_estimate[user]
        noisy = estimate + rng.normal(0.0, 0.3, estimate.shape)
        top = np.argsort(-noisy, axis=1)[:, :length]
        items = np.take_along_axis(self.candidates[user], top, axis=1)
        return items, 1.0 / (1.0 + np.exp(-np.take_along_axis(noisy, top, axis=1)))

    def _diverse(self, rng: np.random.Generator, user: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The personalised model's best half, interleaved with discoveries: random picks
        among the user's best long-tail guesses (none twice)."""
        length = self.config.list_length
        n_picks = length // 2
        head, head_scores = self._personalised(rng, user)
        head = head[:, : length - n_picks]
        pool = self.tail_candidates[user]
        keys = rng.random(pool.shape)
        keys[(pool[:, :, None] == head[:, None, :]).any(axis=2)] = -1.0
        picks = np.take_along_axis(  # in the order of their keys (argpartition's differs
            pool, np.argsort(-keys, axis=1, kind="stable")[:, :n_picks], axis=1)  # by numpy)
        items = np.empty((user.size, length), dtype=head.dtype)
        items[:, 0::2], items[:, 1::2] = head, picks
        # the re-ranker's final score falls with the rank it gave
        scores = head_scores[:, :1] * (1.0 - 0.05 * np.arange(length))[None, :]
        return items, scores

    def impression_records(self, visits: _Visits, ids: list[str]) -> list[dict]:
        key = self.config.key
        items = self.item_ids[visits.items].tolist()
        baseline = self.item_ids[visits.baseline].tolist()
        scores = np.round(visits.scores, 6).tolist()
        names = list(SURFACES)
        return [
            {"impression_id": ids[i], "experiment": key, "arm": ARMS[arm],
             "user_id": self.user_ids[user], "items": items[i], "scores": scores[i],
             "baseline_items": baseline[i], "served_at": _instant(served),
             "context": {"surface": names[surface], "device": _DEVICES[self.device[user]]}}
            for i, (user, arm, served, surface) in enumerate(zip(
                visits.user.tolist(), visits.arm.tolist(), visits.served_us.tolist(),
                visits.surface.tolist(), strict=True))
        ]

    # ------------------------------------------------------------------ behaviour
    def _events(self, rng: np.random.Generator, visits: _Visits
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(visit, item, event code, occurred_us) of every interaction the visits cause."""
        relevance = self.relevance[visits.user[:, None], visits.items]
        clicked = rng.random(relevance.shape) < np.minimum(
            self.examination[None, :] * relevance * self._novelty(visits)[:, None], 1.0)
        row, col = np.nonzero(clicked)
        item = visits.items[row, col]
        # a click comes seconds to minutes after the list; deeper ranks a little later
        click_us = (visits.served_us[row] + (2 + 8 * col) * 1_000_000
                    + (rng.lognormal(np.log(60.0), 1.2, row.size) * 1e6).astype(np.int64))
        parts = [(row, item, np.zeros_like(row), click_us)]
        play = rng.random(row.size) < 0.6
        parts.append((row[play], item[play], np.full(play.sum(), 1),
                      click_us[play] + rng.integers(5, 90, play.sum()) * 1_000_000))
        save = rng.random(row.size) < 0.2
        parts.append((row[save], item[save], np.full(save.sum(), 2),
                      click_us[save] + (rng.exponential(20 * 60, save.sum()) * 1e6
                                        ).astype(np.int64) + 1_000_000))
        buy = rng.random(row.size) < 0.06 + 0.3 * relevance[row, col]
        hours = np.minimum(rng.exponential(2.0, buy.sum()), 22.0)
        after_window = rng.random(buy.sum()) < 0.1  # comes back the next day to buy
        hours[after_window] = rng.uniform(24.2, 30.0, after_window.sum())
        parts.append((row[buy], item[buy], np.full(buy.sum(), 3),
                      click_us[buy] + (hours * _HOUR_US).astype(np.int64)))
        # items found outside the list (search, browsing), never one of the served ones
        found_rows = np.flatnonzero(rng.random(visits.n) < self.config.outside_share)
        if found_rows.size:
            pool = self.found[visits.user[found_rows]]
            keys = self.found_logit[visits.user[found_rows]] + rng.gumbel(size=pool.shape)
            served = (pool[:, :, None] == visits.items[found_rows][:, None, :]).any(axis=2)
            keys[served] = -np.inf
            found = pool[np.arange(pool.shape[0]), np.argmax(keys, axis=1)]
            found_us = visits.served_us[found_rows] + rng.integers(2 * 60, 8 * 3600,
                                                                   found_rows.size) * 1_000_000
            parts.append((found_rows, found, np.zeros_like(found_rows), found_us))
            play = rng.random(found_rows.size) < 0.5
            parts.append((found_rows[play], found[play], np.full(play.sum(), 1),
                          found_us[play] + rng.integers(5, 90, play.sum()) * 1_000_000))
        return tuple(np.concatenate(columns) for columns in zip(*parts, strict=True))

    def interaction_records(self, rng: np.random.Generator, visits: _Visits, ids: list[str],
                            start_us: int) -> Iterator[tuple[int, dict]]:
        """(arrival day, record) of every interaction the day's visits cause; a retried one
        comes twice."""
        config = self.config
        row, item, event, occurred = self._events(rng, visits)
        order = np.lexsort((event, item, row))
        row, item, event, occurred = row[order], item[order], event[order], occurred[order]
        arrival = (occurred - start_us) // _DAY_US
        late = rng.random(row.size) < config.late_share
        arrival[late] += rng.integers(1, 4, late.sum())
        explicit = rng.random(row.size) < config.explicit_share
        retried = rng.random(row.size) < config.retry_share
        retry_day = arrival + (rng.random(row.size) < 0.3)  # sometimes with the next batch
        users = visits.user[row].tolist()
        names = self.item_ids[item].tolist()
        for i, (r, code, when) in enumerate(zip(row.tolist(), event.tolist(), occurred.tolist(),
                                                strict=True)):
            record = {"event_id": f"{ids[r]}-{EVENTS[code]}-{names[i]}",
                      "user_id": self.user_ids[users[i]], "item_id": names[i],
                      "event": EVENTS[code], "occurred_at": _instant(when)}
            if explicit[i]:
                record["impression_id"] = ids[r]
            yield int(arrival[i]), record
            if retried[i]:
                yield int(retry_day[i]), dict(record)


# ---------------------------------------------------------------------------- history
# Persistent engagement, arrivals and the days before the experiment (what CUPED adjusts for;
# the records: :mod:`tracker.demo.history`). Their random draws come from generators of
# their own, so the experiment's stream of draws is the one it would be without them.

def _last_clicks(world: _World) -> np.ndarray:
    """Per user, their last click before the experiment (UTC µs; those of
    :func:`~tracker.demo.history.pre_period`), :data:`_NEVER` for none (without a history:
    every user of the product clicked just before it)."""
    if not world.config.history_days:
        start_us = _start_us(world.config)
        return np.where(world.joins_us == 0, start_us - 1, _NEVER)
    last = np.full(world.config.users, _NEVER)
    for _, day in _past(world):
        clicked = day.user[day.row]
        np.maximum.at(last, clicked, day.click_us.astype(np.int64))
    return last


def new_users(config: DemoConfig = DemoConfig()) -> set[str]:
    """The users new to the product (no history before the experiment; they join on one of
    its days): the personalised model serves them the popularity list."""
    return {f"user-{u:05d}" for u in np.flatnonzero(_joins(config) > 0)}


def _joins(config: DemoConfig) -> np.ndarray:
    """Per user, the first instant they may visit (UTC µs): 0 for the users of the product
    before the experiment, the start of a day of the experiment for the
    ``config.new_share`` new to it (no history before it)."""
    rng = np.random.default_rng([config.seed, 3])
    new = rng.random(config.users) < config.new_share
    start_us = _start_us(config)
    day = rng.integers(0, config.days, config.users)
    return np.where(new, start_us + day * _DAY_US, 0)


def _engage(world: _World, config: DemoConfig) -> None:
    """Give each user a persistent engagement: a shift of the log-odds of every click, drawn
    once (normal, spread ``config.engagement``, centred so that the average click rate
    stays), so that a user who clicked a lot before the experiment clicks a lot in it."""
    if config.engagement <= 0:
        world.engagement = np.zeros(config.users)
        return
    rng = np.random.default_rng([config.seed, 1])
    spread = config.engagement
    world.engagement = rng.normal(-spread**2 / 2, spread, config.users)
    logit = np.log(world.relevance) - np.log1p(-world.relevance)
    world.relevance[:] = 1.0 / (1.0 + np.exp(-(logit + world.engagement[:, None])))


@dataclass
class _PastDay:
    """One day before the experiment: its lists (``user, served, items``) and their clicks
    (``row, col``: list and rank; ``click_us``; ``then``: what may follow each)."""

    user: np.ndarray
    served: np.ndarray
    items: np.ndarray
    row: np.ndarray
    col: np.ndarray
    click_us: np.ndarray
    then: np.ndarray


def _past(world: _World) -> Iterator[tuple[int, _PastDay]]:
    """The ``history_days`` days before the experiment, oldest first, each with how many
    days before its start it lies (draws of a generator of their own)."""
    config = world.config
    rng = np.random.default_rng([config.seed, 2])
    start_us = _start_us(config)
    for back in range(config.history_days, 0, -1):
        yield back, _past_day(world, rng, start_us - back * _DAY_US)


def _past_day(world: _World, rng: np.random.Generator, day_us: int) -> _PastDay:
    """One day's lists and clicks before the experiment (users new to the product have
    none: they join during it)."""
    config = world.config
    active = (rng.random(config.users) < world.visit_p) & (world.joins_us == 0)
    count = np.where(active, 1 + rng.poisson(4.0 * world.visit_p), 0)
    user = np.repeat(np.arange(config.users), count)
    served = day_us + rng.choice(24, user.size, p=_DIURNAL / _DIURNAL.sum()) * _HOUR_US \
        + rng.integers(0, _HOUR_US, user.size)
    items, _ = world._control(rng, user.size)
    relevance = world.relevance[user[:, None], items]
    row, col = np.nonzero(rng.random(relevance.shape) < world.examination[None, :] * relevance)
    click_us = served[row] + (2 + 8 * col) * 1_000_000 + rng.integers(5, 600, row.size) * 1e6
    return _PastDay(user, served, items, row, col, click_us, rng.random(row.size))


def _best(scores: np.ndarray, n: int) -> np.ndarray:
    """Per row, the columns of its ``n`` highest scores, in column order: the order
    ``argpartition`` leaves them in is its algorithm's (numpy 2 changed it), and the draws
    made per candidate follow this order, so the same seed gives the same demo on every
    numpy."""
    if n >= scores.shape[1]:
        return np.broadcast_to(np.arange(scores.shape[1]), scores.shape).copy()
    return np.sort(np.argpartition(-scores, n - 1, axis=1)[:, :n], axis=1)


def _start_us(config: DemoConfig) -> int:
    """The first instant of day 0 (UTC µs)."""
    return (config.first_day() - _EPOCH) // timedelta(microseconds=1)


def _instant(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)
