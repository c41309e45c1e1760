"""Where the watch's exporter may listen is judged on what the name resolves to, never on its spelling (issue 28:
S3, `--listen 127.evil.example:P` resolving to 0.0.0.0 listened on every interface). The judge and the bind choice
with an injected resolver, and the real resolver on names and literals this machine answers the same everywhere."""

from __future__ import annotations

import pytest

from pdctl.errors import UsageError
from pdctl.host_address import not_loopback
from pdctl.ops.watch_exporter import exporter_bind


def test_only_loopback_addresses_pass():
    assert not_loopback(["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"]) == []
    assert not_loopback(["0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1%lo", "no-address"]) == [
        "0.0.0.0",
        "::",
        "10.0.0.1",
        "::ffff:10.0.0.1",
        "fe80::1%lo",
        "no-address",
    ]


def _resolver(table):
    def resolve(host, port):
        if host not in table:
            raise OSError(-2, "Name or service not known")
        return table[host]

    return resolve


TABLE = {
    "127.evil.example": ["0.0.0.0"],  # the red team's name
    "mixed.example": ["127.0.0.1", "192.0.2.7"],  # one loopback answer is not enough
    "local.example": ["::1", "127.0.0.1"],
}


def test_a_name_that_resolves_to_0_0_0_0_is_refused_naming_the_option_and_the_address():
    resolve = _resolver(TABLE)
    with pytest.raises(UsageError) as e:
        exporter_bind(
            "127.evil.example", 9464, listen_any=False, said="--listen 127.evil.example:9464", resolve=resolve
        )
    assert e.value.message == (
        "--listen 127.evil.example:9464: 127.evil.example resolves to 0.0.0.0, not a loopback address; "
        "the exporter has no authentication"
    )
    assert "--listen-any" in (e.value.hint or "")
    said = "watch.listen mixed.example:9464 (in inv.yaml)"  # the inventory's field: named as such
    with pytest.raises(UsageError, match=r"^watch\.listen mixed\.example:9464 \(in inv\.yaml\): .*192\.0\.2\.7"):
        exporter_bind("mixed.example", 9464, listen_any=False, said=said, resolve=resolve)


def test_what_is_bound_is_the_address_checked_and_listen_any_allows_the_rest():
    resolve = _resolver(TABLE)
    assert exporter_bind("local.example", 1, listen_any=False, said="--listen x", resolve=resolve) == "::1"
    assert exporter_bind("127.evil.example", 1, listen_any=True, said="--listen x", resolve=resolve) == "0.0.0.0"
    with pytest.raises(UsageError, match=r"^--listen nowhere:1: 'nowhere' does not resolve"):
        exporter_bind("nowhere", 1, listen_any=True, said="--listen nowhere:1", resolve=resolve)


def test_the_real_resolver_on_localhost_and_literals():
    from pdctl.cli.watch import exporter_address

    assert exporter_address("localhost:9464", False) in {("127.0.0.1", 9464), ("::1", 9464)}
    assert exporter_address("127.0.0.1:9464", False) == ("127.0.0.1", 9464)
    with pytest.raises(UsageError, match=r"^--listen 0\.0\.0\.0:9464: not a loopback address"):
        exporter_address("0.0.0.0:9464", False)
    with pytest.raises(UsageError, match=r"^watch\.listen \[::\]:9: not a loopback address"):
        exporter_address("[::]:9", False, said="watch.listen [::]:9")
    assert exporter_address("0.0.0.0:9464", True) == ("0.0.0.0", 9464)
