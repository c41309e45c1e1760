"""`pdctl storm` option checks happen before any traffic: bad aim fractions are a usage error (exit 2)."""

from tests.e2e.helpers import pdctl


def test_bad_aim_fractions_exit_2_naming_the_flags(tmp_path):
    r = pdctl(["storm", "--target", "transfer-window", "--aim-from", "0.9", "--aim-to", "0.5"], state=tmp_path)
    assert r.code == 2, r.output
    assert "--aim-from" in r.stderr and "Traceback" not in r.output


def test_logs_needs_at_least_one_line(tmp_path):
    r = pdctl(["logs", "decode", "-n", "0"], state=tmp_path)
    assert r.code == 2
