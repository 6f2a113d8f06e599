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
    rule_of,
)
from distsim.validation.jsonfile import read_json, write_json
from distsim.validation.network import parse_host_port

__all__ = [
    "Boolean",
    "InputError",
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
    "checked",
    "parse_host_port",
    "read_json",
    "rule_of",
    "write_json",
]
