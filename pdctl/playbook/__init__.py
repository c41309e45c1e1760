"""Playbooks: on-call runbooks as YAML that `pdctl run` executes step by step, gated, audited.

schema.py   the msgspec Structs and the YAML loader (errors name the file, the step and the field)
vars.py     `${...}` substitution from the inventory, the playbook's vars and `--var k=v`
kinds/      the step kinds (verify, restart, deploy, storm, triage, inflight, wait, shell), one self-registering
            module each; a new kind is one new file there
steps.py    what the kinds share: args checking, running a kind, outcomes from errors and final-health reports
gates.py    what result of a step lets the run go on (a typed Gate)
outcome.py  the small shared types: StepOutcome, StepKind, Args, RunContext, Data (YAML values)
planning.py the plan: vars substituted, every step's args and gate checked with their values, `when` evaluated
runner.py   runs the plan: gates, on_failure stop|continue|{run: handler}, Ctrl-C, the audit records (run_audit.py)
run_result.py  what a run did: StepRun, RunResult (the --json document)
"""
