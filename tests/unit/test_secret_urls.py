"""A password inside a URL is masked whatever name carries it (issue 28, S2): `RT_URL: http://user:pw@host` in a role's
env showed whole in render, deploy --dry-run, final-health --json, the watch, the audit log and history. The masking
lives in pdctl.secrets (mask_urls, and URL passwords as declared secrets) and pdctl.serialize (every JSON string);
checked here on the functions and end to end through the CLI with the bundled local inventory."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.inventory import embedded_default, parse_inventory
from pdctl.secrets import (
    MASK,
    inventory_secrets,
    mask_argv,
    mask_env,
    mask_text,
    mask_urls,
    secret_arg_values,
    secret_values,
)
from pdctl.serialize import to_data
from tests.unit.isolated_local import live_decode, local_inventory

PASSWORD = "hunter2pass"
URL = f"http://user:{PASSWORD}@127.0.0.1:9/x"
SLASHED = "redis://default:ab/cd+ef9Zslash@h:6379/0"  # a password with a raw `/` (second red-team pass)
QUOTED = 'redis://default:ab"cdQUOTEPW1@h:6379/0'  # a raw quote or space (third pass): the reproductions
SPACED = "postgres://app:pass SPACEPW22@db/x"


@pytest.mark.parametrize(
    "text, shown",
    [
        (URL, f"http://user:{MASK}@127.0.0.1:9/x"),  # the reproduction: the user stays, the password goes
        ("https://ghp_tok3nvalue@github.com/o/r.git", f"https://{MASK}@github.com/o/r.git"),  # a lone userinfo: a token
        ("redis://:s3cr3t@cache:6379/0", f"redis://:{MASK}@cache:6379/0"),
        ("postgresql://app:p@ss@db/x?sslmode=require", f"postgresql://app:{MASK}@db/x?sslmode=require"),  # raw @
        (
            f"proxy is '{URL}', see \"http://a:b@c\"",
            f"proxy is 'http://user:{MASK}@127.0.0.1:9/x', see \"http://a:{MASK}@c\"",
        ),
        # a password with a raw `/`, `#` or `?` (second red-team pass): the userinfo runs to the token's last `@`
        ("redis://default:ab/cd+ef9Zslash@h:6379/0", f"redis://default:{MASK}@h:6379/0"),
        ("postgres://app:pa#ss9hashword@db/x", f"postgres://app:{MASK}@db/x"),
        ("postgres://app:pa?qmark@db/x", f"postgres://app:{MASK}@db/x"),
        ("DB='mysql://u:a/b@c#d@db:3306/x' next", f"DB='mysql://u:{MASK}@db:3306/x' next"),
        ("http://a@h1,http://b:pw/1@h2", f"http://{MASK}@h1,http://b:{MASK}@h2"),  # a list: each URL its own
        # the accepted price: an `@` in a path or query without userinfo is over-masked up to it (never shown raw)
        ("http://127.0.0.1:30000/health?x=a@b", f"http://127.0.0.1:{MASK}@b"),
        ("http://127.0.0.1:30000/health /x@b", "http://127.0.0.1:30000/health /x@b"),  # a space ends the URL
        ("http://user:@h/", "http://user:@h/"),  # an empty password shows as empty
        ("mail me at ops@example.com", "mail me at ops@example.com"),  # not a URL
    ],
)
def test_mask_urls_masks_the_userinfo_of_every_url(text, shown):
    assert mask_urls(text) == shown
    assert mask_urls(shown) == shown  # masking twice changes nothing
    assert mask_text(text) == shown  # free text: log tails, command lines, error messages


def test_any_env_value_and_any_flag_value_holding_a_url_is_masked():
    env = {"RT_URL": URL, "HTTPS_PROXY": "http://proxyuser:pr0xypw@proxy:3128", "PLAIN": "x", "HF_TOKEN": "hf_abc"}
    assert mask_env(env) == {
        "RT_URL": f"http://user:{MASK}@127.0.0.1:9/x",
        "HTTPS_PROXY": f"http://proxyuser:{MASK}@proxy:3128",
        "PLAIN": "x",
        "HF_TOKEN": MASK,
    }
    argv = ["python3", "-m", "x", "--redis-url", "redis://:s3cr3t@cache:6379", f"--model-path={URL}"]
    assert mask_argv(argv) == argv[:4] + [
        f"redis://:{MASK}@cache:6379",
        f"--model-path=http://user:{MASK}@127.0.0.1:9/x",
    ]


def test_a_url_password_is_a_declared_secret_scrubbed_where_it_appears_alone():
    """A log line or error that quotes the password without its URL, or percent-decoded, is scrubbed too."""
    data = embedded_default().dump()
    data["roles"]["decode"][0]["env"]["DB_URL"] = "postgres://app:p%40ss-word@db/x"
    data["roles"]["router"][0]["args"]["--redis-url"] = URL
    data["roles"]["prefill"][0]["env"]["GIT_URL"] = "ssh://root@gpu1/repo"  # a user alone is not collected
    secrets = inventory_secrets(parse_inventory(data, "t.yaml"))
    assert {PASSWORD, "p%40ss-word", "p@ss-word"} <= secrets and "root" not in secrets
    log = f"auth failed: password {PASSWORD} rejected; tried p@ss-word for /root/.cache"
    assert mask_text(log, secrets) == f"auth failed: password {MASK} rejected; tried {MASK} for /root/.cache"
    assert secret_values({"X": "http://u:ab@h"}) == set()  # too short to scrub from all text: masked in its URL
    # a password holding `/`, `#` or `?` is collected whole, so it is scrubbed where it appears alone
    env = {"REDIS_URL": "redis://default:ab/cd+ef9Zslash@h:6379/0", "PG": "postgres://app:pa#ss9hashword@db/x"}
    assert secret_values(env) == {"ab/cd+ef9Zslash", "pa#ss9hashword"}
    assert mask_text("AUTH failed for ab/cd+ef9Zslash", secret_values(env)) == f"AUTH failed for {MASK}"


@pytest.mark.parametrize(
    "value, shown, password",
    [
        (QUOTED, f"redis://default:{MASK}@h:6379/0", 'ab"cdQUOTEPW1'),  # the reproductions (third red-team pass)
        (SPACED, f"postgres://app:{MASK}@db/x", "pass SPACEPW22"),
        ("http://u:LIVEQ'PW6161@h/x", f"http://u:{MASK}@h/x", "LIVEQ'PW6161"),
        ("redis://u:VAR'PW999@h/x", f"redis://u:{MASK}@h/x", "VAR'PW999"),
        ("mysql://u:a \"b@c'd9Zall@db:3306/x", f"mysql://u:{MASK}@db:3306/x", "a \"b@c'd9Zall"),  # all at once
        ("https://a tok3n'x@h/r.git", f"https://{MASK}@h/r.git", None),  # a lone userinfo: masked, not collected
    ],
)
def test_a_whole_value_that_is_a_url_is_masked_to_its_last_at_whatever_it_holds(value, shown, password):
    """An env value, an argv element (alone or as `--flag=`), a declared flag's value: the value is the URL, so its
    userinfo runs to the value's last `@`, a raw quote or space in the password too; the password is a declared
    secret, scrubbed from free text where it appears alone."""
    assert mask_env({"X_URL": value}) == {"X_URL": shown}
    assert mask_argv(["x", value, f"--db={value}", f"DB={value}"]) == ["x", shown, f"--db={shown}", f"DB={shown}"]
    declared = [secret_values({"X_URL": value}), secret_values({}, ["--db", value]), secret_arg_values({"--db": value})]
    if password is None:
        assert declared == [set(), set(), set()]
        return
    assert all(password in d for d in declared)
    assert mask_text(f"login failed for {password}!", declared[0]) == f"login failed for {MASK}!"
    shell = "env X='" + value.replace("'", "'\"'\"'") + "' sh -c true"  # as a shell command line quotes it
    assert password not in mask_text(shell, declared[0]).replace("'\"'\"'", "'") and MASK in mask_text(
        shell, declared[0]
    )
    assert json.dumps(password)[1:-1] not in mask_text(json.dumps({"X": value}), declared[0])  # a JSON text


def test_free_text_keeps_the_token_rule():
    """A URL inside free text ends at a space or quote (it cannot know where a value ends): only a whole value
    reads to its last `@`."""
    assert mask_text("see http://h/x and mail ops@example.com") == "see http://h/x and mail ops@example.com"
    assert mask_env({"NOTE": "see http://h/x, ops@example.com"}) == {"NOTE": "see http://h/x, ops@example.com"}
    assert mask_env({"U": "http://h/x, ops@example.com"}) == {"U": f"http://{MASK}@example.com"}  # a whole value
    # a password with a quote in free text is scrubbed as the declared secret its whole value made it
    assert "QUOTEPW1" not in mask_text(f"redis said: {QUOTED} refused", secret_values({"Q_URL": QUOTED}))


def test_every_json_document_masks_url_passwords():
    @dataclasses.dataclass
    class Observed:
        env: dict[str, str]
        note: str

    doc = to_data(Observed({"RT_URL": URL}, f"connect to {URL} failed"))
    assert PASSWORD not in json.dumps(doc) and doc["env"]["RT_URL"] == f"http://user:{MASK}@127.0.0.1:9/x"
    data = embedded_default().dump()
    data["roles"]["decode"][0]["env"]["RT_URL"] = URL
    assert PASSWORD not in json.dumps(to_data(parse_inventory(data, "t.yaml")))  # a msgspec model too


# ---- end to end, with the bundled local inventory: the reproduction's outputs


@pytest.fixture
def inv(tmp_path, monkeypatch) -> Path:
    data = local_inventory(tmp_path, monkeypatch)
    data["roles"]["decode"][0]["env"]["RT_URL"] = URL
    data["roles"]["decode"][0]["env"]["REDIS_URL"] = SLASHED  # a password with a raw `/`
    data["roles"]["prefill"][0]["env"]["HTTPS_PROXY"] = "http://tok3n-only-value@proxy:3128"  # the variant
    # a raw quote or space in a password (third red-team pass): a whole value's userinfo runs to its last `@`
    data["roles"]["decode"][0]["env"]["Q_URL"] = QUOTED
    data["roles"]["decode"][0]["env"]["SP_URL"] = SPACED
    data["roles"]["decode"][0]["env"]["LIVE_URL_Q"] = "http://u:DECLQ'PW7272@h/x"
    data["roles"]["router"][0]["args"]["--redis-url"] = "redis://u:FLAG'PW8383@h/0"
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _leaks(text: str) -> bool:
    words = ("tok3n-only-value", "ef9Zslash", "QUOTEPW1", "SPACEPW22", "PW7272", "PW8383", "LIVEQ")
    return PASSWORD in text or any(w in text for w in words)


@pytest.mark.parametrize(
    "command",
    [["render"], ["render", "--json"], ["deploy", "--dry-run"], ["deploy", "--dry-run", "--json"]],
)
def test_render_and_deploy_dry_run_mask_the_url_password(inv, command):
    r = CliRunner().invoke(app, [*command, "-i", str(inv)])
    assert r.exit_code == 0, r.output
    assert not _leaks(r.output) and f"user:{MASK}@127.0.0.1" in r.output
    assert f"http://{MASK}@proxy:3128" in r.output and f"redis://default:{MASK}@h:6379/0" in r.output
    assert f"postgres://app:{MASK}@db/x" in r.output and f"redis://u:{MASK}@h/0" in r.output


def test_live_env_in_final_health_and_the_watch_is_masked(inv, tmp_path):
    """A real process with the URL in its environment, found by the pidfile pdctl would have written: final-health
    reads /proc/PID/environ and judges it (the live password differs from the declared one: a drift naming both)."""
    live = URL.replace(PASSWORD, "hunter2live")
    live_env = {"RT_URL": live, "REDIS_URL": "redis://default:li/ve#9Zhash@h:6379/0", "PATH": "/usr/bin:/bin"}
    live_env["LIVE_URL_Q"] = "http://u:LIVEQ'PW6161@h/x"  # a raw quote in the live password (third pass)
    with live_decode(tmp_path, live_env):
        fh = CliRunner().invoke(app, ["verify", "final-health", "-i", str(inv), "--json"])
        doc = json.loads(fh.stdout)
        env_check = [c for c in doc["layers"]["flags"] if c["name"] == "env:RT_URL"]
        assert env_check and env_check[0]["status"] == "fail", fh.stdout  # judged on the real values
        assert env_check[0]["observed"] == f"http://user:{MASK}@127.0.0.1:9/x"
        redis = [c for c in doc["layers"]["flags"] if c["name"] == "env:REDIS_URL"][0]
        assert (
            redis["status"] == "fail" and redis["observed"] == redis["expected"] == f"redis://default:{MASK}@h:6379/0"
        )
        quoted = [c for c in doc["layers"]["flags"] if c["name"] == "env:LIVE_URL_Q"][0]
        assert quoted["status"] == "fail" and quoted["observed"] == quoted["expected"] == f"http://u:{MASK}@h/x"
        watch = CliRunner().invoke(app, ["watch", "-i", str(inv), "--once", "--json"])
        for out in (fh.stdout, watch.stdout):
            assert not _leaks(out) and "hunter2live" not in out and "9Zhash" not in out
        assert "env:RT_URL" in watch.stdout
        # the screens built from the same results (the judge's texts): final-health -v, its reports, the watch's lines
        shown = [
            CliRunner().invoke(app, ["verify", "final-health", "-i", str(inv), "-v"]).output,
            CliRunner().invoke(app, ["watch", "-i", str(inv), "--once"]).output,
        ]
        for suffix in ("html", "svg"):
            report = tmp_path / f"report.{suffix}"
            CliRunner().invoke(app, ["verify", "final-health", "-i", str(inv), "-v", "--report", str(report)])
            shown.append(report.read_text())
        assert "env:RT_URL" in shown[0] and f"user:{MASK}@127.0.0.1" in shown[0]
        for out in shown:
            assert not _leaks(out) and "hunter2live" not in out and "9Zhash" not in out


def test_a_playbook_run_its_audit_record_and_history_mask_a_url(inv, tmp_path):
    """A shell step that prints a URL from its env: the step's output, the --json document, the audit log and
    `history --json` show it masked."""
    pb = tmp_path / "pb.yaml"
    step = {"role": "decode", "command": 'echo "proxy: $P"; echo "$P" >&2; exit 3', "env": {"P": URL}}
    pb.write_text(yaml.safe_dump({"name": "u", "steps": [{"name": "s", "action": "shell", "args": step}]}))
    r = CliRunner().invoke(app, ["run", str(pb), "-i", str(inv), "--json"])
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["steps"][0]["result"]["stdout"] == f"proxy: http://user:{MASK}@127.0.0.1:9/x\n"
    history = CliRunner().invoke(app, ["history", "--json"])
    assert history.exit_code == 0 and "run u" in history.stdout
    for out in (r.output, (tmp_path / "audit.jsonl").read_text(), history.stdout):
        assert not _leaks(out)


def test_an_audit_record_written_before_urls_were_masked_is_masked_when_history_reads_it(tmp_path, monkeypatch):
    """A record appended raw (by a pdctl before this fix) still holds the password: `history --json` masks it on
    read, in a field and in a line too damaged to parse."""
    import json

    from typer.testing import CliRunner

    from pdctl.cli.app import app

    log = tmp_path / "audit.jsonl"
    old = {"ts": "2026-12-01T10:00:00+00:00", "action": "deploy", "inventory": "inv.yaml", "result": "ok",
           "exit_code": 0, "args": {"env": "RT_URL=http://svc:hunter2pass@10.0.0.9:6379/0"}}  # fmt: skip
    log.write_text(json.dumps(old) + "\n" + '{"torn": "https://tok3n@h/x\n')
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    r = CliRunner().invoke(app, ["history", "--json"])
    assert "hunter2pass" not in r.output and "tok3n" not in r.output, r.output
    doc = json.loads(r.output)
    assert doc["records"][0]["args"]["env"] == "RT_URL=http://svc:***@10.0.0.9:6379/0"
    assert doc["records"][1]["corrupt"].startswith('{"torn": "https://***@h')


def test_a_var_holding_a_url_with_a_quote_in_its_password_is_masked_in_a_run(inv, tmp_path):
    """`--var "c=redis://u:VAR'PW999@h/x"` (a var whose name is not secret-looking): the plan, the command line as
    sent, the step's output, --json and the audit record show its password masked (third red-team pass)."""
    pb = tmp_path / "pb.yaml"
    step = {"role": "decode", "command": 'echo "url ${c}"; echo "${c}" | sed "s/.*://; s/@.*//"'}
    pb.write_text(
        yaml.safe_dump({"name": "v", "vars": {"c": "x"}, "steps": [{"name": "s", "action": "shell", "args": step}]})
    )
    r = CliRunner().invoke(app, ["run", str(pb), "-i", str(inv), "--json", "--var", "c=redis://u:VAR'PW999@h/x"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["steps"][0]["result"]["stdout"] == f"url redis://u:{MASK}@h/x\n{MASK}\n"
    for out in (r.output, (tmp_path / "audit.jsonl").read_text()):
        assert "PW999" not in out
    assert doc["plan"]["vars"]["c"] == f"redis://u:{MASK}@h/x"
