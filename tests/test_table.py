"""The one text-table renderer (tracker.table) of the report and the CLI listings."""

from __future__ import annotations

from rich.cells import cell_len

from tracker.table import Column, text_table


def test_columns_line_up_in_terminal_cells_with_wide_characters_and_marks():
    lines = text_table([Column("arm"), Column("users", right=True), Column("verdict")],
                       [("control", 12, "—"), ("推荐模型", 3, "better *"), ("b", None)]
                       ).splitlines()
    assert lines == ["arm       users  verdict",
                     "control      12  —",
                     "推荐模型      3  better *",
                     "b"]
    # 推荐模型 is 4 characters but 8 terminal cells: the column is 8 cells wide
    assert {cell_len(line.split("  ")[0].rstrip()) for line in lines[1:3]} == {7, 8}


def test_cells_are_text_not_markup_and_lines_carry_no_trailing_spaces():
    text = text_table([Column("group"), Column("n", right=True)],
                      [("[Online]", 1), ("[bold]x[/bold]", 22)], rule=True)
    assert text.splitlines() == ["group            n",
                                 "------------------",
                                 "[Online]         1",
                                 "[bold]x[/bold]  22"]


def test_long_cells_are_never_cut_or_wrapped():
    long = "x" * 500
    assert text_table([Column("a"), Column("b")], [(long, "end")]).splitlines()[1] == (
        f"{long}  end")
