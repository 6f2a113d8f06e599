"""Network addresses: ``host:port`` parsed strictly.

A host is a DNS name (RFC 1123 labels: letters, digits and inner hyphens,
1-63 characters each, at most 253 in all), an IPv4 address, or an IPv6
address in brackets (``[::1]:2222``). A port is 1-65535 written in plain
decimal digits (so ``1_000`` and ``+80`` are not ports, though Python's
``int`` would read them). Hosts compare case-insensitively.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from distsim.validation.errors import InputError

# fullmatch, never match with "$": "$" also matches before a trailing newline,
# so "localhost:2222\n" would pass.
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_DIGITS = re.compile(r"[0-9]{1,5}")

ALLOWED = "'host:port' with a DNS name, an IPv4 address or a bracketed IPv6 address, and a port 1..65535"


def _host_ok(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            return ipaddress.ip_address(host[1:-1]).version == 6
        except ValueError:
            return False
    if len(host) > 253 or not host:
        return False
    if re.fullmatch(r"[0-9.]+", host):  # all digits and dots: must be a real IPv4 address
        try:
            ipaddress.IPv4Address(host)
            return True
        except ValueError:
            return False
    return all(_LABEL.fullmatch(label) for label in host.rstrip(".").split("."))


def parse_host_port(path: str, address: Any) -> tuple[str, int]:
    """``(host, port)`` of ``address``, the host lower-cased; an
    :class:`InputError` at ``path`` for anything else."""
    if not isinstance(address, str) or ":" not in address:
        raise InputError(path, address, ALLOWED)
    host, _, port_text = address.rpartition(":")
    if not _host_ok(host) or not _DIGITS.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
        raise InputError(path, address, ALLOWED)
    return host.lower(), int(port_text)
