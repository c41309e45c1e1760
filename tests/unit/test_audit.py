"""The audit log: one valid JSON line per record, secrets masked, concurrent writers never interleave."""

import json
import multiprocessing as mp
import time

from pdctl import audit


def _writer(path, n, tag):
    for k in range(n):
        audit.append("test", inventory="inv", args={"k": k, "tag": tag, "pad": "x" * 5000}, result="ok",
                     started=time.time(), path=path)


def test_concurrent_writers_leave_one_valid_line_each(tmp_path):
    path = tmp_path / "audit.jsonl"
    procs = [mp.Process(target=_writer, args=(path, 50, t)) for t in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    lines = path.read_text().splitlines()
    assert len(lines) == 200
    recs = [json.loads(line) for line in lines]
    assert sorted((r["args"]["tag"], r["args"]["k"]) for r in recs) == sorted((t, k) for t in range(4) for k in range(50))


def test_env_is_masked(tmp_path):
    path = tmp_path / "a.jsonl"
    audit.append("deploy", inventory="i", result="ok", started=time.time(), path=path,
                 extra={"roles": [{"env": {"HF_TOKEN": "hf_abc", "PLAIN": "1"}}]})
    text = path.read_text()
    assert "hf_abc" not in text
    rec = audit.read_records(path)[0]
    assert rec["roles"][0]["env"]["PLAIN"] == "1"
