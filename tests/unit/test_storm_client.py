"""The storm's streaming client (pdctl.ops.storm_client.stream_once) against a real local HTTP server on loopback: an
aborted request closes its connection so the server sees the client go (the abort storm depends on it), a stream the
server ends is `finished`, and a refusal or an error event is said in `error`."""

from __future__ import annotations

import asyncio

from pdctl.checks.storm import RequestOutcome
from pdctl.ops.storm_client import run_requests, stream_once

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


class StreamServer:
    """Answers every POST with `head`, then `events` (one every 20 ms), then, when `forever`, a chunk every 20 ms
    until the client goes; `gone` is set when a write finds the client gone."""

    def __init__(self, head: bytes = OK_HEAD, events: tuple[bytes, ...] = (), forever: bool = False):
        self.head, self.events, self.forever = head, events, forever
        self.gone = asyncio.Event()
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        try:
            writer.write(self.head)
            for e in self.events:
                await asyncio.sleep(0.02)
                writer.write(e)
                await writer.drain()
            while self.forever:
                await asyncio.sleep(0.02)
                writer.write(b'data: {"text": "x"}\n\n')
                await writer.drain()
        except (ConnectionError, OSError):
            self.gone.set()
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc) -> None:
        self.server.close()


def run(coro):
    return asyncio.run(coro)


def test_an_aborted_request_closes_its_connection_and_the_server_sees_the_client_go():
    async def go():
        srv = StreamServer(forever=True)
        async with srv as base:
            out = await stream_once(
                base, "/generate", b"{}", abort_after_s=0.3, timeout_s=30, out=RequestOutcome(0, 0.0, 0.3)
            )
            await asyncio.wait_for(srv.gone.wait(), timeout=10)  # bounded: it must come, not at a set time
        return out

    out = run(go())
    assert out.status_code == 200 and out.first_token_s is not None
    assert out.aborted_s is not None and out.finished_s is None and out.error is None


def test_a_stream_the_server_ends_is_finished_not_aborted():
    async def go():
        async with StreamServer(events=(b'data: {"text": "a"}\n\n', b"data: [DONE]\n\n")) as base:
            return await stream_once(
                base, "/generate", b"{}", abort_after_s=20, timeout_s=30, out=RequestOutcome(0, 0.0, 20)
            )

    out = run(go())
    assert out.finished_s is not None and out.aborted_s is None and out.error is None
    assert out.first_token_s is not None and out.first_token_s <= out.finished_s


def test_a_refusal_and_an_error_event_are_errors():
    async def go(head, events):
        async with StreamServer(head=head, events=events) as base:
            return await stream_once(
                base, "/generate", b"{}", abort_after_s=None, timeout_s=20, out=RequestOutcome(0, 0.0, -1.0)
            )

    refused = run(go(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", ()))
    assert refused.status_code == 503 and refused.error == "HTTP 503"
    failed = run(go(OK_HEAD, (b'data: {"error": {"message": "no decode"}}\n\n',)))
    assert failed.error is not None and failed.error.startswith("stream error:") and "no decode" in failed.error
    assert failed.first_token_s is None


def test_nothing_listening_is_an_error_not_a_raise():
    async def go():
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        srv.close()
        await srv.wait_closed()
        return await stream_once(
            f"http://127.0.0.1:{port}", "/generate", b"{}", abort_after_s=5, timeout_s=5, out=RequestOutcome(0, 0, 5)
        )

    out = run(go())
    assert out.error is not None and "ConnectError" in out.error and out.aborted_s is None


def test_run_requests_sends_each_planned_request_on_a_connection_of_its_own():
    async def go():
        srv = StreamServer(events=(b'data: {"text": "a"}\n\n',))
        async with srv as base:
            outs = await run_requests(
                base, "/generate", [(0.0, None), (0.05, None), (0.1, 5.0)], lambda k: b"{}", timeout_s=20
            )
        return srv, outs

    srv, outs = run(go())
    assert srv.requests == 3
    assert [o.index for o in outs] == [0, 1, 2] and all(o.finished_s is not None and o.error is None for o in outs)
