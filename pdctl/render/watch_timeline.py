"""`pdctl watch --timeline FILE|-`: the verdict timeline as JSON lines (docs/watch.md), appended to FILE (a regular
file or a FIFO) or written to stdout, each batch written when it happens so a reader (`tail -f`, a log shipper) sees
each change at once. Secret values are masked as everywhere else.

An output that fails does not end the watch (pdctl.checks.watch_outputs): a batch that cannot be written raises
OutputFailed, and what was not written is kept (up to BACKLOG_BYTES; whole lines beyond it are dropped and counted)
for the next batch, so a disk freed or a FIFO's new reader gets the lines it missed, each line whole. The file is
opened safely (pdctl.safe_write: no link followed, 0600 when created) and followed: when the path names another file
than the one open (logrotate moved it away) or `reopen()` was asked (its SIGHUP), the next batch goes to the file the
path names now. A FIFO never blocks the watch: no reader yet or a reader that does not read is a failing output.
Stdout's reader gone for good (`| head -1`) raises ReaderGone."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from pdctl.checks.watch_events import TimelineEvent
from pdctl.checks.watch_outputs import OutputFailed, ReaderGone
from pdctl.errors import UsageError

BACKLOG_BYTES = 1 << 20  # about 3000 lines: minutes of a busy watch's changes, hours of a quiet one's


class TimelineRefused(UsageError):
    """--timeline names a path pdctl will not write (pdctl.safe_write), or cannot."""

    def __init__(self, message: str):
        super().__init__(f"--{message}", hint="choose a writable file (a new one is made 0600), or - for stdout")


class TimelineWriter:
    def __init__(self, target: str):
        """`target`: a file path (appended to) or "-" (stdout). Raises UsageError naming --timeline when the file
        cannot be opened or is refused (pdctl.safe_write); a FIFO nobody reads yet is no error (its lines wait)."""
        from pdctl.safe_write import NoReader

        self.target = target
        self.name = "timeline stdout" if target == "-" else f"timeline {target}"
        self.dropped_lines = 0  # whole lines not kept: the backlog was full (counted over the whole watch)
        self._path = None if target == "-" else Path(target)
        self._fd: int | None = None
        self._backlog = bytearray()
        self._reopen = False
        if self._path is not None:
            try:
                self._fd = self._open()
            except NoReader:
                pass  # opened at a later batch, once a reader is there

    def reopen(self) -> None:
        """Open the path anew before the next batch (a logrotate's SIGHUP). Safe in a signal handler: it only
        sets a flag."""
        self._reopen = True

    def __call__(self, events: Sequence[TimelineEvent]) -> None:
        """Write `events` (after what earlier batches could not). Raises OutputFailed saying why some could not
        be written now (they are kept for the next batch), ReaderGone when stdout's reader went away."""
        from pdctl.secrets import mask_text

        full = False
        for event in events:  # each text value masked, so the line stays valid JSON
            masked = {k: mask_text(v) if isinstance(v, str) else v for k, v in event.to_line().items()}
            line = (json.dumps(masked, default=str) + "\n").encode()
            full = full or len(self._backlog) + len(line) > BACKLOG_BYTES  # the rest of the batch too: in order
            if full:
                self.dropped_lines += 1
            else:
                self._backlog += line
        if self._path is None:
            self._write_stdout()
        else:
            self._write_file()

    def close(self) -> None:
        """A last try at what is kept, then the file closed. Never raises."""
        if self._path is None:
            return
        try:
            if self._backlog:
                self._write_file()
        except (OutputFailed, OSError):
            pass
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- a file or a FIFO ----------------------------------------------------------------------------------------
    def _open(self) -> int:
        from pdctl.safe_write import open_append

        assert self._path is not None
        return open_append(self._path, TimelineRefused, "timeline", fifo=True)

    def _follow_path(self) -> None:
        """Close the fd when it no longer is the file the path names (moved away, removed, replaced) or a reopen
        was asked: the next open makes or opens the file there now."""
        assert self._path is not None
        if self._fd is None:
            return
        moved = self._reopen
        if not moved:
            try:
                now, open_ = os.lstat(self._path), os.fstat(self._fd)
                moved = (now.st_dev, now.st_ino) != (open_.st_dev, open_.st_ino)
            except OSError:
                moved = True  # removed: a new one is made
        if moved:
            os.close(self._fd)
            self._fd = None
        self._reopen = False

    def _write_file(self) -> None:
        from pdctl.safe_write import NoReader

        assert self._path is not None
        self._follow_path()
        if self._fd is None:
            try:
                self._fd = self._open()
            except NoReader:
                raise OutputFailed(self._kept(f"{self._path}: a FIFO nobody reads")) from None
            except UsageError as e:  # the path turned into something refused (a link, a device)
                raise OutputFailed(self._kept(e.message.removeprefix("--"))) from None
        while self._backlog:
            try:
                n = os.write(self._fd, self._backlog)
            except BlockingIOError:  # a FIFO whose reader does not read: never wait for it
                raise OutputFailed(self._kept(f"{self._path}: the FIFO's reader does not read")) from None
            except BrokenPipeError:  # the FIFO's reader left; a new one gets what is kept
                raise OutputFailed(self._kept(f"{self._path}: the FIFO's reader went away")) from None
            except OSError as e:  # ENOSPC, EDQUOT, EFBIG, EIO
                raise OutputFailed(self._kept(f"{self._path}: {e.strerror or e}")) from None
            del self._backlog[:n]

    def _kept(self, why: str) -> str:
        # the same words for as long as the cause lasts: the watch says a failure once, not at every batch
        return f"{why} (its lines are kept for later, up to {BACKLOG_BYTES >> 20} MiB)"

    # -- stdout ----------------------------------------------------------------------------------------------------
    def _write_stdout(self) -> None:
        from pdctl.broken_pipe import drop_rest_of_output

        try:
            fd = sys.stdout.fileno()
        except (AttributeError, OSError, ValueError):  # a captured stdout (a test's): written as text
            sys.stdout.write(self._backlog.decode())
            sys.stdout.flush()
            self._backlog.clear()
            return
        try:
            sys.stdout.flush()  # anything printed before goes first
            while self._backlog:
                del self._backlog[: os.write(fd, self._backlog)]
        except OSError as e:
            if e.errno == errno.EPIPE and drop_rest_of_output():
                self._backlog.clear()
                raise ReaderGone() from None
            raise OutputFailed(self._kept(f"stdout: {e.strerror or e}")) from None
