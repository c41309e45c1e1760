"""`python -m pdctl` and the `pdctl` console script."""


def main() -> None:
    import sys

    if sys.argv[1:2] == ["verify"]:   # a resident pdctl, when one runs, serves it without this start-up
        from pdctl.resident_paths import resident_to_ask

        path = resident_to_ask()
        if path is not None:
            from pdctl.resident_client import run_in_resident

            code = run_in_resident(sys.argv, path)
            if code is not None:
                leave(SystemExit(code))
    run_cli()


def run_cli() -> None:
    """pdctl's CLI on sys.argv, to its end; returns the SystemExit only while a non-daemon thread still runs."""
    from pdctl.cli.app import app

    try:
        app()
    except SystemExit as e:
        leave(e)
        raise


def leave(e: SystemExit) -> None:
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
        except (OSError, ValueError):   # a closed stream, a full disk; a reader gone (`| head`): the verdict stands
            from pdctl.broken_pipe import drop_rest_of_output

            if not (stream is sys.stdout and drop_rest_of_output()):
                code = code or 1
    os._exit(code or 0)


if __name__ == "__main__":
    main()
