"""Playbooks: on-call runbooks as YAML that `pdctl run` executes step by step, gated, audited.

schema.py  the pydantic models and the YAML loader (errors name the file, the step and the field)
vars.py    `${...}` substitution from the inventory, the playbook's vars and `--var k=v`
steps.py   the registry of step kinds (verify, restart, deploy, storm, triage, inflight, wait, shell) and gates
runner.py  runs the steps: gates, on_failure stop|continue|{run: handler}, `when`, the audit record
"""
