import pytest

from tests.engine.stack import Stack


@pytest.fixture(scope="session")
def stack():
    """prefill + decode + router, fixed build, transfer-delay drill widening the abort window."""
    with Stack(drills="transfer-delay-ms=150").running() as s:
        yield s
