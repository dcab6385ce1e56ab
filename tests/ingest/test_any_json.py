"""Property: any JSON value in any field of a record (or as the record itself) gives a stored
record or one rejection, never another exception, and the valid records around it are
stored; through a bulk call and a JSON Lines import."""

from __future__ import annotations

import contextlib
import itertools
import json

import pandas as pd
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.conftest import fresh_database, migrated
from tests.helpers import impression, interaction, make_experiment
from tracker import Tracker
from tracker.config import Settings
from tracker.ingest.frames import file_records
from tracker.ingest.validate import IMPRESSION_FIELDS, INTERACTION_FIELDS
from tracker.store.models import Impression, Interaction

TEXT = st.text(max_size=20) | st.sampled_from(
    ["\x00", "a\ud800", "home", "control", "click", "", "2026-11-01T12:00:00Z",
     "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "1e999", "NaN", "x" * 400])
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(10**300, 10**400)
           | st.floats() | TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5)
                    | st.dictionaries(TEXT, inner, max_size=4), max_leaves=20)
DEEP = st.integers(1, 40).map(lambda n: json.loads("[" * n + "]" * n))

RUNS = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
KINDS = {"impressions": (impression, "impression_id", sorted(IMPRESSION_FIELDS)),
         "interactions": (interaction, "event_id", sorted(INTERACTION_FIELDS))}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    with (fresh_database(tmp_path_factory.mktemp("any-json")) as url,
          Tracker(settings=Settings(database_url=migrated(url))) as tracker):
        make_experiment(tracker)
        yield tracker


_serial = itertools.count()


def _stored(tracker: Tracker, kind: str, keys: list[str]) -> set[str]:
    table = Impression.__table__ if kind == "impressions" else Interaction.__table__
    column = table.c.impression_key if kind == "impressions" else table.c.event_key
    with tracker.engine.connect() as conn:
        return set(conn.execute(sa.select(column).where(column.in_(keys))).scalars())


def _batch(data, kind: str) -> list:
    make, id_field, fields = KINDS[kind]
    n = next(_serial)
    before = make(3 * n, **{id_field: f"any-{3 * n}"})
    after = make(3 * n + 2, **{id_field: f"any-{3 * n + 2}"})
    value = data.draw(JSON | DEEP, label="value")
    where = data.draw(st.sampled_from([*fields, "the-record", "unknown-field"]), label="field")
    if where == "the-record":
        record = value
    else:
        record = make(3 * n + 1, **{id_field: f"any-{3 * n + 1}"})
        record[where if where != "unknown-field" else "extra"] = value
    return [before, record, after]


def _check(tracker: Tracker, kind: str, batch: list, result) -> None:
    id_field = KINDS[kind][1]
    neighbours = [batch[0][id_field], batch[2][id_field]]
    assert _stored(tracker, kind, neighbours) == set(neighbours)
    assert [r.index for r in result.rejected] in ([], [1])
    # stored, or rejected; or, when the drawn value is an id an earlier example stored, a
    # duplicate or conflict (examples share the database)
    assert result.received == 3 and result.stored >= 2


@pytest.mark.parametrize("kind", KINDS)
@RUNS
@given(data=st.data())
def test_any_json_value_in_a_bulk_call_is_stored_or_rejected(home, kind, data):
    batch = _batch(data, kind)
    log = home.log_impressions if kind == "impressions" else home.log_interactions
    _check(home, kind, [_wire(r) for r in batch], log([_wire(r) for r in batch]))


@pytest.mark.parametrize("kind", KINDS)
@RUNS
@given(data=st.data())
def test_any_json_value_in_a_jsonl_import_is_stored_or_rejected(home, kind, data,
                                                                tmp_path_factory):
    batch = [_wire(r) for r in _batch(data, kind)]
    path = tmp_path_factory.mktemp("jsonl") / "records.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in batch) + "\n", encoding="utf-8")
    log = home.log_impressions if kind == "impressions" else home.log_interactions
    _check(home, kind, batch, log(file_records(path, "jsonl")))


def _wire(record):
    """A record with its times as ISO 8601 text (JSON carries nothing else)."""
    if not isinstance(record, dict):
        return record
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in record.items()}


@pytest.mark.parametrize("kind", KINDS)
@RUNS
@given(data=st.data())
def test_any_json_value_in_a_dataframe_is_stored_or_rejected(home, kind, data):
    batch = _batch(data, kind)
    if not isinstance(batch[1], dict):
        batch[1] = {"value": batch[1]}  # a row is always a mapping; the value in a column
    columns = {name: [r.get(name) for r in batch]
               for name in dict.fromkeys(k for r in batch for k in r)}
    frame = None
    for dtype in (None, object):  # pandas' Arrow strings cannot hold a lone surrogate
        with contextlib.suppress(UnicodeEncodeError):
            frame = pd.DataFrame(columns, dtype=dtype)
            break
    assume(frame is not None)  # nor can a column be named with one
    log = home.log_impressions if kind == "impressions" else home.log_interactions
    _check(home, kind, batch, log(frame))
