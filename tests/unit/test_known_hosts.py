"""Host-key handling (pdctl.transport.known_hosts) with real paramiko keys, checked against OpenSSH's ssh-keygen.

The same rules over a real sshd: tests/e2e/test_ssh_transport.py (unknown refused, accepted when asked, changed).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
import subprocess
import threading

import paramiko
import pytest

from pdctl.errors import HostKeyRefused, UsageError
from pdctl.transport.known_hosts import (
    HostKeyPolicy,
    append_known_host,
    changed_key_refused,
    check_key_file,
    key_fingerprint,
    known_hosts_name,
    load_known_hosts,
    ssh_config_for,
)

needs_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) missing")


@pytest.fixture(scope="module")
def rsa():
    return paramiko.RSAKey.generate(2048)


@pytest.fixture(scope="module")
def ecdsa():
    return paramiko.ECDSAKey.generate()


def _ed25519(tmp_path):
    """paramiko cannot generate ed25519 keys: ssh-keygen makes one, paramiko loads it."""
    path = tmp_path / "ed"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return paramiko.Ed25519Key.from_private_key_file(str(path))


def _keys(tmp_path, rsa, ecdsa):
    return [rsa, ecdsa, _ed25519(tmp_path)]


@needs_keygen
def test_fingerprint_is_what_ssh_keygen_prints_and_what_pdctl_printed_before(tmp_path, rsa, ecdsa):
    for key in _keys(tmp_path, rsa, ecdsa):
        pub = tmp_path / f"{key.get_name()}.pub"
        pub.write_text(f"{key.get_name()} {key.get_base64()} test\n")
        out = subprocess.run(
            ["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)], check=True, capture_output=True, text=True
        ).stdout
        before = "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
        assert key_fingerprint(key) == out.split()[1] == before, key.get_name()


def test_known_hosts_name_brackets_only_off_port_22():
    assert known_hosts_name("10.0.0.5", 22) == "10.0.0.5"
    assert known_hosts_name("10.0.0.5", 2222) == "[10.0.0.5]:2222"
    assert known_hosts_name("fe80::1", 2222) == "[fe80::1]:2222"


@needs_keygen
def test_append_makes_a_private_file_that_paramiko_and_openssh_read(tmp_path, rsa):
    path = tmp_path / "new" / "known_hosts"  # the parent does not exist yet
    append_known_host(str(path), "[127.0.0.1]:2222", rsa)
    assert path.read_text() == f"[127.0.0.1]:2222 ssh-rsa {rsa.get_base64()}\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    hk = paramiko.HostKeys(str(path))
    assert hk.lookup("[127.0.0.1]:2222")["ssh-rsa"] == rsa
    assert hk.lookup("127.0.0.1") is None  # port 22 is a different entry
    found = subprocess.run(["ssh-keygen", "-F", "[127.0.0.1]:2222", "-f", str(path)], capture_output=True, text=True)
    assert found.returncode == 0 and rsa.get_base64() in found.stdout


def test_append_keeps_the_file_and_ends_an_unfinished_last_line(tmp_path, rsa, ecdsa):
    path = tmp_path / "known_hosts"
    path.write_text("# mine\nother.example ssh-rsa AAAA")  # no newline at the end
    os.chmod(path, 0o644)
    append_known_host(str(path), "10.0.0.5", ecdsa)
    assert path.read_text() == (
        f"# mine\nother.example ssh-rsa AAAA\n10.0.0.5 {ecdsa.get_name()} {ecdsa.get_base64()}\n"
    )
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644  # an existing file keeps its mode
    append_known_host(str(path), "[10.0.0.5]:2222", rsa)
    assert path.read_text().count("\n") == 4 and path.read_text().endswith(f"ssh-rsa {rsa.get_base64()}\n")


def test_unknown_key_is_refused_without_accept_new_and_nothing_is_written(tmp_path, rsa):
    path = tmp_path / "known_hosts"
    policy = HostKeyPolicy("'gpu-1' (127.0.0.1:2222)", str(path), accept_new=False, inventory_name="gpu-1")
    client = paramiko.SSHClient()
    with pytest.raises(HostKeyRefused) as ei:
        policy.missing_host_key(client, "[127.0.0.1]:2222", rsa)
    err = ei.value
    assert err.exit_code == 4
    assert err.message == (
        f"host 'gpu-1' (127.0.0.1:2222): unknown host key ssh-rsa {key_fingerprint(rsa)}, not in {path}"
    )
    assert "`accept_new_host_key: true` on host 'gpu-1'" in err.hint
    assert not path.exists() and client.get_host_keys().lookup("[127.0.0.1]:2222") is None


def test_unknown_key_with_accept_new_is_recorded_and_trusted(tmp_path, ecdsa):
    path = tmp_path / "known_hosts"
    policy = HostKeyPolicy("'gpu-1' (127.0.0.1:2222)", str(path), accept_new=True, inventory_name="gpu-1")
    client = paramiko.SSHClient()
    policy.missing_host_key(client, "[127.0.0.1]:2222", ecdsa)
    assert client.get_host_keys().lookup("[127.0.0.1]:2222")[ecdsa.get_name()] == ecdsa
    later = paramiko.SSHClient()  # the next connection finds it in the file
    load_known_hosts(later, str(path), "'gpu-1'", "[127.0.0.1]:2222")
    assert later.get_host_keys().lookup("[127.0.0.1]:2222")[ecdsa.get_name()] == ecdsa


def test_changed_key_refusal_names_both_fingerprints_and_the_removal(tmp_path, rsa, ecdsa):
    bad = paramiko.BadHostKeyException("10.0.0.5", ecdsa, rsa)  # offered ecdsa, known_hosts has rsa
    kh = str(tmp_path / "my known_hosts")
    err = changed_key_refused("'gpu-1' (10.0.0.5:2222)", bad, kh, "10.0.0.5", 2222)
    assert isinstance(err, HostKeyRefused) and err.exit_code == 4
    assert err.message == (
        f"host 'gpu-1' (10.0.0.5:2222): host key CHANGED, refusing to connect: offered {ecdsa.get_name()} "
        f"{key_fingerprint(ecdsa)}, known_hosts {kh} has ssh-rsa {key_fingerprint(rsa)}"
    )
    assert err.hint.endswith(f"ssh-keygen -R '[10.0.0.5]:2222' -f '{kh}'")
    assert changed_key_refused("x", bad, "/k", "10.0.0.5", 22).hint.endswith("ssh-keygen -R 10.0.0.5 -f /k")


def test_load_known_hosts_missing_file_adds_nothing(tmp_path):
    client = paramiko.SSHClient()
    load_known_hosts(client, str(tmp_path / "absent"), "'gpu-1'", "10.0.0.5")
    assert len(client.get_host_keys()) == 0


@pytest.mark.parametrize(
    "content, why",
    [
        (b"10.0.0.5 ssh-rsa abc\n", "line 1"),  # not base64: paramiko raises InvalidHostKey
        (b"\xff\xfe binary\n", "not UTF-8 text"),  # not text
    ],
)
def test_unreadable_known_hosts_is_exit_2_naming_host_and_file(tmp_path, content, why):
    path = tmp_path / "known_hosts"
    path.write_bytes(content)
    with pytest.raises(UsageError) as e:
        _bounded(load_known_hosts, paramiko.SSHClient(), str(path), "'gpu-1' (10.0.0.5:22)", "10.0.0.5")
    assert e.value.exit_code == 2
    assert e.value.message.startswith("host 'gpu-1' (10.0.0.5:22): ") and str(path) in e.value.message
    assert why in e.value.message and "\n" not in e.value.message


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_known_hosts_that_is_no_regular_file_is_refused_unopened(tmp_path, kind):
    path = _special(tmp_path, kind)
    with pytest.raises(UsageError) as e:
        _bounded(load_known_hosts, paramiko.SSHClient(), str(path), "'gpu-1'", "10.0.0.5")
    assert e.value.exit_code == 2
    assert e.value.message.startswith(f"host 'gpu-1': {path}: is a") and "not a regular file" in e.value.message


def test_known_hosts_read_from_text_keeps_every_entry_and_hashed_names(tmp_path):
    a, b = paramiko.RSAKey.generate(1024), paramiko.ECDSAKey.generate()
    path = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host("10.0.0.7")
    path.write_text(
        f"# comment\n\n10.0.0.5,[10.0.0.6]:2222 {a.get_name()} {a.get_base64()}\n"
        f"{hashed} {b.get_name()} {b.get_base64()}\nbroken-line\n"
        f"10.0.0.5 {a.get_name()} {a.get_base64()}\n"
    )  # a duplicate adds nothing

    def loaded(name: str):
        client = paramiko.SSHClient()
        load_known_hosts(client, str(path), "'gpu-1'", name)
        return client.get_host_keys()

    assert loaded("10.0.0.5").check("10.0.0.5", a) and len(loaded("10.0.0.5").keys()) == 1
    assert loaded("[10.0.0.6]:2222").check("[10.0.0.6]:2222", a)
    assert loaded("10.0.0.7").check("10.0.0.7", b) and not loaded("10.0.0.7").check("10.0.0.7", a)
    assert len(loaded("10.0.0.9")) == 0  # only the target's own entries are loaded


def test_a_names_first_key_of_a_type_wins_and_other_types_are_kept(tmp_path):
    first, second, other = paramiko.RSAKey.generate(1024), paramiko.RSAKey.generate(1024), paramiko.ECDSAKey.generate()
    path = tmp_path / "known_hosts"
    path.write_text("".join(f"10.0.0.5 {k.get_name()} {k.get_base64()}\n" for k in (first, second, other)))
    client = paramiko.SSHClient()
    load_known_hosts(client, str(path), "'gpu-1'", "10.0.0.5")
    found = client.get_host_keys().lookup("10.0.0.5")
    assert found["ssh-rsa"] == first and found[other.get_name()] == other


# -- the other SSH files of a host: ssh_config and the private key -------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "binary"])
def test_ssh_config_that_cannot_be_read_is_one_line_naming_host_and_file(tmp_path, kind):
    path = _special(tmp_path, kind)
    with pytest.raises(UsageError) as e:
        _bounded(ssh_config_for, str(path), "'gpu-1'", "10.0.0.5")
    assert e.value.exit_code == 2 and e.value.message.startswith(f"host 'gpu-1': {path}: ")
    assert "ssh_config" in e.value.message and "\n" not in e.value.message


def test_ssh_config_port_that_is_no_number_is_refused(tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host 10.0.0.5\n  Port twenty-two\n")
    with pytest.raises(UsageError, match=f"host 'gpu-1': ssh_config {cfg}: Port 'twenty-two' is not a port"):
        ssh_config_for(str(cfg), "'gpu-1'", "10.0.0.5")
    cfg.write_text("Host 10.0.0.5\n  Port 2222\n  User ops\n")
    assert ssh_config_for(str(cfg), "'gpu-1'", "10.0.0.5")["port"] == 2222


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "binary"])
def test_key_file_that_paramiko_would_hang_or_crash_on_is_refused_first(tmp_path, kind):
    path = _special(tmp_path, kind)
    with pytest.raises(UsageError) as e:
        _bounded(check_key_file, str(path), "'gpu-1'")
    assert e.value.exit_code == 2 and e.value.message.startswith(f"host 'gpu-1': {path}: ")
    assert "SSH key" in e.value.message and "\n" not in e.value.message


def test_key_file_that_is_no_key_or_encrypted_is_one_line(tmp_path):
    text = tmp_path / "id_text"
    text.write_text("this is not a key\n")
    with pytest.raises(UsageError, match=f"host 'gpu-1': SSH key file {text} is not a private key paramiko can "):
        check_key_file(str(text), "'gpu-1'")
    key = paramiko.RSAKey.generate(1024)
    enc = tmp_path / "id_enc"
    key.write_private_key_file(str(enc), password="s3cret")
    with pytest.raises(UsageError, match=f"SSH key file {enc} is encrypted"):
        check_key_file(str(enc), "'gpu-1'")
    plain = tmp_path / "id_rsa"
    key.write_private_key_file(str(plain))
    check_key_file(str(plain), "'gpu-1'")  # a good key passes
    with pytest.raises(UsageError, match="does not exist"):
        check_key_file(str(tmp_path / "gone"), "'gpu-1'")


def _special(tmp_path, kind: str):
    """A path pdctl must not read as a text file: a FIFO nobody writes to, /dev/zero, a directory, binary bytes."""
    if kind == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
        return path
    if kind == "device":
        return "/dev/zero"
    if kind == "directory":
        return tmp_path
    path = tmp_path / "binary"
    path.write_bytes(bytes(range(256)) * 8)
    return path


def _bounded(fn, *args, limit: float = 5.0):
    """`fn(*args)` in a thread, so that a read that blocks fails the test instead of hanging the suite."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 -- handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit)
    assert not t.is_alive(), f"{fn.__name__} blocked for over {limit}s"
    if "error" in box:
        raise box["error"]
    return box.get("value")
