"""``python -m debounce`` is the ``debounce`` command."""

from debounce.cli import main

raise SystemExit(main())
