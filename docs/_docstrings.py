"""Griffe extension: tracker's docstrings, written for Sphinx and doctest, read as Markdown.

The docstrings are checked by doctest and name other objects with Sphinx roles; the API
reference (mkdocstrings) renders them as Markdown, where a doctest's ``>>>`` is a quote and an
output such as ``[('ios', False)]`` a reference link. Before rendering, each docstring has

- its doctest runs (a ``>>>`` line, its ``...`` continuations and output, up to a blank
  line) fenced as ``pycon`` code;
- each role (``:func:`~tracker.metrics.ndcg```) shown as code (``ndcg``: a ``~`` keeps the
  last name, as Sphinx does);
- a paragraph ending in ``::`` (a literal block follows) ending in ``:``.

Nothing here changes the code's docstrings, only what the site shows.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


def _fence_doctests(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith(">>>"):
            out.append(re.sub(r"(\S)::$", r"\1:", line))
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return out


def markdown(text: str) -> str:
    """``text`` (a docstring) as Markdown: doctests fenced, roles as code, ``::`` as ``:``."""
    return "\n".join(_fence_doctests(ROLE.sub(_role, text).split("\n")))


class SphinxToMarkdown(griffe.Extension):
    """Rewrites each docstring with :func:`markdown` when its object is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:  # noqa: ARG002
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
