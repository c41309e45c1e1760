"""Test-wide fixtures live in tests/fixtures/; this file only imports them."""

from tests.fixtures.pytest_fixtures import ssh_host, sshd, xdg_state  # noqa: F401
