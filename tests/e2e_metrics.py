#!/usr/bin/env python3
"""e2e_metrics.py: /metrics of a live server, after key-value and HTTP traffic, passes
`promtool check metrics` (Debian package prometheus) without a complaint, has HELP and
TYPE on every family, and carries the families tests and dashboards read, the standard
process_* ones included, with values that match what was done."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import HttpServer, Http, check, run_suite  # noqa
from hanukv import Conn, NONE, OK  # noqa

FAMILIES = [
    "hanudb_http_requests_total", "hanudb_http_request_duration_seconds", "hanudb_http_parked_writes",
    "hanudb_idempotency_keys_expired_total", "hanudb_expired_documents_total", "hanudb_kv_requests_total", "hanudb_errors_total",
    "hanudb_kv_connections", "hanudb_kv_connections_total", "hanudb_waiters", "hanudb_txn",
    "hanudb_durable_txn", "hanudb_log_bytes_written_total", "hanudb_log_prealloc_bytes_total",
    "hanudb_syncs_total", "hanudb_keys", "hanudb_collections", "hanudb_disk_bytes", "hanudb_log_files",
    "hanudb_floor_txn", "hanudb_watermark_txn", "hanudb_keydir_bytes", "hanudb_compactions_total",
    "hanudb_compaction_lock_max_seconds", "hanudb_store_failed",
    "process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
    "process_open_fds", "process_max_fds", "process_start_time_seconds",
]


def samples(text):
    """name{labels} -> value, for every sample line."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def run(tmp):
    promtool = shutil.which("promtool")
    check(promtool, "promtool is missing: install the Debian package prometheus (scripts/install-deps.sh)")
    srv = HttpServer(os.path.join(tmp, "data"))
    srv.start()
    before = time.time()
    kv = Conn(srv.port)
    for i in range(20):
        st, _ = kv.set(b"k%d" % i, b"v", flags=NONE if i % 2 else 0)
        check(st == OK, "kv set answered %d" % st)
    h = Http(srv.http_port)
    st, _, _ = h.call("PUT", "/c/people")
    check(st in (200, 201), "create collection: %d" % st)
    for i in range(5):
        st, _, _ = h.call("PUT", "/c/people/docs/p%d" % i, {"n": i})
        check(st in (200, 201), "put: %d" % st)
    st, _, _ = h.call("GET", "/c/people/docs/nope")
    check(st == 404, "missing document: %d" % st)
    st, _, _ = h.call("GET", "/_console")
    check(st == 308, "the console's redirect: %d" % st)
    st, hdr, body = h.call("GET", "/metrics")
    check(st == 200 and hdr["content-type"].startswith("text/plain"), "metrics: %d %s" % (st, hdr))
    text = body.decode()

    p = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True)
    complaints = (p.stdout + p.stderr).decode().strip()
    check(p.returncode == 0 and not complaints, "promtool exit %d: %s" % (p.returncode, complaints))

    helps = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    for f in FAMILIES:
        check(f in helps and f in types, "family %s has no HELP or TYPE" % f)
    check(helps == set(types), "HELP and TYPE differ: %s" % (helps ^ set(types)))

    s = samples(text)
    # the 20 sets and the Ping by which Server.start saw the server ready
    check(s["hanudb_kv_requests_total"] == 21, "kv requests %s" % s["hanudb_kv_requests_total"])
    check(s["hanudb_kv_connections"] == 1, "kv connections %s" % s["hanudb_kv_connections"])
    check(s['hanudb_http_requests_total{route="doc_put",status="201"}'] == 5, "doc_put 201 count")
    check(s['hanudb_http_requests_total{route="doc_get",status="404"}'] == 1, "doc_get 404 count")
    # every status the server answers has its own label (308 was counted as status="0")
    check(s.get('hanudb_http_requests_total{route="other",status="308"}') == 1, "the 308 is counted as 308")
    check('status="0"' not in text, "no status 0 label")
    check(s["hanudb_keys"] == 25, "keys %s" % s["hanudb_keys"])
    check(s["hanudb_waiters"] == 0 and s["hanudb_http_parked_writes"] == 0, "nothing is held")
    check(s["hanudb_durable_txn"] == s["hanudb_txn"], "the last write waited for `local`: every txn is durable")
    check(s["process_open_fds"] > 3 and s["process_open_fds"] <= s["process_max_fds"], "open fds")
    check(s["process_resident_memory_bytes"] > 1 << 20, "resident memory")
    check(s["process_virtual_memory_bytes"] >= s["process_resident_memory_bytes"], "virtual memory")
    check(s["process_cpu_seconds_total"] > 0, "cpu seconds")
    check(before - 60 < s["process_start_time_seconds"] <= time.time() + 1, "start time %s vs %s"
          % (s["process_start_time_seconds"], before))
    kv.close()
    srv.stop()
    return 0


if __name__ == "__main__":
    run_suite("hanudb-metrics-", run, [])
    print("ok   /metrics passes promtool check metrics with every family")
