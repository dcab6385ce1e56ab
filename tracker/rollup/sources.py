"""Whose logs an experiment's results came from: one watermark rule for both engines.

An experiment's rolled-up results (the tables the report reads, and the state an engine
keeps to go on incrementally) come from one **source** of logs at a time, named in
``rollup_state.source``:

- ``database``: the default engine, from the database's logs; its watermarks are the
  highest impression and interaction ids taken into account;
- ``spark:<state directory>``: the Spark engine, from a lake; its watermark is the manifest
  of lake files in that directory; ``spark:(none)`` for runs without a state directory
  (each rebuilds from its lake: one source, so that one such run does not report taking the
  experiment over from the last).

A run goes on incrementally only from its own source's watermark. A run of another source
**takes the experiment over**: it rebuilds every day from its own logs and its summary says
from what (the default engine claims the experiment before it rebuilds, so a run killed
half-way leaves a rebuild to do; Spark claims it in its last transaction, so a run killed
before leaves the experiment to its old source, and the next Spark run takes it over
again). So the engines never mix days of two logs, and
neither reads, nor resets, a watermark the other keeps. A run over every experiment takes
none over from the other engine (:func:`other_engine`): it leaves them to their engine and
says so (:func:`left_alone`); a run that names the experiment moves it. Unknown (NULL, as a
release before sources left an experiment Spark rolled up): the database's watermarks are
NULL then, so the default engine rebuilds, and Spark goes on from its manifest. Whatever
the source, a run whose logs hold none of the lists of an experiment with rolled-up days
never rebuilds it (:func:`guard_erasure`): that would erase its results.
"""

from __future__ import annotations

from pathlib import Path

from tracker.errors import EngineConflict
from tracker.store.rollup_tables import SOURCE_DATABASE

DATABASE = SOURCE_DATABASE
"""The default engine's source: the database's logs."""

_SPARK = "spark:"


_NO_STATE = "(none)"  # never a resolved path: those are absolute


def spark(state: str | Path | None) -> str:
    """The Spark engine's source with its state directory ``state`` (None: runs that keep
    none, and rebuild each time)."""
    return _SPARK + (_NO_STATE if state is None else str(Path(state).resolve()))


def describe(source: str) -> str:
    """A source for people."""
    if source == DATABASE:
        return "the default engine (the database's logs)"
    if source == _SPARK + _NO_STATE:
        return "Spark without a state directory (every such run rebuilds)"
    if source.startswith(_SPARK):
        return f"Spark (state directory {source.removeprefix(_SPARK)})"
    return repr(source)


def taken_over(stored: str | None, mine: str) -> str | None:
    """Why a run of source ``mine`` rebuilds the experiment from its own logs: its results
    came from ``stored`` (None: they came from ``mine``, or from an unknown source)."""
    if stored is None or stored == mine:
        return None
    return f"its results came from {describe(stored)}: rebuilt from {describe(mine)}"


def other_engine(stored: str | None, mine: str) -> bool:
    """Whether ``stored`` belongs to the other engine (another Spark state directory is
    the same engine: its run rebuilds, as a changed manifest would)."""
    if stored is None or stored == mine:
        return False
    return (stored == DATABASE) != (mine == DATABASE)


def left_alone(stored: str | None, mine: str, *, named: bool) -> str | None:
    """Why a run of ``mine`` over every experiment (not ``named``) leaves this one: the
    other engine's results (None: it rolls it up)."""
    if named or not other_engine(stored, mine):
        return None
    return f"left to {describe(stored)}, whose results it holds (a run naming it moves it)"


def guard_erasure(key: str, stored: str | None, mine: str, *, logged: bool, rolled_up: bool,
                  named: bool, way_out: str) -> str | None:
    """Why a run of ``mine`` leaves the experiment ``key`` rather than erase its results: a
    rebuild from its logs, which hold none of its lists (``logged`` False), would erase what
    another or an unknown source left (``rolled_up``: days stored). Raises
    :class:`~tracker.errors.EngineConflict` (``way_out`` added) when the run ``named`` it;
    None: it may roll it up."""
    if logged or not rolled_up or stored == mine:
        return None
    where = "the database holds" if mine == DATABASE else "the lake holds"
    why = (f"its results came from {describe(stored) if stored else 'an unknown source'} "
           f"and {where} none of its lists, so rolling it up here would erase them")
    if named:
        raise EngineConflict(f"experiment {key!r}: {why}; {way_out}")
    return why
