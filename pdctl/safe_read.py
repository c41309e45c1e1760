"""Reading a file an operator names (inventory, playbook, ssh_config, known_hosts, SSH key, audit log) without
hanging or crashing: only a regular file is opened (a FIFO blocks, /dev/zero never ends, a directory is no text),
within a size cap, as UTF-8; every refusal is one line naming the file, raised as the caller's UsageError class."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pdctl.errors import UsageError

MAX_INPUT_BYTES = 1 << 20  # an inventory or playbook is a few KiB; anything bigger is the wrong file


def read_input_text(
    path: str | os.PathLike, error: type[UsageError], what: str, *, limit: int = MAX_INPUT_BYTES
) -> str:
    """The UTF-8 text of the regular file at `path`. Refuses, without opening it for reading, a FIFO (opening one
    blocks), a device (/dev/zero never ends), a directory or a socket; refuses a file over `limit` bytes or not
    UTF-8. Raises `error` (exit 2) naming the file."""
    if not os.fspath(path):  # Path("") is ".", which would be refused as "a directory"
        raise error(f"the {what} path is empty: give the {what} file")
    p = Path(path)
    fd = open_regular(p, error, what, limit=limit)
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise error(f"{p}: cannot read {what}: {e.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise error(_too_big(p, what, limit))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(
            f"{p}: not UTF-8 text (byte 0x{data[e.start]:02x} at byte offset {e.start}); save the {what} as UTF-8"
        ) from None


def check_input_file(
    path: str | os.PathLike, error: type[UsageError], what: str, *, limit: int | None = MAX_INPUT_BYTES
) -> None:
    """Refuse (raise `error`, exit 2, naming the file) what read_input_text would refuse by stat alone: missing,
    not a regular file, over `limit` bytes (None: no cap). For a file another library opens itself."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise error(f"{p}: cannot read {what}: {e.strerror}") from None
    _check_regular(p, st, error, what, limit)


def open_regular(
    path: str | os.PathLike, error: type[UsageError], what: str, *, limit: int | None = MAX_INPUT_BYTES
) -> int:
    """A read-only fd on the regular file at `path` (the caller closes it), checked before and after opening;
    `limit` None means no size cap (a log that is streamed). Raises `error` naming the file."""
    p = Path(path)
    check_input_file(p, error, what, limit=limit)
    try:
        # O_NONBLOCK: should the path turn into a FIFO after the stat, open still returns at once
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise error(f"{p}: cannot read {what}: {e.strerror}") from None
    try:
        _check_regular(p, os.fstat(fd), error, what, limit)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(p: Path, st: os.stat_result, error: type[UsageError], what: str, limit: int | None) -> None:
    mode = st.st_mode
    if stat.S_ISREG(mode):
        if limit is not None and st.st_size > limit:
            raise error(_too_big(p, what, limit))
        return
    raise error(f"{p}: is {file_kind(mode, 'not a regular file')}, not a regular file; give the {what} file itself")


def file_kind(mode: int, other: str = "something else") -> str:
    """What a file that is not a regular one is, in words ("a directory", "a FIFO (named pipe)", ...). Pure."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return other


def _too_big(p: Path, what: str, limit: int) -> str:
    size = f"{limit // (1 << 20)} MiB" if limit >= 1 << 20 else f"{limit} byte"
    return f"{p}: larger than the {size} limit for {what} files; is it the right file?"
