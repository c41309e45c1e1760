"""A TCP relay that adds latency: every byte is held `--delay-ms` in each direction, for kernels without tc netem.

bench/bench_keeper.py runs it inside its network namespace in front of the sshd when `tc qdisc ... netem` is not
available (a kernel built without sch_netem, as on this project's machines). What it models and what not:
- each chunk read from one side is written to the other `delay` after it arrived, in order, without waiting for the
  chunks before it to be answered: a link with a one-way delay, so a request and its answer pay one round trip;
- the TCP handshake happens with the relay and is not delayed (accept() cannot be); the relay stands in for it:
  on a real link the server accepts when the handshake's ACK arrives, 3 x delay after the client's connect()
  began (SYN, SYN-ACK, ACK), and the client's first bytes arrive then too; so the relay dials the server 3 x delay
  after it accepted, and hands it the client's bytes from then on (the server's start-up, an sshd's fork and
  exec, is then on the path as it would be);
- no bandwidth limit, no loss, and TCP's own ACKs are not delayed (only data): the bytes pdctl and ssh exchange
  here are small messages, each waited for, so the round trips are what counts.

Run: python3 bench/delay_relay.py --listen 10.213.0.2:2222 --upstream 127.0.0.1:2223 --delay-ms 10
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import signal


class DelayedWriter:
    """Writes chunks to its writer each `delay` seconds after it was handed them (and not before `not_before`,
    nor before a writer is attached), in the order handed; None ends the direction (write_eof)."""

    def __init__(self, writer: asyncio.StreamWriter | None, delay: float, not_before: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.writer = writer
        self.delay = delay
        self.last_due = not_before
        self.queue: collections.deque[tuple[float, bytes | None]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None

    def attach(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.flush()

    def push(self, data: bytes | None) -> None:
        due = max(self.loop.time() + self.delay, self.last_due)  # never before an earlier chunk: order kept
        self.last_due = due
        self.queue.append((due, data))
        if self.timer is None:
            self.timer = self.loop.call_at(due, self.flush)

    def flush(self) -> None:
        self.timer = None
        if self.writer is None:
            return  # attach() flushes
        now = self.loop.time()
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            try:
                if self.writer.is_closing():
                    raise ConnectionResetError
                if data is None:
                    if self.writer.can_write_eof():
                        self.writer.write_eof()
                else:
                    self.writer.write(data)
            except OSError:  # the other side is gone: nothing left to deliver
                self.queue.clear()
                return
        if self.queue:
            self.timer = self.loop.call_at(self.queue[0][0], self.flush)

    async def drained(self) -> None:
        """Wait until every chunk handed over was written."""
        while self.queue:
            await asyncio.sleep(self.delay / 2 or 0.001)


async def pump(reader: asyncio.StreamReader, out: DelayedWriter) -> None:
    try:
        while data := await reader.read(65536):
            out.push(data)
    except OSError:
        pass
    out.push(None)
    await out.drained()


def relay_handler(upstream: tuple[str, int], delay: float):
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        handshake_done = loop.time() + 3 * delay  # when the server would accept: see the module's docstring
        to_server = DelayedWriter(None, delay, handshake_done)
        from_client = asyncio.create_task(pump(client_r, to_server))
        await asyncio.sleep(3 * delay)
        try:
            server_r, server_w = await asyncio.open_connection(*upstream)
        except OSError:
            from_client.cancel()
            client_w.close()
            return
        to_server.attach(server_w)
        try:
            await asyncio.gather(from_client, pump(server_r, DelayedWriter(client_w, delay, loop.time())))
        finally:
            for w in (client_w, server_w):
                w.close()

    return handle


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def serve(listen: tuple[str, int], upstream: tuple[str, int], delay: float) -> None:
    server = await asyncio.start_server(relay_handler(upstream, delay), *listen)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", type=address, required=True, help="address:port to accept on")
    ap.add_argument("--upstream", type=address, required=True, help="address:port to relay to")
    ap.add_argument("--delay-ms", type=float, required=True, help="one-way delay added in each direction")
    args = ap.parse_args()
    asyncio.run(serve(args.listen, args.upstream, args.delay_ms / 1000))


if __name__ == "__main__":
    main()
