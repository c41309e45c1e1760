"""`python -m pdctl` and the `pdctl` console script."""


def main() -> None:
    from pdctl.cli.app import app

    try:
        app()
    except SystemExit as e:
        _leave(e)
        raise


def _leave(e: SystemExit) -> None:
    """End the process now, skipping the interpreter's teardown of every module and object: ~50 ms on every run,
    a fifth of a final-health (docs/performance.md). Safe because pdctl has written and closed what it writes by
    then (audit records and reports in `with` blocks, the watch's timeline flushed per line): the atexit handlers
    run, the standard streams are flushed, then os._exit. Returns (the caller exits the usual way) while a
    non-daemon thread still runs, whose work a teardown would wait for."""
    import atexit
    import os
    import sys
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        return
    code = e.code
    if code is not None and not isinstance(code, int):   # sys.exit("message"): printed, exit 1, as Python does
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a reader that went away (BrokenPipe), a closed stream
            code = code or 1
    os._exit(code or 0)


if __name__ == "__main__":
    main()
