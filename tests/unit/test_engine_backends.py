"""The engine's KV transfer backends as an extension point (engine/disaggregation/backends.py): the registry is the
one list the launch flag offers, each entry's module builds a backend from the context, and one that cannot run
here is an OSError (launch_server: `cannot start: ...`, exit 1), never a traceback."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect

import pytest

from engine.disaggregation import backends
from engine.disaggregation.transfer_backend import BackendContext
from engine.server_args import build_parser, parse_args


def _ctx(agent_name: str = "decode-x") -> BackendContext:
    from engine.disaggregation.kv_pool import KVPool

    return BackendContext(KVPool(2, 16, 4, 8), agent_name, "127.0.0.1", "127.0.0.1", None, None)


def test_the_flags_choices_are_the_registry():
    assert backends.names() == ["mooncake", "nixl", "fake"]
    assert "--disaggregation-transfer-backend {mooncake,nixl,fake}" in build_parser().format_help()
    for name in backends.names():
        assert parse_args(["--disaggregation-mode", "decode", "--disaggregation-transfer-backend", name])
    assert parse_args([]).disaggregation_transfer_backend == backends.DEFAULT == "mooncake"


@pytest.mark.parametrize("value", ["ascend", "mori", "mooncake_tcp"])
def test_sglangs_other_backends_are_refused_in_any_mode(value, capsys):
    for mode in ("null", "prefill"):
        with pytest.raises(SystemExit) as e:
            parse_args(["--disaggregation-mode", mode, "--disaggregation-transfer-backend", value])
        assert e.value.code == 2
    assert f"invalid choice: '{value}'" in capsys.readouterr().err


@pytest.mark.parametrize("name", backends.names())
def test_every_backend_module_has_a_factory_and_reads_only_the_context(name):
    kind = backends.kind(name)
    fields = {f.name for f in dataclasses.fields(BackendContext)}
    assert set(kind.reads) <= fields and kind.summary
    if kind.package is not None and importlib.util.find_spec(kind.package) is None:
        pytest.skip(f"{kind.package} is not installed here")
    create = importlib.import_module(kind.module).create
    assert list(inspect.signature(create).parameters) == ["ctx"]


def test_the_fake_backend_moves_nothing_and_the_decode_recomputes():
    kind = backends.kind("fake")
    ctx = _ctx()
    pool = ctx.pool
    b = kind.create(ctx)
    assert not kind.moves_kv and all(backends.kind(n).moves_kv for n in ("nixl", "mooncake"))
    assert b.agent_name == "decode-x" and b.add_peer(b.metadata()) and b.poll_notifs() == []
    assert b.write("peer", [0], pool.base_addr, [1], pool.page_bytes) is True


def test_a_backend_that_cannot_load_is_an_oserror_naming_it():
    kind = dataclasses.replace(backends.kind("fake"), name="gone", module="engine.disaggregation.no_such_backend")
    with pytest.raises(OSError, match="the gone transfer backend is unavailable"):
        kind.create(_ctx())


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="registered twice"):
        backends.register(backends.kind("nixl"))
