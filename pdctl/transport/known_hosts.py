"""SSH host keys: loading known_hosts, the policy for an unknown key, the refusal of a changed one, recording a key.

The rule (DESIGN.md): an unknown host key is refused unless the host says `accept_new_host_key: true` (then it is
appended to that known_hosts file); a changed key is always refused. Fingerprints and known_hosts lines come from
paramiko (`PKey.fingerprint`, `HostKeyEntry`); paramiko is imported lazily, as in ssh.py.
"""

from __future__ import annotations

import os

from pdctl.errors import HostKeyRefused
from pdctl.shell import quote


def key_fingerprint(key) -> str:
    """OpenSSH-style SHA256 fingerprint of a paramiko PKey: `SHA256:<base64 without padding>`, as ssh-keygen -l."""
    return key.fingerprint


def known_hosts_name(address: str, port: int) -> str:
    """The name a host is recorded under in known_hosts: `addr` on port 22, else `[addr]:port`."""
    return address if port == 22 else f"[{address}]:{port}"


def load_known_hosts(client, path: str, who: str) -> None:
    """Load the known_hosts file at `path` into the paramiko SSHClient's host keys; a missing file adds none.

    Changes only the client. `who` names the host in messages. Raises HostKeyRefused when the file exists but
    cannot be read (permissions, not text, a line whose key is not base64), since no key could then be checked.
    """
    import paramiko

    if not os.path.exists(path):
        return
    try:
        client.get_host_keys().load(path)
    except (OSError, UnicodeDecodeError, paramiko.SSHException, paramiko.hostkeys.InvalidHostKey) as e:
        raise HostKeyRefused(f"host {who}: cannot read known_hosts {path}: {e}") from None


class HostKeyPolicy:
    """paramiko's missing-host-key policy for one host. paramiko calls it only when known_hosts has no key at all
    for the host (a different key raises BadHostKeyException instead, see `changed_key_refused`)."""

    def __init__(self, who: str, known_hosts: str, *, accept_new: bool, inventory_name: str):
        self.who = who                      # e.g. "'gpu-1' (10.0.0.5:22)", for messages
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.inventory_name = inventory_name

    def missing_host_key(self, client, hostname: str, key) -> None:
        """Refuse (HostKeyRefused) unless accept-new was asked; then append the key to known_hosts and trust it for
        this client. `hostname` is paramiko's known_hosts name for the target (`[addr]:port` off port 22)."""
        fp = f"{key.get_name()} {key_fingerprint(key)}"
        if not self.accept_new:
            raise HostKeyRefused(
                f"host {self.who}: unknown host key {fp}, not in {self.known_hosts}",
                hint=(
                    f"verify the fingerprint out of band, then set `accept_new_host_key: true` on host "
                    f"{self.inventory_name!r} in the inventory to accept it and record it in {self.known_hosts}"
                ),
            )
        append_known_host(self.known_hosts, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)


def changed_key_refused(who: str, err, known_hosts: str, address: str, port: int) -> HostKeyRefused:
    """The refusal for paramiko's BadHostKeyException `err`: the host offered a key other than the recorded one."""
    return HostKeyRefused(
        f"host {who}: host key CHANGED, refusing to connect: "
        f"offered {err.key.get_name()} {key_fingerprint(err.key)}, "
        f"known_hosts {known_hosts} has {err.expected_key.get_name()} {key_fingerprint(err.expected_key)}",
        hint=(
            "a changed host key is never accepted automatically; if the change is expected, remove the old "
            f"entry: ssh-keygen -R {quote(known_hosts_name(address, port))} -f {quote(known_hosts)}"
        ),
    )


def append_known_host(path: str, hostname: str, key) -> None:
    """Append `hostname keytype base64` to the known_hosts file at `path` (created 0600, parent 0700).

    Keeps what the file holds (paramiko's HostKeys.save would rewrite it); adds a newline first if the last line
    lacks one. Raises OSError when the file cannot be written.
    """
    from paramiko.hostkeys import HostKeyEntry

    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    line = HostKeyEntry([hostname], key).to_line()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as f:
        if f.tell() > 0:
            with open(path, "rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    f.write("\n")
        f.write(line)
