"""A `${...}` in a playbook shell command reaches the shell as data in any quotes (issue 28, S1): each becomes a
reference to an environment variable (`shell_refs`); a context where that cannot hold is refused at load. Run by the
real dash and bash, and end to end through `pdctl run` with a `--var` and an inventory value."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.inventory import embedded_default
from pdctl.playbook.shell_refs import Where, bind_refs, find_refs, refused_refs
from pdctl.playbook.vars import VarError

SHELLS = [s for s in ("/bin/sh", shutil.which("dash"), shutil.which("bash")) if s]


def _evil(tmp_path) -> str:
    """A value that runs `touch` in every way a shell could be tricked into it, plus what quoting breaks on."""
    f = tmp_path / "pwned"
    return f"$(touch {f}) `touch {f}` '; touch {f}; ' \"; touch {f}; \" \\ * {{a,b}} $HOME\n2nd line"


def _run_bound(shell: str, command: str, value: str) -> str:
    text, env = bind_refs(command, lambda _name: value)
    r = subprocess.run([shell, "-c", text], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True)
    assert r.returncode == 0, (text, r.stderr)
    return r.stdout


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    "command, want",
    [
        ("printf %s ${msg}", "{v}"),  # unquoted: one word, not split, not globbed
        ('printf %s "in double quotes: ${msg}"', "in double quotes: {v}"),  # the reproduction
        ("printf %s 'in single quotes: ${msg}'", "in single quotes: {v}"),
        ('printf %s "$(printf %s ${msg})"', "{v}"),  # unquoted inside $(...) inside double quotes
        ('printf %s "a $(printf "%s" "<${msg}>") b"', "a <{v}> b"),
        ('printf %s "`printf %s ${msg}`"x', "{v}x"),
        ('x=`printf %s ${msg}`; printf %s "$x"', "{v}"),
        ("printf %s ${msg}${msg}", "{v}{v}"),
        ('printf %s x # don\'t ${msg}\nprintf %s "${msg}"', "x{v}"),  # a comment's apostrophe opens no quote
        ('printf %s x;# don\'t ${msg}\nprintf %s "${msg}"', "x{v}"),  # a `#` after `;` begins a word: a comment
        ("(printf %s x)#'\nprintf %s ${msg}", "x{v}"),  # after `)` too
        ("cat <<EOF\nbody ${msg} don't\nEOF\nprintf %s '${msg}'", "body {v} don't\n{v}"),
        # next to the arithmetic contexts refused below, what stays data
        ('printf %s "[${msg}]"', "[{v}]"),  # brackets of text, not a subscript
        ("[ -n ${msg} ] && printf %s ${msg}", "{v}"),  # test's operands are strings ([ -eq ] too, unlike [[ ]])
        ('printf %s "$${PATH:+h}" ${msg}', "h{v}"),  # the shell's own ${...} beside a value
        ('v=${msg}; printf %s "$v"', "{v}"),
    ],
)
def test_a_value_is_data_in_every_quoting_context(tmp_path, shell, command, want):
    v = _evil(tmp_path)
    assert _run_bound(shell, command, v) == want.format(v=v)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    "command, where",
    [
        ("echo $((${n} + 1))", Where.ARITH),
        ("(( ${n} > 1 )) && echo big", Where.ARITH),
        ("echo $'tab\\t${n}'", Where.ANSI_C),
        ("cat <<'EOF'\n${n}\nEOF", Where.QUOTED_HEREDOC),
        ('echo "\\${n}"', Where.ESCAPED),
    ],
)
def test_a_context_that_would_evaluate_or_not_expand_the_value_is_refused(command, where):
    assert [r.where for r in find_refs(command)] == [where]
    assert refused_refs(command) and "${n}" in refused_refs(command)[0]
    with pytest.raises(VarError, match="cannot be passed there as data"):
        bind_refs(command, lambda _n: "1")


BASH = shutil.which("bash")

# Where /bin/sh is bash (RHEL, Fedora), each of these runs the value's `a[$(cmd)]` when the `${msg}` is sent as the
# reference its quotes take (the third column: "${V}" unquoted, ${V} inside double quotes, '"${V}"' inside single
# quotes): bash evaluates the context arithmetically, and an array subscript in the variable's text runs its command
# substitution. (Reproductions of the second red-team pass, and variants.)
PLAIN, DOUBLE, SINGLE = '"${V}"', "${V}", "'\"${V}\"'"
BASH_EVALUATES = [
    ("a[${msg}]=1; echo sub", Where.SUBSCRIPT, PLAIN),  # the reproduction
    ('a=(1); unset "a[${msg}]"', Where.SUBSCRIPT, DOUBLE),  # a name argument: quotes do not help
    ("a=(1); unset 'a[${msg}]'", Where.SUBSCRIPT, SINGLE),
    ('printf -v "a[${msg}]" %s x', Where.SUBSCRIPT, DOUBLE),
    ("a=([${msg}]=1)", Where.SUBSCRIPT, PLAIN),  # a compound assignment's key
    ("a[$(printf %s ${msg})]=1", Where.SUBSCRIPT, PLAIN),  # what a $(...) prints into a subscript
    ("echo $[ ${msg} ]", Where.ARITH, PLAIN),
    ('echo "$[ ${msg} ]"', Where.ARITH, DOUBLE),
    ("x=abc; echo ${x:${msg}}", Where.NESTED, PLAIN),  # an offset
    ('x=abc; echo "${x:1:${msg}}"', Where.NESTED, DOUBLE),  # a length, inside double quotes
    ("x=(1 2); echo ${x[${msg}]}", Where.NESTED, PLAIN),  # a subscript of another ${...}
    ('x=(1 2); echo "${x[${msg}]}"', Where.NESTED, DOUBLE),
    ("x=(1 2); echo $${x[${msg}]}", Where.NESTED, PLAIN),  # the shell's own ${ written as $${
    ("let n=${msg}", Where.ARITH, PLAIN),
    ('let "n = ${msg}"', Where.ARITH, DOUBLE),
    ("declare -i n=${msg}", Where.ARITH, PLAIN),
    ("f() { local -i n=${msg}; }; f", Where.ARITH, PLAIN),
    ("[[ ${msg} -eq 1 ]]", Where.ARITH, PLAIN),
    ('[[ 1 -lt "${msg}" ]] || echo no', Where.ARITH, DOUBLE),
    ("echo $(( $(printf %s ${msg}) ))", Where.ARITH, PLAIN),  # what a $(...) prints into arithmetic
    # a `#` glued to a word is no comment (third red-team pass): what follows it on the line is code
    ("echo 'x'#$((\n${msg} ))", Where.ARITH, PLAIN),  # the reproduction: bash printed x#0 and ran the value
    ("echo $'x'#$((\n${msg} ))", Where.ARITH, PLAIN),
    ("echo $((1))#$((\n${msg} ))", Where.ARITH, PLAIN),
    ("echo $(true )#$((\n${msg} ))", Where.ARITH, PLAIN),
    ('echo "x"#$((\n${msg} ))', Where.ARITH, PLAIN),  # variants: double quotes, backticks, a ref, a subshell
    ("echo `true`#$((\n${msg} ))", Where.ARITH, PLAIN),
    ("echo $${HOME}#$((\n${msg} ))", Where.ARITH, PLAIN),
    ("(echo $(echo 'x'#$((\n${msg} ))))", Where.ARITH, PLAIN),
    ("echo a \\\n#'\necho $((${msg}))\n#'", Where.ARITH, PLAIN),  # `\<newline>` joins lines: `#` begins a word
]


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize("command, where, reference", BASH_EVALUATES)
def test_every_context_bash_evaluates_arithmetically_is_refused(tmp_path, command, where, reference):
    """Real bash runs the value in each of these as a reference would send it (so the list holds only real
    dangers); each is refused, so a playbook holding it never loads."""
    f = tmp_path / "pwned"
    value = f"a[$(touch {f})]"
    sent = command.replace("${msg}", reference).replace("$${", "${")
    assert BASH is not None
    subprocess.run([BASH, "-c", sent], env={"PATH": "/usr/bin:/bin", "V": value}, capture_output=True, check=False)
    assert f.exists(), f"bash did not run the value in {sent!r}: not a danger this test shows"
    assert [r.where for r in find_refs(command)] == [where]
    with pytest.raises(VarError, match="cannot be passed there as data"):
        bind_refs(command, lambda _n: value)


# A quoted argument of declare and its kin is re-parsed by bash as an array assignment, `(...)` and all (third
# red-team pass): each runs the value under bash as its reference would send it (value, reference), so it is refused.
BASH_REPARSES = [
    ('declare -a "arr=(${msg})"', "a[$(touch {f})]", DOUBLE),  # the reproduction
    ("declare -a arr=${msg}", "($(touch {f}))", PLAIN),  # a value that is itself `(...)`
    ("typeset -A 'arr=(${msg})'", "[$(touch {f})]=1", SINGLE),
    ('f() { local -a "a=(${msg})"; }; f', "$(touch {f})", DOUBLE),
    ("readonly -a arr=${msg}", "($(touch {f}))", PLAIN),
    ('declare -a arr; declare "arr=${msg}"', "($(touch {f}))", DOUBLE),  # no option: arr is an array already
    ('o=-a; declare $o "arr=${msg}"', "($(touch {f}))", DOUBLE),  # an option pdctl cannot see
    ('command declare -a "arr=$(printf %s ${msg})"', "($(touch {f}))", PLAIN),  # what a $(...) prints into it
]


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize("command, value, reference", BASH_REPARSES)
def test_an_argument_of_declare_and_its_kin_is_refused(tmp_path, command, value, reference):
    f = tmp_path / "pwned"
    value = value.format(f=f)
    sent = command.replace("${msg}", reference).replace("$${", "${")
    assert BASH is not None
    subprocess.run([BASH, "-c", sent], env={"PATH": "/usr/bin:/bin", "V": value}, capture_output=True, check=False)
    assert f.exists(), f"bash did not run the value in {sent!r}: not a danger this test shows"
    assert [r.where for r in find_refs(command)] == [Where.DECLARE]
    with pytest.raises(VarError, match="cannot be passed there as data"):
        bind_refs(command, lambda _n: value)


@pytest.mark.parametrize(
    "command, where",
    [
        ('export "X=${msg}"', Where.DECLARE),  # export too: older bash versions differ, and it is one family
        ("declare -i n=${msg}", Where.ARITH),  # -i: arithmetic first
        ('echo "$${x:-${msg}}"', Where.NESTED),  # a default word is not arithmetic, but nested: refused anyway
        ("cat <<EOF\n$${x:1:${msg}}\nEOF", Where.NESTED),
        ('echo $${x:-"a}" ${msg}"}', Where.NESTED),  # a quoted brace does not end the ${...}
        ('a["]"${msg}]=1', Where.SUBSCRIPT),  # bash skips a quoted ] in a subscript
        ("x=$(echo $((1 + $(echo ${msg}))))", Where.ARITH),
        ("[[ ${msg} == x && $$n -ge 1 ]]", Where.ARITH),  # the whole [[ ]] once it compares numbers
    ],
)
def test_a_ref_nested_in_a_context_bash_may_evaluate_is_refused(command, where):
    assert [r.where for r in find_refs(command)] == [where]
    assert refused_refs(command)


@pytest.mark.parametrize(
    "command, wheres",
    [
        ("a[1]=${msg}", [Where.PLAIN]),  # an element's value is not its subscript
        ('echo "[${msg}]" [ ${msg} ]', [Where.DOUBLE, Where.PLAIN]),
        ("[[ ${msg} == x* ]]", [Where.PLAIN]),  # a string comparison
        ("let n=1; echo ${msg}", [Where.PLAIN]),  # let ends with its command
        ("echo $$((1)) $${x:-a} $[1] ${msg}", [Where.PLAIN]),  # the shell's own, closed before the ref
        ("x=${msg}; export x; declare -a a", [Where.PLAIN]),  # declare's command ends at `;`
        ("echo 'x' # $((\n${msg}", [Where.PLAIN]),  # a `#` after a blank is a comment
        ("((1))#$((\n${msg}", [Where.PLAIN]),  # and after `))` ends a command
    ],
)
def test_what_bash_does_not_evaluate_stays_data(command, wheres):
    assert [r.where for r in find_refs(command)] == wheres


def test_names_are_prefixed_shared_by_one_ref_and_kept_apart_from_the_steps_env():
    values = {"inventory.name": "x", "msg": "y", "vars.msg": "y"}
    text, env = bind_refs('echo ${inventory.name} "${msg}" ${vars.msg} $${HOME}', values.get, {"PDCTL_VAR_msg"})
    assert env == {"PDCTL_VAR_inventory_name": "x", "PDCTL_VAR_msg_2": "y"}
    assert text == 'echo "${PDCTL_VAR_inventory_name}" "${PDCTL_VAR_msg_2}" "${PDCTL_VAR_msg_2}" ${HOME}'


# ---- end to end: `pdctl run` on this machine (shell steps need no engine)


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    return tmp_path


def _playbook(tmp_path, steps) -> str:
    p = tmp_path / "pb.yaml"
    p.write_text(yaml.safe_dump({"name": "s1", "vars": {"msg": "x"}, "steps": steps}, sort_keys=False))
    return str(p)


def _shell(name, command):
    return {"name": name, "action": "shell", "args": {"role": "decode", "command": command}}


def test_a_var_in_double_quotes_is_echoed_not_run(env):
    """The reproduction: `echo "in double quotes: ${msg}"` with --var 'msg=$(touch F)'; and its variant polled by
    `wait until` (the args of the step it polls are filled in as that kind's)."""
    f = env / "F"
    until = {"action": "shell", "args": {"role": "decode", "command": "echo \"'${msg}'\""}}
    pb = _playbook(
        env,
        [
            _shell("dq", 'echo "in double quotes: ${msg}"'),
            {"name": "w", "action": "wait", "args": {"until": until, "timeout": 5}},
        ],
    )
    r = CliRunner().invoke(app, ["run", pb, "--json", "--var", f"msg=$(touch {f})`touch {f}`"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["steps"][0]["result"]["stdout"] == f"in double quotes: $(touch {f})`touch {f}`\n"
    assert f"exit 0 on local: '$(touch {f})`touch {f}`'" in doc["steps"][1]["result"]["summary"]
    assert not f.exists()


def test_an_inventory_value_in_quotes_is_echoed_not_run(env):
    f = env / "F"
    data = embedded_default().dump()
    data["served_model_name"] = f"m$(touch {f})`touch {f}`"
    inv = env / "inv.yaml"
    inv.write_text(yaml.safe_dump(data))
    pb = _playbook(env, [_shell("model", "echo \"model='${inventory.served_model_name}'\" 'and ${inventory.name}'")])
    r = CliRunner().invoke(app, ["run", pb, "-i", str(inv), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["steps"][0]["result"]["stdout"] == f"model='m$(touch {f})`touch {f}`' and local\n"
    assert not f.exists()


@pytest.mark.parametrize(
    "command, where",
    [
        ("a[${msg}]=1; echo sub", "array subscript"),  # the reproduction
        ('x=abc; echo "${x:${msg}}"', "inside another ${...}"),
        ("echo $[ ${msg} ]", "arithmetic"),
        ("echo 'x'#$((\n${msg} ))", "arithmetic"),  # a `#` glued to a word: the reproduction of the third pass
        ('declare -a "arr=(${msg})"', "argument of declare"),
    ],
)
def test_an_arithmetic_context_is_refused_at_load_and_nothing_runs(env, command, where):
    """`pdctl run` (not a dry run) with the red team's --var: exit 2 naming the step and field, no step run."""
    f = env / "F"
    pb = _playbook(env, [_shell("first", f"touch {env / 'ran'}"), _shell("sub", command)])
    r = CliRunner().invoke(app, ["run", pb, "--json", "--var", f"msg=a[$(touch {f})]"])
    assert r.exit_code == 2, r.output
    doc = json.loads(r.stdout)
    assert "step 2 'sub', field 'args.command'" in json.dumps(doc) and where in json.dumps(doc)
    assert not f.exists() and not (env / "ran").exists()


def test_a_ref_in_arithmetic_is_refused_at_load_naming_the_step_and_field(env):
    pb = _playbook(env, [_shell("count", "echo $(( ${msg} + 1 ))")])
    r = CliRunner().invoke(app, ["run", pb, "--dry-run", "--var", "msg=a[$(touch x)]"])
    assert r.exit_code == 2, r.output
    assert "step 1 'count', field 'args.command'" in r.output and "arithmetic" in r.output
