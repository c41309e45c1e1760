"""Test-wide fixtures live in tests/fixtures/; this file only imports them."""

from tests.fixtures.pytest_fixtures import leftovers_swept, ssh_host, sshd, xdg_state  # noqa: F401

import os
import signal

import pytest

# An operator's PDCTL_SSH_KEEP would turn every SSH test's connection into a kept one: tests that want keeping set it.
os.environ.pop("PDCTL_SSH_KEEP", None)
# A suite started in the background by a script (`cmd &`) inherits SIGINT ignored, under nohup SIGHUP, as does every
# process it starts, and pdctl keeps an ignored signal ignored: the tests that send them need them delivered.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
for _sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
    if signal.getsignal(_sig) is signal.SIG_IGN:
        signal.signal(_sig, signal.SIG_DFL)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under PDCTL_REQUIRE_ALL=1 (set by .ci/run) a skip is a failure: CI must not go green without sshd,
    systemd-analyze or network namespaces just because the machine lacked them."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("PDCTL_REQUIRE_ALL") == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, but PDCTL_REQUIRE_ALL=1 requires every test to run: {reason}"


LONG_FILE_LINES = 400


def pytest_terminal_summary(terminalreporter):
    """The house's length rule as a warning, not a failure: a file past LONG_FILE_LINES usually holds two concepts
    (split it by concept, never by size). Covers the library, the tests and the benches."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [p for pkg in ("pdctl", "engine", "tests", "bench") for p in (root / pkg).rglob("*.py")]
    big = sorted(
        (str(p.relative_to(root)), n) for p in files if (n := len(p.read_text().splitlines())) > LONG_FILE_LINES
    )
    if big:
        terminalreporter.write_sep("-", f"files over {LONG_FILE_LINES} lines (two concepts?)")
        for name, n in big:
            terminalreporter.write_line(f"{name}: {n} lines")
