"""Write the small sample logs in this folder (deterministic): run from the repository root.

    python examples/make_sample.py

200 served lists of 10 items for experiment ``home-recs-v2`` (arms control / two-tower) over
two days, and the clicks, plays, saves and purchases that followed, with a retried duplicate.
"""

import csv
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).parent
rng = random.Random(7)
start = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
catalog = [f"song-{i:03d}" for i in range(300)]
popularity = [1 / (i + 1) for i in range(len(catalog))]

impressions, interactions = [], []
for n in range(200):
    user = f"user-{n % 60:02d}"
    arm = "control" if int(user[-2:]) % 2 == 0 else "two-tower"
    served = start + timedelta(minutes=13 * n)
    items = rng.sample(catalog[:60], 10) if arm == "control" else rng.choices(
        catalog, weights=popularity, k=30)
    items = list(dict.fromkeys(items))[:10]
    scores = sorted((round(rng.random(), 4) for _ in items), reverse=True)
    impressions.append({"impression_id": f"req-{n:04d}", "experiment": "home-recs-v2",
                        "arm": arm, "user_id": user, "items": json.dumps(items),
                        "scores": json.dumps(scores), "served_at": served.isoformat()})
    for rank, item in enumerate(items):
        if rng.random() < (0.35 if arm == "two-tower" else 0.25) / (rank + 1):
            event = rng.choice(["click", "click", "play", "save", "purchase"])
            when = served + timedelta(minutes=rng.randint(1, 600))
            interactions.append({"event_id": f"evt-{len(interactions):05d}", "user_id": user,
                                 "item_id": item, "event": event,
                                 "occurred_at": when.isoformat(),
                                 **({"impression_id": f"req-{n:04d}"} if rng.random() < 0.5
                                    else {})})
interactions.append(dict(interactions[0]))  # a producer retry: stored once

with (HERE / "impressions.csv").open("w", newline="") as handle:
    writer = csv.DictWriter(handle, fieldnames=list(impressions[0]))
    writer.writeheader()
    writer.writerows(impressions)
with (HERE / "interactions.jsonl").open("w") as handle:
    for record in interactions:
        handle.write(json.dumps(record) + "\n")
print(f"{len(impressions)} impressions, {len(interactions)} interactions")
