"""Checking input: the one exception, the field rules and JSON files.

The lowest layer of distsim; it imports nothing else from the package.
"""

from distsim.validation.errors import InputError, MissingFileError
from distsim.validation.fields import (
    Boolean,
    InstanceOf,
    Integer,
    Number,
    OneOf,
    Optional,
    Rule,
    Sequence,
    StringMap,
    Text,
    check_fields,
    check_keys,
    checked,
    default_of,
    rule_of,
)
from distsim.validation.jsonfile import (
    MAX_JSON_DEPTH,
    MAX_PATH_CHARS,
    checked_path,
    output_path,
    parse_json,
    read_json,
    write_json,
)
from distsim.validation.network import parse_host_port

__all__ = [
    "Boolean",
    "InputError",
    "MAX_JSON_DEPTH",
    "MAX_PATH_CHARS",
    "InstanceOf",
    "Integer",
    "MissingFileError",
    "Number",
    "OneOf",
    "Optional",
    "Rule",
    "Sequence",
    "StringMap",
    "Text",
    "check_fields",
    "check_keys",
    "checked_path",
    "checked",
    "output_path",
    "parse_host_port",
    "parse_json",
    "read_json",
    "default_of",
    "rule_of",
    "write_json",
]
