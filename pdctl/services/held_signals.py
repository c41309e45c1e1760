"""Stop signals held across a step that must not be cut in two (a launch and the pidfile that records it)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


@contextmanager
def stop_signals_held():
    """SIGINT, SIGTERM and SIGHUP arriving inside are held and delivered (to the handlers in place before) as the
    block ends, so an interrupt cannot fall between launching a process and learning its pid. Python handlers run
    in the main thread whichever thread the kernel picked, so swapping handlers holds them where a main-thread
    pthread_sigmask would not (paramiko's threads would take the signal). A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    sigs = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    previous = {
        s: signal.signal(s, lambda signum, _frame: held.append(signum))
        for s in sigs
        if signal.getsignal(s) != signal.SIG_IGN
    }  # an ignored one stays ignored (nohup)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        if held:
            signal.raise_signal(held[0])  # the restored handler raises (KeyboardInterrupt / Interrupted) here
