"""``python -m bench NAME... [--json] [--quick]``: run registered benchmarks and report them.

Each benchmark is a module with ``run(*, quick: bool) -> dict`` returning a JSON-able result:
``rows`` (``name``, ``impl``, ``median_ns``, ``p99_ns``, ``calls``), ``ratios`` (name to number)
and optionally ``notes`` (strings). Register a new one by adding it to :data:`BENCHMARKS`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

BENCHMARKS: dict[str, str] = {
    "validator": "bench.validator",
    "engine": "bench.engine",
    "runtime": "bench.runtime",
    "replay": "bench.replay",
    "sdk": "bench.sdk",
    "cel": "bench.cel",
    "language": "bench.language",
    "mcp": "bench.mcp",
    "replicas": "bench.replicas",
    "chain": "bench.chain",
    "shadow": "bench.shadow",
    "upstream": "bench.upstream",
}
"""Benchmark name to the module that runs it."""


def run(name: str, *, quick: bool) -> dict[str, Any]:
    module = importlib.import_module(BENCHMARKS[name])
    result: dict[str, Any] = module.run(quick=quick)
    return result


def render(name: str, result: dict[str, Any]) -> str:
    lines = [f"== {name}"]
    lines += [f"   {note}" for note in result.get("notes", [])]
    width = max((len(row["name"]) for row in result["rows"]), default=4)
    lines.append(f"   {'case':<{width}}  {'impl':<14} {'median':>12} {'p99':>12}")
    for row in result["rows"]:
        lines.append(
            f"   {row['name']:<{width}}  {row['impl']:<14} "
            f"{_ns(row['median_ns']):>12} {_ns(row['p99_ns']):>12}"
        )
    for label, value in result.get("ratios", {}).items():
        lines.append(f"   {label}: {value:.1f}x")
    return "\n".join(lines)


def _ns(value: float) -> str:
    return f"{value / 1000:.2f} us" if value >= 1000 else f"{value:.0f} ns"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="+", choices=[*BENCHMARKS, "all"], metavar="NAME",
                        help=f"one of: {', '.join(BENCHMARKS)}, or all")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    names = list(BENCHMARKS) if "all" in args.names else list(dict.fromkeys(args.names))
    results: dict[str, Any] = {}
    for name in names:
        results[name] = run(name, quick=args.quick)
        if not args.json:
            print(render(name, results[name]), flush=True)
    if args.json:
        json.dump({"quick": args.quick, "benchmarks": results}, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
