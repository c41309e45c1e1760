"""A reader that goes away before it has read all of pdctl's output (`pdctl status | head -1`, `grep -q`): the rest of
the output is dropped quietly and the exit status is still the command's verdict, whatever the output's size. (Python
ignores SIGPIPE, so without this a small output would fail on its last flush and a large one would not.) A command
cut short by a write that could not be dropped ends with 141 (128 + SIGPIPE), as other tools do: its verdict is
unknown. An EPIPE counts as this only when standard output's reader is really gone: a socket's is a failure of its
own."""

from __future__ import annotations


def stdout_reader_gone() -> bool:
    """True when standard output is a pipe or socket whose reading end is closed."""
    import select

    try:
        p = select.poll()
        p.register(1, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except (OSError, ValueError):
        return False


def drop_rest_of_output() -> bool:
    """When standard output's reader is gone, point it at /dev/null (no later write or flush fails, the
    interpreter's own at exit included) and return True; else False."""
    if not stdout_reader_gone():
        return False
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass
    return True
