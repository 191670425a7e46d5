"""What a model is told to fix when the engine refuses its arguments (``ARGUMENTS_INVALID``):
each schema error's pointer and message, bounded, and never an argument's value.

Pure, and shared by whatever shows a refusal to a model: the SDKs (clients, which render the
``decision.errors`` of a receipt) and MCP's ``isError`` text (a server, which holds the
decision's :class:`~policy.schema.parsed.SchemaError` values). Both kinds of error are taken:
anything with a string ``pointer`` and ``message``, as attributes or as mapping keys.

- At most :data:`MAX_ERRORS` errors are shown, in the order the validator found them; the rest
  are counted (``omitted``).
- A pointer is cut to :data:`MAX_POINTER` characters and a message to :data:`MAX_MESSAGE`, each
  marked ``…(+N)`` (N characters dropped), as the decision log cuts what it records.
- A bound's message names the value that broke it (a number: "`5` is less than the minimum
  `1`"); that value is replaced by "the value". No other message names a value (a string is
  "value", a type "a string"); pointers and "property `k` is not allowed" name argument keys,
  the schema's or the model's own, never a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_ERRORS = 10
MAX_POINTER = 120
MAX_MESSAGE = 200
ROOT = "the arguments"
"""How a text names the pointer ``""`` (the arguments object itself)."""

_SHOWN_VALUE = re.compile(r"^(?:`[^`]*`|an integer of \d+ bits)(?= is (?:less|greater) than )")


@dataclass(frozen=True, slots=True)
class ArgumentError:
    """One error as a model is shown it: where in the arguments (an RFC 6901 pointer, ``""``
    for the arguments object) and what is wrong."""

    pointer: str
    message: str


@dataclass(frozen=True, slots=True)
class ArgumentErrors:
    """The errors shown (at most :data:`MAX_ERRORS`) and how many more there were."""

    shown: tuple[ArgumentError, ...]
    omitted: int = 0

    def to_json(self) -> dict[str, object]:
        """``{"errors": [{"pointer", "message"}...]}``, with ``errorsOmitted`` when cut."""
        out: dict[str, object] = {
            "errors": [{"pointer": e.pointer, "message": e.message} for e in self.shown]
        }
        if self.omitted:
            out["errorsOmitted"] = self.omitted
        return out

    def text(self) -> str:
        """One line: ``/depth: expected `integer`, got a string; the arguments: missing
        required property `limit``` (and ``; 3 more`` when cut)."""
        parts = [f"{e.pointer or ROOT}: {e.message}" for e in self.shown]
        if self.omitted:
            parts.append(f"{self.omitted} more")
        return "; ".join(parts)


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters marked ``…(+N)``."""
    return text if len(text) <= limit else f"{text[:limit]}…(+{len(text) - limit})"


def _field(error: object, name: str) -> object:
    if isinstance(error, Mapping):
        return error.get(name)
    return getattr(error, name, None)


def without_value(message: str) -> str:
    """``message`` with the value a bound's message names replaced by ``the value``."""
    return _SHOWN_VALUE.sub("the value", message, count=1)


def argument_errors(errors: Iterable[object]) -> ArgumentErrors:
    """The errors a model is shown of ``errors`` (``SchemaError`` values, or the mappings of a
    receipt's ``decision.errors``); an entry without a string pointer and message is skipped."""
    shown: list[ArgumentError] = []
    omitted = 0
    for error in errors:
        pointer, message = _field(error, "pointer"), _field(error, "message")
        if not isinstance(pointer, str) or not isinstance(message, str):
            continue
        if len(shown) == MAX_ERRORS:
            omitted += 1
            continue
        shown.append(
            ArgumentError(cut(pointer, MAX_POINTER), cut(without_value(message), MAX_MESSAGE))
        )
    return ArgumentErrors(tuple(shown), omitted)
