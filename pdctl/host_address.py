"""What may name a host: a host name or an IP address (`address`, `internal_address`), and an SSH jump chain
(`proxy_jump`, as `ssh -J`: [user@]host[:port][,next-hop...]). Pure: the inventory refuses anything else when it is
loaded, so a typo is exit 2 naming the field, not a resolver or connect error (exit 3) at the first command. And
which resolved addresses are loopback (`not_loopback`): judged on addresses, never on how a name is spelled.
"""

from __future__ import annotations

import ipaddress
import re

# a DNS label, `_` allowed (ssh_config aliases and some internal zones use it); never a leading `-` (an ssh option)
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def address_problem(text: str) -> str | None:
    """Why `text` is neither a host name nor an IP address, or None when it is one."""
    if not text:
        return "empty; give a host name or an IP address"
    try:
        ipaddress.ip_address(text)
        return None
    except ValueError:
        pass
    if text.startswith("[") and text.endswith("]"):
        return f"{text!r}: write the IPv6 address without brackets"
    labels = text[:-1].split(".") if text.endswith(".") else text.split(".")
    if len(text) <= 253 and all(_LABEL.fullmatch(label) for label in labels) and not labels[-1].isdigit():
        return None
    host, sep, port = text.rpartition(":")
    if sep and port.isdigit() and host and ":" not in host:
        return f"{text!r} holds a port; give the host alone"
    return f"{text!r} is not a host name or an IP address"


def parse_hop(hop: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (`[v6]:port` or a bare IPv6 address accepted) -> (user, host, port). Raises ValueError
    saying what is wrong with it."""
    user, at, hostport = hop.rpartition("@")
    if at and not user:
        raise ValueError(f"hop {hop!r}: no user before '@'")
    port_text = None
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        if tail and not tail.startswith(":"):
            raise ValueError(f"hop {hop!r}: expected [ADDRESS]:PORT")
        port_text = tail[1:] if tail else None
    elif hostport.count(":") == 1:
        host, _, port_text = hostport.partition(":")
    else:
        host = hostport
    if not host:
        raise ValueError(f"hop {hop!r}: no host")
    problem = address_problem(host)
    if problem:
        raise ValueError(f"hop {hop!r}: host {problem}")
    if port_text is None:
        return user or None, host, None
    if not (port_text.isdigit() and 1 <= int(port_text) <= 65535):
        raise ValueError(f"hop {hop!r}: port {port_text!r} is not 1-65535")
    return user or None, host, int(port_text)


def jump_problem(spec: str) -> str | None:
    """Why `spec` is not a jump chain `hop[,hop...]` (each hop `[user@]host[:port]`), or None when it is one."""
    for hop in spec.split(","):
        if not hop:
            return f"{spec!r}: an empty hop (expected [user@]host[:port][,next-hop...])"
        try:
            parse_hop(hop)
        except ValueError as e:
            return str(e)
    return None


def not_loopback(addresses: list[str]) -> list[str]:
    """The addresses (IP literals, as a resolver gives them) that are not loopback: not in 127.0.0.0/8, not ::1, not
    an IPv4-mapped 127.x. A text that is no IP address counts as not loopback. Pure: the resolving is the caller's."""
    out = []
    for text in addresses:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            out.append(text)
            continue
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if not (ip.is_loopback or (mapped is not None and mapped.is_loopback)):
            out.append(text)
    return out
