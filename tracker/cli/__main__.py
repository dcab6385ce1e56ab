"""``python -m tracker.cli``: the ``tracker`` command."""

from tracker.cli import main

main()
