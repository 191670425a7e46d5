"""``python -m bench.replicas ROLE ...``: the roles of ``python -m bench replicas`` run as
processes of their own (``load``: the client)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from bench.replicas.load import load_main

ROLES: dict[str, Callable[[list[str]], int]] = {"load": load_main}


def main(argv: list[str]) -> int:
    if argv and argv[0] in ROLES:
        return ROLES[argv[0]](argv[1:])
    print("python -m bench replicas [--json] [--quick] runs the benchmark; this entry point "
          "serves its roles: " + ", ".join(ROLES))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
