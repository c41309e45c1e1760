import pytest

from tests.engine.stack import Stack


@pytest.fixture(scope="session")
def stack():
    """prefill + decode + router, fixed build, transfer-delay drill widening the abort window."""
    s = Stack(drills="transfer-delay-ms=150")
    try:
        s.start()
        yield s
    except Exception:
        print(s.logs())
        raise
    finally:
        s.stop()
