"""An independent, deliberately naive rollup: plain Python over the raw records, scoring each
served list with the public ``tracker.metrics`` functions. The real rollup (SQL + vectorised
numpy over position codes) must agree with it to 1e-9.

It follows docs/rollup.md literally: attribution by user and window (or by an
explicit impression key), ground truth = highest grade per item with grade > 0, user value =
mean over the user's impressions, arm value over users, crossover users excluded, popularity
for surprisal from every interaction of the ``popularity_days`` days before the experiment's
first day, catalog = items served or in a ground truth.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tracker import metrics

AT_K = ("hit_rate", "precision", "recall", "mrr", "map", "ndcg", "roc_auc")


def ground_truth(imp: dict, interactions: list[dict], window: timedelta,
                 relevance: dict | None) -> dict:
    truth: dict = {}
    for it in interactions:
        named = it.get("impression_id")
        if named is not None:
            answers = named == imp["impression_id"]
        else:
            answers = (it["user_id"] == imp["user_id"]
                       and imp["served_at"] <= it["occurred_at"] <= imp["served_at"] + window)
        if not answers:
            continue
        grade = 1.0 if relevance is None else float(relevance.get(it["event"], 0.0))
        truth[it["item_id"]] = max(truth.get(it["item_id"], 0.0), grade)
    return {item: g for item, g in truth.items() if g > 0}


def _one(fn, *args, **kwargs) -> float:
    return float(fn(*args, **kwargs)[0])


def impression_values(imp: dict, truth: dict, cutoffs, popularity) -> dict:
    items = imp["items"]
    values = {}
    for k in cutoffs:
        values[("hit_rate", k)] = _one(metrics.hit_rate, [items], [truth], k)
        values[("precision", k)] = _one(metrics.precision, [items], [truth], k)
        values[("recall", k)] = _one(metrics.recall, [items], [truth], k)
        values[("mrr", k)] = _one(metrics.mrr, [items], [truth], k)
        values[("map", k)] = _one(metrics.average_precision, [items], [truth], k)
        values[("ndcg", k)] = _one(metrics.ndcg, [items], [truth], k)
        values[("roc_auc", k)] = _one(metrics.roc_auc, [items], [truth], k)
        item_users, n_users = popularity
        if n_users >= 2:
            values[("surprisal", k)] = _one(metrics.surprisal, [items], k, item_users, n_users)
        if imp.get("baseline_items"):
            values[("unexpectedness", k)] = _one(metrics.unexpectedness, [items],
                                                 [imp["baseline_items"]], k)
    values[("r_precision", 0)] = _one(metrics.r_precision, [items], [truth])
    values[("song_clicks", 0)] = _one(metrics.song_clicks, [items], [truth])
    return values


def popularity_before(interactions: list[dict], since: datetime, moment: datetime):
    """Distinct users per item over ``[since, moment)``, every user's interactions, and the
    distinct users of them all."""
    users_of = defaultdict(set)
    everyone = set()
    for it in interactions:
        if since <= it["occurred_at"] < moment:
            users_of[it["item_id"]].add(it["user_id"])
            everyone.add(it["user_id"])
    return {item: len(users) for item, users in users_of.items()}, len(everyone)


def rollup(impressions: list[dict], interactions: list[dict], *, window: timedelta,
           relevance: dict | None, zone: str = "UTC", cutoffs=(5, 10, 20),
           popularity_days: int = 28, declared: frozenset[str] = frozenset(),
           per_user_out: dict | None = None, first_day=None, crossover_out: dict | None = None):
    """``{(cumulative, day, arm, metric, k): (users, sum, sum_sq)}`` for user metrics and
    ``{(cumulative, day, arm, metric, k): value}`` for set metrics, plus health
    ``{(cumulative, day, arm or None): (users, impressions, crossover users)}``.
    ``per_user_out`` (a dict) receives, per user-metric key, ``{user: (sum, impressions)}``
    of the user's values. ``crossover_out`` (a dict) receives the cumulative view's
    intent-to-treat additions: ``{(day, arm, metric, k): (users, sum, sum_sq)}`` over the
    crossover users whose first exposure (earliest served, then smaller impression id) was
    in ``arm``, each user's value the mean over every list of theirs through ``day``."""
    tz = ZoneInfo(zone)
    by_day = defaultdict(list)
    for imp in impressions:
        by_day[imp["served_at"].astimezone(tz).date()].append(imp)
    scored = {}  # impression id -> (day, values, truth)
    first = first_day or min(by_day, default=None)  # a slice's lists: the experiment's
    if first is not None:  # the reference period: the days before the first day
        popularity = popularity_before(
            interactions, datetime.combine(first - timedelta(days=popularity_days),
                                           datetime.min.time(), tzinfo=tz),
            datetime.combine(first, datetime.min.time(), tzinfo=tz))
    for day, imps in by_day.items():
        for imp in imps:
            truth = ground_truth(imp, interactions, window, relevance)
            scored[imp["impression_id"]] = (day, impression_values(imp, truth, cutoffs,
                                                                   popularity), truth)
    user_stats, set_stats, health = {}, {}, {}
    days = sorted(by_day)
    for cumulative in (False, True):
        for day in days:
            chosen = [imp for imp in impressions
                      if (scored[imp["impression_id"]][0] <= day if cumulative
                          else scored[imp["impression_id"]][0] == day)]
            arms_of = defaultdict(set)
            for imp in chosen:
                arms_of[imp["user_id"]].add(imp["arm"])
            crossed = {u for u, arms in arms_of.items() if len(arms) > 1}
            per_user = defaultdict(lambda: defaultdict(list))  # (user, arm) -> column -> values
            arm_users, arm_imps = defaultdict(set), defaultdict(int)
            lists = defaultdict(list)
            catalog = set(declared)  # the declared catalog plus the items seen
            for imp in chosen:
                arm_users[imp["arm"]].add(imp["user_id"])
                arm_imps[imp["arm"]] += 1
                lists[imp["arm"]].append(imp["items"])
                catalog.update(imp["items"])
                catalog.update(scored[imp["impression_id"]][2])
                if imp["user_id"] in crossed:
                    continue
                for column, value in scored[imp["impression_id"]][1].items():
                    per_user[(imp["user_id"], imp["arm"])][column].append(value)
            for arm in arm_users:
                health[(cumulative, day, arm)] = (
                    len(arm_users[arm]), arm_imps[arm], len(arm_users[arm] & crossed))
                columns = {c for (u, a), cols in per_user.items() if a == arm for c in cols}
                for column in columns:
                    xs = [sum(cols[column]) / len(cols[column])
                          for (u, a), cols in per_user.items() if a == arm and column in cols]
                    user_stats[(cumulative, day, arm) + column] = (
                        len(xs), sum(xs), sum(x * x for x in xs))
                    if per_user_out is not None:
                        per_user_out[(cumulative, day, arm) + column] = {
                            u: (sum(cols[column]), len(cols[column]))
                            for (u, a), cols in per_user.items() if a == arm and column in cols}
                for k in cutoffs:
                    set_stats[(cumulative, day, arm, "coverage", k)] = metrics.coverage(
                        lists[arm], k, catalog)
                    set_stats[(cumulative, day, arm, "gini", k)] = metrics.gini_index(
                        lists[arm], k, catalog)
                    set_stats[(cumulative, day, arm, "entropy", k)] = metrics.entropy(
                        lists[arm], k)
            health[(cumulative, day, None)] = (len(arms_of), len(chosen), len(crossed))
            if cumulative and crossover_out is not None:
                _crossover(crossover_out, day, impressions, chosen, crossed, scored)
    return user_stats, set_stats, health


def _crossover(out: dict, day, impressions: list[dict], chosen: list[dict], crossed: set,
               scored: dict) -> None:
    """The crossover users of ``chosen`` in the arm of their first exposure, with every list
    of theirs (:func:`rollup`'s ``crossover_out``)."""
    first = {}
    for imp in sorted(impressions, key=lambda i: (i["served_at"], i["impression_id"])):
        first.setdefault(imp["user_id"], imp["arm"])
    values = defaultdict(lambda: defaultdict(list))  # user -> column -> values
    for imp in chosen:
        if imp["user_id"] in crossed:
            for column, value in scored[imp["impression_id"]][1].items():
                values[imp["user_id"]][column].append(value)
    for user, columns in values.items():
        for column, xs in columns.items():
            key = (day, first[user]) + column
            x = sum(xs) / len(xs)
            n, total, total_sq = out.get(key, (0, 0.0, 0.0))
            out[key] = (n + 1, total + x, total_sq + x * x)
