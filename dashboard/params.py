"""The view's parameters in the URL, so a link reproduces what its sender saw: each widget
starts from its query parameter (when valid) and the page writes every parameter back.

Pure over ``st.query_params``-like mappings: :func:`pick` reads one value, the page writes the
chosen ones with ``st.query_params.from_dict``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")

NAMES = ("experiment", "k", "window", "intervals", "cuped", "day", "metric", "segment")
"""Every parameter of the experiment page, in the order the URL shows them."""


def pick(params: Mapping[str, str], name: str, options: Sequence[T], default: T) -> T:
    """The option whose text is ``params[name]``, else ``default`` (missing or unknown).

    >>> pick({"k": "10"}, "k", [5, 10, 20], 10), pick({"k": "7"}, "k", [5, 10, 20], 10)
    (10, 10)
    """
    raw = params.get(name)
    for option in options:
        if str(option) == raw:
            return option
    return default
