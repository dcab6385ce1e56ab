"""Declared segment dimensions (issue 33, the declarations): checked once, stored on the
experiment, shown, changed by `experiments update` (a change makes the next rollup recompute
every day, refused when expired logs forbid it). Both databases."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tests.helpers import T0
from tests.rollup.scenario import create, make_logs
from tests.rollup.test_rollup import NOW
from tracker.cli import main
from tracker.errors import ExpiredLogs, ValidationError
from tracker.ingest.experiments import MAX_SEGMENTS, check_segments
from tracker.store.experiments import DEFAULT_MAX_LEVELS, Segment


def test_dimensions_are_stored_in_the_order_declared_with_their_kind_and_levels(tracker):
    create(tracker, segments=["device", "surface:list", "cohort:user", "activity"],
           max_levels=8)
    info = tracker.experiment("home")
    assert info.segments == (Segment("device", "user", 8), Segment("surface", "list", 8),
                             Segment("cohort", "user", 8), Segment("activity", "user", 8))
    assert [s.built_in for s in info.segments] == [False, False, True, True]
    assert info.to_dict()["segments"][1] == {"name": "surface", "kind": "list",
                                             "max_levels": 8}
    create(tracker, "plain")
    assert tracker.experiment("plain").segments == ()


def test_an_experiment_stored_before_segments_reads_as_none_declared(tracker):
    create(tracker)
    with tracker.engine.begin() as conn:  # NULL: as every row before migration 0024
        conn.execute(sa.text("UPDATE experiment SET segments = NULL"))
    assert tracker.experiment("home").segments == ()


@pytest.mark.parametrize(("segments", "levels", "field", "says"), [
    pytest.param(["cohort:list"], None, "segments", "cannot be a list dimension",
                 id="built-in-as-list"),
    pytest.param(["device:session"], None, "segments", "'user'", id="unknown-kind"),
    pytest.param(["dev.ice"], None, "segments", "context key of 1-64", id="dotted-name"),
    pytest.param([""], None, "segments", "context key", id="empty-name"),
    pytest.param(["x" * 65], None, "segments", "1-64", id="name-too-long"),
    pytest.param(["device", "device:list"], None, "segments", "declared twice",
                 id="declared-twice"),
    pytest.param([f"d{n}" for n in range(MAX_SEGMENTS + 1)], None, "segments",
                 f"at most {MAX_SEGMENTS}", id="too-many"),
    pytest.param("device", None, "segments", "a list of dimensions", id="a-bare-string"),
    pytest.param({"surface": "list"}, None, "segments", "a list of dimensions", id="a-dict"),
    pytest.param({"device", "surface"}, None, "segments", "a list of dimensions",
                 id="a-set-has-no-order"),
    pytest.param(["device\n"], None, "segments", "context key", id="trailing-newline"),
    pytest.param([3], None, "segments", "NAME:list", id="not-text"),
    pytest.param(["device"], 0, "max_levels", "from 1 to 100", id="no-levels"),
    pytest.param(["device"], 101, "max_levels", "from 1 to 100", id="too-many-levels"),
    pytest.param(["device"], True, "max_levels", "whole number", id="levels-a-bool"),
    pytest.param(["device"], 2.5, "max_levels", "whole number", id="levels-a-fraction"),
])
def test_a_bad_declaration_is_refused_naming_the_field_and_nothing_is_stored(
        tracker, segments, levels, field, says):
    with pytest.raises(ValidationError, match=says) as caught:
        create(tracker, segments=segments, max_levels=levels)
    assert caught.value.field == field
    assert tracker.experiments(include_archived=True) == []
    create(tracker, segments=["device"])
    with pytest.raises(ValidationError, match=says):
        tracker.update_experiment("home", segments=segments, max_levels=levels)
    assert tracker.experiment("home").segments == (Segment("device"),)


@pytest.mark.parametrize("built_in", ["cohort", "activity"])
def test_a_built_in_dimension_without_a_pre_period_is_refused_either_way_round(tracker,
                                                                                built_in):
    with pytest.raises(ValidationError, match=f"{built_in} reads .* cuped_days is 0") as caught:
        create(tracker, segments=["device", built_in], cuped_days=0)
    assert caught.value.field == "segments"
    assert tracker.experiments(include_archived=True) == []
    create(tracker, segments=["device"], cuped_days=0)  # a context key needs no pre-period
    with pytest.raises(ValidationError, match=f"{built_in} reads"):
        tracker.update_experiment("home", segments=["device", built_in])
    tracker.update_experiment("home", cuped_days=7, segments=["device", built_in])
    with pytest.raises(ValidationError, match="set cuped_days") as caught:
        tracker.update_experiment("home", cuped_days=0)
    assert caught.value.field == "cuped_days"  # the setting that changed
    info = tracker.experiment("home")
    assert (info.cuped_days, [s.name for s in info.segments]) == (7, ["device", built_in])
    tracker.update_experiment("home", cuped_days=0, segments=["device"])  # both at once


def test_segment_objects_are_checked_like_their_text():
    assert check_segments([Segment("surface", "list", 5), "device"]) == (
        Segment("surface", "list", 5), Segment("device", "user", DEFAULT_MAX_LEVELS))
    with pytest.raises(ValidationError, match="cannot be a list dimension"):
        check_segments([Segment("activity", "list")])
    with pytest.raises(ValidationError, match="from 1 to 100") as caught:
        check_segments([Segment("device", "user", 0)])
    assert caught.value.field == "segments"  # the levels came with the segment
    with pytest.raises(ValidationError, match="'user'"):
        check_segments([Segment("device", "session")])


def _logged(tracker, days: int = 3) -> None:
    imps, events = make_logs(5, days=days, key="home")
    tracker.log_impressions(imps)
    tracker.log_interactions(events)


def test_a_change_of_the_dimensions_makes_the_next_rollup_recompute_every_day(tracker):
    create(tracker, segments=["device"])
    _logged(tracker)
    first = tracker.rollup(now=NOW)[0]
    assert tracker.rollup(now=NOW)[0].days_recomputed == []  # nothing new: nothing moves
    tracker.update_experiment("home", segments=["device"])  # the same: no change
    assert tracker.rollup(now=NOW)[0].days_recomputed == []
    tracker.update_experiment("home", max_levels=5)  # the levels of those declared
    assert tracker.experiment("home").segments == (Segment("device", "user", 5),)
    assert tracker.rollup(now=NOW)[0].days_recomputed == first.days_recomputed
    tracker.update_experiment("home", segments=["device", "surface:list"])
    assert tracker.rollup(now=NOW)[0].days_recomputed == first.days_recomputed
    tracker.update_experiment("home", segments=[])
    assert tracker.experiment("home").segments == ()
    assert tracker.rollup(now=NOW)[0].days_recomputed == first.days_recomputed


def test_a_reorder_is_stored_without_a_recompute_and_a_redeclared_name_keeps_its_levels(
        tracker):
    create(tracker, segments=["device", "surface:list"], max_levels=12)
    _logged(tracker)
    tracker.rollup(now=NOW)
    tracker.update_experiment("home", segments=["surface:list", "device"])
    assert [s.name for s in tracker.experiment("home").segments] == ["surface", "device"]
    assert tracker.rollup(now=NOW)[0].days_recomputed == []
    tracker.update_experiment("home", segments=["device", "country:list"])
    assert tracker.experiment("home").segments == (Segment("device", "user", 12),
                                                   Segment("country", "list", 20))


def test_levels_alone_on_an_experiment_without_dimensions_are_refused(tracker):
    create(tracker)
    with pytest.raises(ValidationError, match="declares no dimension") as caught:
        tracker.update_experiment("home", max_levels=7)
    assert caught.value.field == "max_levels"
    with pytest.raises(ValidationError, match="no dimension is declared") as caught:
        tracker.update_experiment("home", segments=[], max_levels=7)
    assert caught.value.field == "max_levels"
    with pytest.raises(ValidationError, match="no dimension is declared") as caught:
        create(tracker, key="other", max_levels=7)  # as update refuses it, not ignored
    assert caught.value.field == "max_levels"
    assert [e.key for e in tracker.experiments()] == ["home"]  # nothing stored


def test_a_change_of_the_dimensions_that_needs_expired_logs_is_refused_before_it_is_stored(
        tracker):
    create(tracker, segments=["device"])
    _logged(tracker)
    tracker.rollup(now=NOW)
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)
    with pytest.raises(ExpiredLogs, match="new segments"):
        tracker.update_experiment("home", segments=["country:list"])
    with pytest.raises(ExpiredLogs, match="new segments"):
        tracker.update_experiment("home", max_levels=3)
    assert tracker.experiment("home").segments == (Segment("device"),)  # not stored
    assert tracker.rollup(now=NOW)[0].days_recomputed == []  # and the rollup still runs
    tracker.update_experiment("home", segments=["device"])  # no change: allowed


def _cli(db_url: str, *args: str):
    return CliRunner().invoke(main, list(args), env={"TRACKER_DATABASE_URL": db_url})


def test_the_cli_declares_shows_changes_and_clears_dimensions(tracker, db_url):
    made = _cli(db_url, "experiments", "create", "home", "--arm", "control", "--arm",
                "treatment", "--segment", "device", "--segment", "surface:list",
                "--max-levels", "12")
    assert made.exit_code == 0, made.output
    shown = _cli(db_url, "experiments", "show", "home")
    assert "device (user dimension, context key, top 12 levels)" in shown.output
    assert "surface (list dimension, context key, top 12 levels)" in shown.output
    as_json = json.loads(_cli(db_url, "experiments", "show", "home", "--format",
                              "json").output)
    assert as_json["segments"] == [{"name": "device", "kind": "user", "max_levels": 12},
                                   {"name": "surface", "kind": "list", "max_levels": 12}]
    changed = _cli(db_url, "experiments", "update", "home", "--segment", "cohort")
    assert changed.exit_code == 0 and "cohort (user dimension, built in, top 20 levels)" \
        in changed.output, changed.output
    cleared = _cli(db_url, "experiments", "update", "home", "--clear-segments")
    assert cleared.exit_code == 0 and "segments: none" in cleared.output
    assert tracker.experiment("home").segments == ()


@pytest.mark.parametrize(("args", "says"), [
    pytest.param(["create", "x", "--arm", "a", "--arm", "b", "--segment", "cohort:list"],
                 "Invalid value for --segment", id="create-built-in-as-list"),
    pytest.param(["create", "x", "--arm", "a", "--arm", "b", "--segment", "d", "--max-levels", "0"],
                 "Invalid value for --max-levels", id="create-no-levels"),
    pytest.param(["update", "home", "--clear-segments", "--segment", "d"],
                 "not both", id="update-clear-and-declare"),
    pytest.param(["create", "x", "--arm", "a", "--arm", "b", "--max-levels", "5"],
                 "no dimension is declared", id="create-levels-without-a-dimension"),
])
def test_the_cli_refuses_a_bad_declaration_in_one_line(tracker, db_url, args, says):
    create(tracker)
    refused = _cli(db_url, "experiments", *args)
    assert refused.exit_code == 2 and says in refused.output, refused.output
    assert "Traceback" not in refused.output
    assert [e.key for e in tracker.experiments(include_archived=True)] == ["home"]


SLICED_TABLES = ("rollup_metric", "rollup_health", "rollup_exposure", "rollup_exposure_day",
                 "rollup_covariate_sums")


def _slice_copies(engine: sa.Engine, segment: str, value: str) -> dict[str, int]:
    """Every whole-arm row of the tables the report reads copied into one slice (as the
    rollup's slices will stand beside them), with its values doubled; rows copied per
    table."""
    copied = {}
    with engine.begin() as conn:
        for name in SLICED_TABLES:
            table = sa.Table(name, sa.MetaData(), autoload_with=conn)
            rows = [dict(r._mapping) for r in conn.execute(sa.select(table).where(
                table.c.segment == ""))]  # the whole arms' (not the crossover cells')
            for row in rows:
                row.update(segment=segment, slice=value)
                for column in ("users", "sum", "impressions"):
                    if column in row:
                        row[column] *= 2
            if rows:
                conn.execute(sa.insert(table), rows)
            copied[name] = len(rows)
    return copied


def test_the_reports_readers_read_the_whole_arms_and_one_dimension_when_asked(tracker):
    """Sliced rows stand beside the arms' in the tables the report reads (migration 0025)
    without changing any whole-arm reading; the store reads one dimension's when asked."""
    from tracker.report import report
    from tracker.store import computed, results

    create(tracker, cuped_days=7)  # no dimension: the copies are the only sliced rows
    _logged(tracker)
    tracker.rollup(now=NOW)
    engine = tracker.engine
    readers = {
        "daily": lambda: computed.metric_table(engine, "home"),
        "cumulative": lambda: computed.metric_table(engine, "home", cumulative=True),
        "health": lambda: computed.health_table(engine, "home", cumulative=True),
        "exposure_day": lambda: computed.exposure_day_table(engine, "home"),
        "covariates": lambda: computed.covariate_table(engine, "home"),
    }
    before = {name: read() for name, read in readers.items()}
    card = report(engine, "home", now=NOW).to_dict()
    copied = _slice_copies(engine, "device", "mobile")
    assert all(copied.values()), copied  # every table had rows to copy
    for name, read in readers.items():
        assert read().equals(before[name]), name
    assert report(engine, "home", now=NOW).to_dict() == card
    with engine.connect() as conn:
        info_id = conn.execute(sa.text("SELECT id FROM experiment")).scalar_one()
        whole = results.metric_rows(conn, info_id, True)
        sliced = results.metric_rows(conn, info_id, True, segment="device")
        health = results.health_rows(conn, info_id, True, segment="device")
        assert results.metric_rows(conn, info_id, True, segment="country") == []
    assert len(sliced) == len(whole) and {r["slice"] for r in sliced} == {"mobile"}
    assert [r["users"] for r in sliced] == [2 * r["users"] for r in whole]
    assert {r["slice"] for r in health} == {"mobile"} and len(health) == copied[
        "rollup_health"] // 2  # daily and cumulative rows were copied; one view read


def _surfaces(day: int, counts: dict[str, int]) -> list[dict]:
    """Lists of day ``day`` (from T0) per surface, each to its own user, half per arm."""
    rows = []
    for surface, n in counts.items():
        for i in range(n):
            user = f"d{day}-{surface[:8]}-{i}"
            rows.append({"impression_id": f"imp-{user}", "experiment": "home",
                         "arm": ("control", "treatment")[i % 2], "user_id": user,
                         "items": ["a", "b", "c"], "context": {"surface": surface},
                         "served_at": T0 + timedelta(days=day, hours=1)})
    return rows


def _stored_levels(engine: sa.Engine) -> dict:
    with engine.connect() as conn:
        return json.loads(conn.execute(sa.text("SELECT levels FROM rollup_state")).scalar_one())


def test_levels_that_new_logs_would_move_after_expiry_stay_frozen_and_the_rollup_goes_on(
        tracker):
    """Other levels need every day again, which expired logs forbid: the stored ones are
    kept, and the new days' lists of another value fall in (other)."""
    create(tracker, segments=["surface:list"], max_levels=1)
    tracker.log_impressions([r for day in range(3)
                             for r in _surfaces(day, {"home": 6, "search": 2})])
    tracker.rollup(now=NOW)
    assert _stored_levels(tracker.engine) == {"surface": ["home"]}
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)  # the first day's logs
    tracker.log_impressions(_surfaces(5, {"search": 40}))  # search now served the most
    (summary,) = tracker.rollup(now=NOW)  # no ExpiredLogs, on this run or the next
    assert [str(day) for day in summary.days_recomputed] == [str((T0 + timedelta(5)).date())]
    assert tracker.rollup(now=NOW)[0].days_recomputed == []
    assert _stored_levels(tracker.engine) == {"surface": ["home"]}
    table = tracker.metric_table("home", segment="surface")
    table = table[table["users"] > 0]  # the report lists every slice, with 0 users too
    late = table[table["day"].astype(str) == str((T0 + timedelta(5)).date())]
    assert set(late["slice"]) == {"(other)"}
    assert set(table["slice"]) == {"home", "(other)"}


def test_a_value_too_long_to_name_a_slice_counts_as_other(tracker):
    """A context value of more than LONGEST characters (an id, a payload) never keeps a
    slice: on PostgreSQL it would not fit the results' primary-key index."""
    from tracker.rollup.levels import LONGEST

    payload = "".join(f"{n:08x}" for n in range(1000))  # 8,000 characters, no repeats
    create(tracker, segments=["surface:list"], max_levels=2)
    tracker.log_impressions(_surfaces(0, {payload: 9, "home": 4, "x" * LONGEST: 3}))
    tracker.rollup(now=NOW)
    assert _stored_levels(tracker.engine) == {"surface": ["home", "x" * LONGEST]}
    with tracker.engine.connect() as conn:
        longest = conn.execute(sa.text("SELECT max(length(slice)) FROM rollup_slice_count"))
        assert longest.scalar_one() == LONGEST
    table = tracker.metric_table("home", segment="surface")
    table = table[table["users"] > 0]  # the report lists every slice, with 0 users too
    assert set(table["slice"]) == {"home", "x" * LONGEST, "(other)"}
    other = table[(table["slice"] == "(other)") & (table["metric"] == "precision")]
    assert other.groupby("arm")["users"].max().sum() == 9  # the payload's nine lists' users
