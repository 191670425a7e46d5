"""``python -m seif.cli``: the `seif` command."""

from seif.cli import main

raise SystemExit(main())
