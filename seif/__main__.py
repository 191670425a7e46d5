"""``python -m seif``: the `seif` command."""

from seif.cli import main

raise SystemExit(main())
