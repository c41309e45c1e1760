"""SSH host keys: loading known_hosts, the policy for an unknown key, the refusal of a changed one, recording a key;
and reading the other SSH files a host names (ssh_config, the private key) without hanging or crashing on them.

The rule (docs/inventory.md): an unknown host key is refused unless the host says `accept_new_host_key: true` (then
it is appended to that known_hosts file); a changed key is always refused. Fingerprints and known_hosts lines come
from paramiko (`PKey.fingerprint`, `HostKeyEntry`); paramiko is imported lazily, as in ssh.py.
"""

from __future__ import annotations

import io
import os

from pdctl.errors import HostKeyRefused, UsageError
from pdctl.transport.paramiko_import import import_paramiko, match_exec_problem, needs_match_exec
from pdctl.safe_read import MAX_INPUT_BYTES, read_input_text
from pdctl.shell import quote


def key_fingerprint(key) -> str:
    """OpenSSH-style SHA256 fingerprint of a paramiko PKey: `SHA256:<base64 without padding>`, as ssh-keygen -l."""
    return key.fingerprint


def known_hosts_name(address: str, port: int) -> str:
    """The name a host is recorded under in known_hosts: `addr` on port 22, else `[addr]:port`."""
    return address if port == 22 else f"[{address}]:{port}"


def load_known_hosts(client, path: str, who: str, name: str) -> None:
    """Load the keys known_hosts at `path` records for `name` (known_hosts_name: `addr` or `[addr]:port`, plain or
    hashed in the file) into the paramiko SSHClient's host keys; a missing file adds none.

    Changes only the client. `who` names the host in messages. The file is read safely (read_ssh_file: no FIFO,
    device or directory, at most MAX_KNOWN_HOSTS_BYTES, UTF-8); then each line as paramiko's HostKeys.load reads
    it (blank, comment and unknown-type lines skipped, a name's first key of a type found first). Only `name`'s
    entries are added, through HostKeys' public `add`: loading a fleet's whole file that way (or with HostKeys.load)
    is quadratic in its lines. Raises UsageError (exit 2) naming the host and the file when it cannot be read or a
    line's key is not base64: no key could be checked.
    """
    paramiko = import_paramiko()
    from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

    if not os.path.exists(path):
        return
    text = read_ssh_file(path, who, "known_hosts", limit=MAX_KNOWN_HOSTS_BYTES)
    keys = client.get_host_keys()
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            entry = HostKeyEntry.from_line(line, lineno)
        except paramiko.SSHException:
            continue
        except InvalidHostKey as e:  # not base64
            raise UsageError(
                f"host {who}: cannot read known_hosts {path}: line {lineno}: {e.exc}",
                hint=_FILE_HINT.format(field="known_hosts"),
            ) from None
        if entry is None or not any(_names(h, name) for h in entry.hostnames):
            continue
        known = keys.lookup(name)
        if known is None or entry.key.get_name() not in known:  # as HostKeys.lookup: a type's first key wins
            keys.add(name, entry.key.get_name(), entry.key)


def _names(recorded: str, name: str) -> bool:
    """Whether a known_hosts host field `recorded` (plain, or hashed `|1|salt|hash`) names `name`."""
    import hmac

    if recorded.startswith("|1|"):
        paramiko = import_paramiko()
        return hmac.compare_digest(paramiko.HostKeys.hash_host(name, recorded), recorded)
    return recorded == name


# -- the other files an SSH host names: ssh_config and its private key ------------------------------------------

MAX_KNOWN_HOSTS_BYTES = 16 << 20  # a fleet's known_hosts can hold many thousand keys; /dev/zero-sized is wrong
_FILE_HINT = "fix the file, or point the host's `{field}` in the inventory at the right one"


def read_ssh_file(path: str, who: str, what: str, *, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of an SSH file a host uses (ssh_config, known_hosts, key), read by safe_read (a FIFO, a device
    or a directory is refused unopened). Raises UsageError (exit 2): one line naming the host and the file."""
    try:
        return read_input_text(path, UsageError, what, limit=limit)
    except UsageError as e:
        field = {"SSH key": "key"}.get(what, what)
        raise UsageError(f"host {who}: {e.message}", hint=_FILE_HINT.format(field=field)) from None


def ssh_config_for(path: str, who: str, address: str) -> dict:
    """paramiko's ssh_config lookup of `address` in the file at `path` (read_ssh_file), `port` as an int when
    given. Raises UsageError (exit 2) naming the host and the file when it cannot be read or parsed."""
    text = read_ssh_file(path, who, "ssh_config")
    paramiko = import_paramiko(with_invoke=needs_match_exec(text))
    if problem := match_exec_problem(text):
        raise UsageError(
            f"host {who}: cannot read ssh_config {path}: {problem}",
            hint="give this host `ssh_config: none` and its address, user and key in the inventory, or move the "
            "`Match exec` to the ssh_config the first SSH host reads",
        )
    try:
        cfg = paramiko.SSHConfig.from_text(text).lookup(address)
    except (paramiko.ssh_exception.ConfigParseError, ValueError, KeyError) as e:
        raise UsageError(
            f"host {who}: cannot read ssh_config {path}: {e}", hint=_FILE_HINT.format(field="ssh_config")
        ) from None
    if "port" in cfg:
        if not (cfg["port"].isdigit() and 0 < int(cfg["port"]) < 65536):
            raise UsageError(
                f"host {who}: ssh_config {path}: Port {cfg['port']!r} is not a port number",
                hint=_FILE_HINT.format(field="ssh_config"),
            )
        cfg["port"] = int(cfg["port"])
    return cfg


def check_key_file(path: str, who: str) -> None:
    """Refuse a private key file paramiko would hang on (a FIFO, /dev/zero), crash on (binary) or fail on (not a
    key, encrypted: pdctl asks for no passphrase) before paramiko opens it: tried as SSHClient tries it (RSA,
    ECDSA, Ed25519). Raises UsageError (exit 2), one line naming the host and the file."""
    paramiko = import_paramiko()
    hint = _FILE_HINT.format(field="key")
    if not os.path.exists(path):
        raise UsageError(f"host {who}: SSH key file {path} does not exist", hint=hint)
    text = read_ssh_file(path, who, "SSH key")
    last: Exception | None = None
    for cls in (paramiko.RSAKey, paramiko.ECDSAKey, paramiko.Ed25519Key):
        try:
            cls.from_private_key(io.StringIO(text))
            return
        except paramiko.PasswordRequiredException:
            raise UsageError(
                f"host {who}: SSH key file {path} is encrypted and pdctl asks for no passphrase",
                hint="give an unencrypted key (ssh-keygen -p -f FILE removes the passphrase)",
            ) from None
        except (paramiko.SSHException, ValueError, TypeError, IndexError, UnicodeDecodeError) as e:
            last = e
    raise UsageError(f"host {who}: SSH key file {path} is not a private key paramiko can read ({last})", hint=hint)


class HostKeyPolicy:
    """paramiko's missing-host-key policy for one host. paramiko calls it only when known_hosts has no key at all
    for the host (a different key raises BadHostKeyException instead, see `changed_key_refused`)."""

    def __init__(self, who: str, known_hosts: str, *, accept_new: bool, inventory_name: str):
        self.who = who  # e.g. "'gpu-1' (10.0.0.5:22)", for messages
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
        try:
            append_known_host(self.known_hosts, hostname, key)
        except UsageError as e:  # no key is trusted that could not be recorded
            raise UsageError(
                f"host {self.who}: cannot record its new host key {fp}: {e.message}",
                hint=(
                    f"point host {self.inventory_name!r}'s `known_hosts` in the inventory at a file of your own (not "
                    "a link to one), or record the key yourself after checking it: ssh-keyscan"
                ),
            ) from None
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
    """Append `hostname keytype base64` to the known_hosts file at `path` (created 0600, parent 0700), opened by
    pdctl.safe_write: never through a symbolic link, never a file with other hard links or another user's in a
    sticky world-writable directory, never a FIFO, device or directory.

    Keeps what the file holds (paramiko's HostKeys.save would rewrite it); adds a newline first if the last line
    lacks one (read through the same fd, so from the file that is appended to). Raises UsageError naming the file
    when it is refused or cannot be written.
    """
    import_paramiko()
    from paramiko.hostkeys import HostKeyEntry

    from pdctl.safe_write import open_append

    parent = os.path.dirname(path)
    if parent:
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        except OSError as e:
            raise UsageError(f"known_hosts {path}: cannot be written ({e.strerror or e})") from None
    line = HostKeyEntry([hostname], key).to_line()
    fd = open_append(path, UsageError, "known_hosts", readable=True)
    try:
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line
        os.write(fd, line.encode())
    except OSError as e:  # e.g. a full disk
        raise UsageError(f"known_hosts {path}: cannot be written ({e.strerror or e})") from None
    finally:
        os.close(fd)
