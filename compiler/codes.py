"""Every diagnostic code the compiler emits, with what it means. docs/diagnostics.md lists them.

Codes are stable: users' scripts match on them.
"""

from __future__ import annotations

from types import MappingProxyType

_CODES = {
    # reading the file
    "FILE_UNREADABLE": (
        "the file cannot be read (missing, not a regular file, over 4 MiB, not UTF-8)"
    ),
    "JSON_SYNTAX": "the file is not JSON; line and column say where",
    "DUPLICATE_KEY": "a key appears twice in one JSON object",
    "JSON_NUMBER_INVALID": "NaN, Infinity, a number too large for a double or an integer of "
    "more than 309 digits",
    "JSON_STRING_INVALID": "a string or key holding a lone surrogate (not Unicode text)",
    "JSON_TOO_DEEP": "JSON nested deeper than 64 levels",
    # the `.seif` language (docs/language.md): located by line and column
    "SEIF_SYNTAX": "a `.seif` file does not parse here; the message says what was expected",
    "SEIF_UNKNOWN_KEYWORD": "a word where a keyword belongs: the nearest keyword is named",
    "SEIF_UNCLOSED_BLOCK": "a `{` block that is not closed before the next item or the end",
    "SEIF_UNCLOSED_STRING": 'a string with no closing `"` on its line',
    "SEIF_COLON": "a JSON-style `:` after a keyword (`max_calls 3`, not `max_calls: 3`)",
    "SEIF_DUPLICATE_PROPERTY": "a schema declares one property twice",
    # the closed format
    "FORMAT_UNSUPPORTED": "`format` is not `seif.context-project.v1`",
    "UNKNOWN_KEY": "a key the format does not define",
    "MISSING_KEY": "a required key is absent",
    "WRONG_TYPE": "a value of the wrong JSON type",
    "INVALID_VALUE": "a value outside the allowed set (an enum field)",
    "OUT_OF_RANGE": "a number or a length outside its bounds",
    "INVALID_ID": "an id that does not match `^[a-z][a-z0-9-]{0,63}$`",
    "INVALID_NAME": "a function name that does not match `^[A-Za-z][A-Za-z0-9_-]{0,63}$`",
    "INVALID_VERSION": "not a semantic version `MAJOR.MINOR.PATCH[-pre]`",
    "DUPLICATE_ID": "an id used twice within its kind",
    "DUPLICATE_NAME": "a function name used by two tools",
    # references and rules
    "UNKNOWN_PROFILE": "an objective names a profile that is not declared",
    "UNKNOWN_TOOL": "a rule, fixture or test names a tool that is not declared",
    "UNKNOWN_OBJECTIVE": "a test names an objective that is not declared",
    "UNKNOWN_CONTEXT_MESSAGE": "a test names a context message its profile does not have",
    "UNKNOWN_REASON_CODE": "a test expects a reason code the engine does not have",
    "DUPLICATE_TOOL_RULE": "a profile has two rules for one tool",
    "EXCLUDED_TOOL_REQUIRED": "an `exclude` rule is marked `required`",
    "WRITE_WITHOUT_APPROVAL": "a write tool declares `approval: none`",
    # CEL
    "CEL_SYNTAX": "a CEL expression does not parse",
    "CEL_UNKNOWN_IDENTIFIER": "a CEL expression uses an identifier that does not exist there",
    "CEL_NOT_BOOLEAN": "a CEL expression does not yield a boolean",
    "CEL_TOO_LONG": "a CEL expression longer than 1,024 characters",
    "CEL_TOO_COMPLEX": "a CEL expression nests comprehension macros more than two deep, or parse"
    " levels beyond 200",
    "CEL_UNKNOWN_FUNCTION": "a CEL expression calls a function CEL does not define there, or with"
    " another number of arguments (`args.ref.split('/')`: string extensions are not standard CEL)",
    "CEL_UNKNOWN_FIELD": "a CEL expression reads a field that is not there: `args.<field>` not a"
    " parameter of the rule's tool (its schema, nested objects included), `context.<field>` not"
    " a coordinate or `objective`, `call.<field>` not `tool`, `callId` or `count`; the nearest"
    " name is suggested",
    "CEL_OPTIONAL_WITHOUT_HAS": "a warning: a condition reads an optional argument without"
    " `has()`, so every call without it is denied `CONDITION_ERROR`; guard the read with"
    " `has(args.x) && ...` (or `!has(args.x) || ...`)",
    # the schema subset
    "SCHEMA_NOT_OBJECT": "a schema that is not a JSON object",
    "SCHEMA_TYPE_MISSING": "a schema node without `type`",
    "SCHEMA_TYPE_UNION": "`type` given as a list (unions are not supported)",
    "SCHEMA_TYPE_INVALID": "`type` is not one of the seven JSON types",
    "SCHEMA_PARAMETERS_NOT_OBJECT": "`parameters` whose `type` is not `object`",
    "SCHEMA_KEYWORD_NOT_APPLICABLE": "a supported keyword on a node of another type",
    "SCHEMA_KEYWORD_INVALID": "a supported keyword with a value of the wrong form",
    "SCHEMA_BOUND_INVALID": "a length, item or numeric bound of the wrong form",
    "SCHEMA_BOUNDS_INVERTED": "a minimum greater than its maximum",
    "SCHEMA_REQUIRED_UNDECLARED": "`required` names a property not in `properties`",
    "SCHEMA_ENUM_EMPTY": "`enum` with no values",
    "SCHEMA_ENUM_DUPLICATE": "`enum` listing one value twice",
    "SCHEMA_VALUE_TYPE": "an `enum` or `const` value not valid for the node's type",
    "SCHEMA_TOO_DEEP": "a schema nested more than 8 levels",
    "SCHEMA_TOO_MANY_PROPERTIES": "an object schema with more than 32 properties",
    "SCHEMA_UNKNOWN_KEYWORD": "a keyword outside the subset and not listed below",
    "SCHEMA_UNSUPPORTED_REF": "`$ref`",
    "SCHEMA_UNSUPPORTED_DEFS": "`$defs`",
    "SCHEMA_UNSUPPORTED_DEFINITIONS": "`definitions`",
    "SCHEMA_UNSUPPORTED_ANYOF": "`anyOf`",
    "SCHEMA_UNSUPPORTED_ONEOF": "`oneOf`",
    "SCHEMA_UNSUPPORTED_ALLOF": "`allOf`",
    "SCHEMA_UNSUPPORTED_NOT": "`not`",
    "SCHEMA_UNSUPPORTED_IF": "`if`",
    "SCHEMA_UNSUPPORTED_THEN": "`then`",
    "SCHEMA_UNSUPPORTED_ELSE": "`else`",
    "SCHEMA_UNSUPPORTED_PATTERN": "`pattern`",
    "SCHEMA_UNSUPPORTED_PATTERNPROPERTIES": "`patternProperties`",
    "SCHEMA_UNSUPPORTED_FORMAT": "`format`",
    "SCHEMA_UNSUPPORTED_ADDITIONALPROPERTIES_SCHEMA": "`additionalProperties` as a schema",
    "SCHEMA_UNSUPPORTED_EXCLUSIVEMINIMUM": "`exclusiveMinimum`",
    "SCHEMA_UNSUPPORTED_EXCLUSIVEMAXIMUM": "`exclusiveMaximum`",
    "SCHEMA_UNSUPPORTED_MULTIPLEOF": "`multipleOf`",
    "SCHEMA_UNSUPPORTED_UNIQUEITEMS": "`uniqueItems`",
    "SCHEMA_UNSUPPORTED_DEFAULT": "`default`",
    "SCHEMA_UNSUPPORTED_SCHEMA": "`$schema`",
    "SCHEMA_UNSUPPORTED_ID": "`$id`",
    # the catalogue
    "CATALOGUE_TOO_MANY_TOOLS": "more than 32 tools",
    "CATALOGUE_TOO_LARGE": "the canonical JSON of `tools` exceeds 65,536 bytes",
    # builds
    "BUILD_UNREADABLE": "a build directory without a readable `build.cbor` or `manifest.json`",
    "BUILD_DIGEST_MISMATCH": "`build.cbor` does not hash to the manifest's digest",
    "BUILD_MANIFEST_MISMATCH": "the manifest says something `build.cbor` does not",
    "BUILD_INVALID": "`build.cbor` does not decode to a build of a known format",
    "RUNTIME_UNSUPPORTED": "the build requires a runtime contract this version does not have",
    "TESTS_FAILED": "the project's tests fail, so no build is written (or a guard `seif tool "
    "protect` derived fails, so nothing is written)",
    # guided tool setup (docs/authoring.md)
    "TOOL_EXISTS": "`seif tool new --id` names a tool the project already has",
    "TEMPLATE_UNKNOWN": "a tool template other than record-lookup, knowledge-search, "
    "ticket-creation, custom",
    "FIELD_INVALID": "a `--field` that is not `name:type[:required]`, or names an argument twice",
    "FIELD_TYPE_UNKNOWN": "a `--field` type that is not string, integer, number, boolean or a "
    "list of one (`string[]`)",
    "ARGUMENTS_TWICE": "a new tool given both `--field` and `--schema`",
    "CLAIMS_INVALID": "`seif tool check-call --claims` (or `seif eval --claims`) is not a JSON "
    "object of at most 16 claims, each a string, a number, a boolean or a list of strings",
    "ARGUMENTS_NOT_JSON": "`seif tool check-call --arguments` (or `seif eval --arguments`) is "
    "not JSON",
    "SCENARIOS_TOO_MANY": "`seif tool protect`: an objective's rules compare the coordinates "
    "with so many values that their combinations exceed 64: nothing is written",
    "FILE_CHANGED": "the project file changed between reading and writing: nothing was written",
    "FILE_UNWRITABLE": "the project file cannot be written (permissions, a read-only disk)",
    "FILE_EXISTS": "`seif init`: the project file to write exists: nothing was written",
    "NO_TEST_MATCHES": "`seif test --run PATTERN`: no test id matches the glob (exit 2)",
    "STARTER_LANG_UNKNOWN": "`seif starter --lang` other than python or node",
    "OUT_REFUSED": "an output directory that exists and is not empty: nothing is overwritten",
    "ENVIRONMENT_INVALID": "an environment name that is not an id (`^[a-z][a-z0-9-]{0,63}$`)",
    "BINDINGS_UNREADABLE": "a bindings file that cannot be read",
    "BINDINGS_INVALID": "a bindings file that is not one (its shape is checked)",
    "BINDINGS_ENVIRONMENT_MISMATCH": "`seif release --bindings` names another environment's file",
    "BINDINGS_PATH_REFUSED": "a bindings path that is the project file or `contracts.json`",
    "BINDINGS_WRITE_FAILED": "the bindings file could not be written (the build is registered)",
    "BINDINGS_CHANGED": "the bindings file changed while the release ran: it was not overwritten",
}

CODES = MappingProxyType(_CODES)

UNSUPPORTED_SCHEMA_KEYWORDS = MappingProxyType(
    {
        "$ref": "SCHEMA_UNSUPPORTED_REF",
        "$defs": "SCHEMA_UNSUPPORTED_DEFS",
        "definitions": "SCHEMA_UNSUPPORTED_DEFINITIONS",
        "anyOf": "SCHEMA_UNSUPPORTED_ANYOF",
        "oneOf": "SCHEMA_UNSUPPORTED_ONEOF",
        "allOf": "SCHEMA_UNSUPPORTED_ALLOF",
        "not": "SCHEMA_UNSUPPORTED_NOT",
        "if": "SCHEMA_UNSUPPORTED_IF",
        "then": "SCHEMA_UNSUPPORTED_THEN",
        "else": "SCHEMA_UNSUPPORTED_ELSE",
        "pattern": "SCHEMA_UNSUPPORTED_PATTERN",
        "patternProperties": "SCHEMA_UNSUPPORTED_PATTERNPROPERTIES",
        "format": "SCHEMA_UNSUPPORTED_FORMAT",
        "exclusiveMinimum": "SCHEMA_UNSUPPORTED_EXCLUSIVEMINIMUM",
        "exclusiveMaximum": "SCHEMA_UNSUPPORTED_EXCLUSIVEMAXIMUM",
        "multipleOf": "SCHEMA_UNSUPPORTED_MULTIPLEOF",
        "uniqueItems": "SCHEMA_UNSUPPORTED_UNIQUEITEMS",
        "default": "SCHEMA_UNSUPPORTED_DEFAULT",
        "$schema": "SCHEMA_UNSUPPORTED_SCHEMA",
        "$id": "SCHEMA_UNSUPPORTED_ID",
    }
)
"""Keywords the subset refuses by name (additionalProperties-as-schema is checked apart)."""
