"""The one renderer of plain-text tables: the CLI's listings and the report's scorecard.

Layout is rich's (:class:`rich.table.Table`): columns as wide as their widest cell in
terminal cells, so wide characters (``中文``) and marks (``↓``, ``—``) line up; never
wrapped or cut, whatever the terminal's width (the output goes to logs and pipes as well);
no colour, no markup (``[Online]`` stays text); lines end without trailing spaces.

>>> print(text_table([Column("KEY"), Column("USERS", right=True)], [("home", 12), ("ab", 3)]))
KEY   USERS
home     12
ab        3
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """A column's header and alignment (left unless ``right``)."""

    header: str
    right: bool = False


def text_table(columns: Sequence[Column], rows: Iterable[Sequence[object]], *,
               gap: int = 2, rule: bool = False) -> str:
    """``rows`` under the ``columns``' headers, ``gap`` spaces between columns, as one string
    of lines; a row shorter than the header leaves its last cells empty, ``None`` is shown
    empty. ``rule`` draws a line of ``-`` under the header, as wide as it."""
    return "\n".join(table_lines(columns, rows, gap=gap, rule=rule))


def table_lines(columns: Sequence[Column], rows: Iterable[Sequence[object]], *,
                gap: int = 2, rule: bool = False) -> list[str]:
    """The lines of :func:`text_table`."""
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, gap, 0, 0),
                  header_style=None, expand=False)
    for column in columns:
        table.add_column(column.header, justify="right" if column.right else "left",
                         no_wrap=True)  # (overflow="ignore" would drop the justification)
    for row in rows:
        cells = ["" if value is None else str(value) for value in row]
        table.add_row(*cells, *[""] * (len(columns) - len(cells)))
    out = io.StringIO()
    console = Console(file=out, width=1 << 16, color_system=None, markup=False,
                      highlight=False, emoji=False, soft_wrap=False, legacy_windows=False)
    console.print(table)
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    if rule and lines:
        lines.insert(1, "-" * cell_len(lines[0]))
    return lines
