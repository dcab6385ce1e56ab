"""A realistic 14-day recommender A/B test, simulated (numpy and the standard library only).

- **Catalog** of items in genres, with a Zipf-like popularity skew and a quality per item.
- **Users** with their own tastes (a Dirichlet mix over genres) and activity (a few heavy
  users, many occasional ones); each visit is one served list of 10 items.
- **Arms** (a third of users each, by a stable hash of the user id): ``control`` ranks by
  global popularity; ``personalised`` ranks by the user's true affinity seen through noise
  (truly better); ``diverse`` mixes personalised picks with long-tail items (higher catalog
  coverage, lower precision). Every impression also carries ``baseline_items``: what the
  control model would have served for the same request.
- **Clicks** follow position bias (examination falls with rank) times the user's true
  relevance; a click may lead to a play, a save or a purchase (graded events); users also
  find items outside the list. Events come minutes to hours after the list, a few beyond the
  24-hour attribution window.
- **Real logs are messy**: ~0.5% of users are exposed to two arms (crossover), ~3% of
  interactions arrive a day late (in the next day's batch), ~1% are sent twice (a retry with
  the same event id and payload).

``simulate(config)`` yields one :class:`DayBatch` per day: the records a production service
would have logged by the end of that day, ready for ``Tracker.log_impressions`` /
``log_interactions``. Deterministic for a seed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np

ARMS = ("control", "personalised", "diverse")
RELEVANCE = {"click": 1, "play": 1, "save": 2, "purchase": 3}


@dataclass(frozen=True)
class DemoConfig:
    key: str = "demo-home-recs"
    days: int = 14
    users: int = 4000
    items: int = 2000
    genres: int = 12
    list_length: int = 10
    visits_per_user_day: float = 0.6
    seed: int = 7
    start: datetime | None = None  # default: UTC midnight `days` days before today

    def first_day(self) -> datetime:
        if self.start is not None:
            return self.start
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return today - timedelta(days=self.days)


@dataclass
class DayBatch:
    day: date
    impressions: list[dict] = field(default_factory=list)
    interactions: list[dict] = field(default_factory=list)


def experiment_spec(config: DemoConfig) -> dict:
    """Keyword arguments for ``Tracker.create_experiment``."""
    return {
        "key": config.key, "name": "Home page recommendations (simulated)",
        "description": "tracker demo: popularity control vs a personalised model vs a "
                       "diversity-oriented model, 14 simulated days",
        "arms": dict.fromkeys(ARMS, 1.0), "control": "control",
        "attribution_window": timedelta(hours=24), "relevance": dict(RELEVANCE),
        "timezone": "UTC", "cutoffs": (5, 10, 20), "starts_at": config.first_day(),
    }


def _arm_of(user: str) -> int:
    digest = hashlib.sha256(user.encode()).digest()
    return int.from_bytes(digest[:8], "big") % len(ARMS)


class _World:
    def __init__(self, config: DemoConfig, rng: np.random.Generator):
        n_items, n_users, g = config.items, config.users, config.genres
        self.genre = rng.integers(0, g, n_items)
        rank = rng.permutation(n_items) + 1
        self.popularity = 1.0 / rank**1.1
        self.popularity /= self.popularity.sum()
        self.quality = rng.normal(0.0, 0.5, n_items)
        self.taste = rng.dirichlet(np.full(g, 0.3), n_users)
        self.activity = rng.lognormal(0.0, 1.0, n_users)
        self.activity *= config.visits_per_user_day / self.activity.mean()
        # true relevance probability of every item for every user
        affinity = self.taste[:, self.genre] * g  # 1 = average taste
        logit = -5.6 + 2.2 * np.log1p(affinity) + self.quality[None, :] \
            + 0.08 * np.log(self.popularity * n_items)[None, :]
        self.relevance = 1.0 / (1.0 + np.exp(-logit))
        self.by_popularity = np.argsort(-self.popularity, kind="stable")
        self.long_tail = self.by_popularity[n_items // 5:]


def _examination(rank: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + rank) ** 0.9  # rank 0 -> 1.0, rank 9 -> ~0.13


def _rank(world: _World, arm: int, user: int, length: int, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray]:
    if arm == 0:  # popularity, lightly shuffled within the head
        head = world.by_popularity[: length * 3]
        scores = world.popularity[head] * rng.uniform(0.8, 1.2, head.size)
        order = head[np.argsort(-scores)][:length]
        return order, np.sort(scores)[::-1][:length]
    noisy = np.log(world.relevance[user]) + rng.normal(0.0, 0.5 if arm == 1 else 0.8,
                                                         world.relevance.shape[1])
    if arm == 1:
        top = np.argpartition(-noisy, length)[:length]
        top = top[np.argsort(-noisy[top])]
        return top, noisy[top]
    half = length // 2  # diverse: personalised head, long-tail discoveries after
    top = np.argpartition(-noisy, half)[:half]
    top = top[np.argsort(-noisy[top])]
    tail = world.long_tail[~np.isin(world.long_tail, top)]
    extra = rng.choice(tail, length - half, replace=False)
    items = np.concatenate((top, extra))
    return items, np.concatenate((noisy[top], noisy[extra] - 1.0))


def simulate(config: DemoConfig = DemoConfig()) -> Iterator[DayBatch]:
    """One :class:`DayBatch` per simulated day (see the module docstring)."""
    rng = np.random.default_rng(config.seed)
    world = _World(config, rng)
    names = [f"user-{u:05d}" for u in range(config.users)]
    arms = np.array([_arm_of(n) for n in names])
    crossover = rng.random(config.users) < 0.005
    start = config.first_day()
    late: list[dict] = []
    counter = 0
    for d in range(config.days):
        day_start = start + timedelta(days=d)
        batch = DayBatch(day_start.date())
        batch.interactions.extend(late)
        late = []
        visits = rng.poisson(world.activity)
        for user in np.flatnonzero(visits):
            for _ in range(int(visits[user])):
                counter += 1
                arm = int(arms[user])
                if crossover[user] and rng.random() < 0.5:
                    arm = (arm + 1) % len(ARMS)
                # diurnal: more visits in the evening
                hour = min(23.99, abs(rng.normal(19.0, 4.0)) % 24)
                served = day_start + timedelta(hours=float(hour))
                items, scores = _rank(world, arm, int(user), config.list_length, rng)
                baseline, _ = _rank(world, 0, int(user), config.list_length, rng)
                impression_id = f"{config.key}-imp-{counter:08d}"
                batch.impressions.append({
                    "impression_id": impression_id, "experiment": config.key,
                    "arm": ARMS[arm], "user_id": names[user],
                    "items": [f"item-{i:05d}" for i in items],
                    "scores": [round(float(s), 6) for s in scores],
                    "baseline_items": [f"item-{i:05d}" for i in baseline],
                    "served_at": served, "context": {"surface": "home"},
                })
                events = _events(world, int(user), items, served, rng)
                for n, (item, event, when) in enumerate(events):
                    record = {"event_id": f"{impression_id}-e{n}", "user_id": names[user],
                              "item_id": f"item-{item:05d}", "event": event,
                              "occurred_at": when}
                    if rng.random() < 0.05:
                        record["impression_id"] = impression_id  # explicit attribution
                    if when >= day_start + timedelta(days=1) or rng.random() < 0.03:
                        late.append(record)  # logged with the next day's batch
                    else:
                        batch.interactions.append(record)
                    if rng.random() < 0.01:
                        batch.interactions.append(dict(record))  # a retried send
        yield batch


def _events(world: _World, user: int, items: np.ndarray, served: datetime,
            rng: np.random.Generator) -> list[tuple[int, str, datetime]]:
    out = []
    p_click = _examination(np.arange(items.size)) * world.relevance[user, items]
    for item, p in zip(items.tolist(), p_click.tolist(), strict=True):
        if rng.random() >= p:
            continue
        when = served + timedelta(seconds=float(rng.exponential(180.0)) + 1.0)
        out.append((item, "click", when))
        if rng.random() < 0.6:
            out.append((item, "play", when + timedelta(seconds=float(rng.uniform(5, 60)))))
        if rng.random() < 0.25:
            out.append((item, "save", when + timedelta(minutes=float(rng.exponential(30)))))
        if rng.random() < 0.08:
            # most purchases within hours, some after the 24-hour attribution window
            hours = 26.0 if rng.random() < 0.1 else min(float(rng.exponential(3.0)), 23.5)
            out.append((item, "purchase", when + timedelta(hours=hours)))
    if rng.random() < 0.15:  # found outside the list
        item = int(rng.choice(world.relevance.shape[1],
                              p=world.relevance[user] / world.relevance[user].sum()))
        out.append((item, "click", served + timedelta(minutes=float(rng.uniform(1, 120)))))
    return out
