"""``python -m seif.demo`` (`make demo`): the walkthrough."""

from seif.demo.walkthrough import main

raise SystemExit(main())
