"""Playbooks: on-call runbooks as YAML that `pdctl run` executes step by step, gated, audited.

schema.py   the msgspec Structs and the YAML loader (errors name the file, the step and the field)
vars.py     `${...}` substitution from the inventory, the playbook's vars and `--var k=v`
kinds/      the step kinds (verify, restart, deploy, storm, triage, inflight, wait, shell), one self-registering
            module each; a new kind is one new file there
steps.py    what the kinds share: args checking, running a kind, outcomes from errors and final-health reports
gates.py    what result of a step lets the run go on
outcome.py  the small shared types: StepOutcome, StepKind, RunContext
runner.py   runs the steps: gates, on_failure stop|continue|{run: handler}, `when`, the audit record
"""
