"""The bucket audit run by the server (docs/API.md, "POST /_admin/audit"): before
any, `bucket.audit` of /_status says "never"; on a healthy file:// bucket (segments
and a snapshot manifest) POST /_admin/audit answers 202 while it runs (its gets are
slowed by --bucket-latency-get-ms), a second POST meanwhile is 409 audit_running,
and /_status ends at "ok" with exactly the segments, manifests, files and bytes the
bucket holds and the records `hanudb audit` counts; /metrics says
hanudb_bucket_audit_ok 1 and counts the route's 202 and 409. One flipped byte in a segment object: the next audit
ends "failed" naming that object (as `hanudb audit` does) and the gauge is 0. A
follower of the bucket runs it too (`bucket` of its /_status holds only `audit`); a
read-only token is 403. A stop
during an audit ends it and exits 0; without a bucket the route is 409 no_bucket."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import BIN, check  # noqa
from hanuhttp import HttpServer, Http, error_code


def status(h):
    st, _, body = h.json("GET", "/_status")
    check(st == 200, "status %d" % st)
    return body


def metric(h, name):
    st, _, data = h.call("GET", "/metrics")
    check(st == 200, "metrics %d" % st)
    m = re.search(r"^%s (\S+)$" % name, data.decode(), re.M)
    return m.group(1) if m else None


def wait_done(h, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        a = status(h)["bucket"]["audit"]
        if a["state"] != "running":
            return a
        time.sleep(0.05)
    raise AssertionError("the audit did not end: %r" % a)


def cli_audit(bdir):
    r = subprocess.run([BIN, "audit", "--bucket", "file://" + bdir], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def sizes(d):
    return {n: os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)} if os.path.isdir(d) else {}


def healthy(srv, h, bdir):
    a = status(h)["bucket"]["audit"]
    check(a["state"] == "never" and a["started_ms"] == 0 and "problem" not in a, "before any audit: %r" % a)
    check(metric(h, "hanudb_bucket_audit_running") == "0" and metric(h, "hanudb_bucket_audit_ok") is None,
          "metrics before any audit")
    for batch in range(4):   # each batch waits for its segment: at least four segments
        ops = [{"op": "put", "id": "p%d-%d" % (batch, i), "doc": {"n": i, "batch": batch, "text": "x" * (i * 7)}}
               for i in range(25)]
        st, _, body = h.json("POST", "/c/people/_batch?durability=bucket", {"ops": ops})
        check(st == 200, "batch: %d %r" % (st, body))
    st, _, snap = h.json("POST", "/_admin/snapshot")
    check(st == 200, "snapshot: %d %r" % (st, snap))
    # Everything sealed: the audit sees a chain nothing is appended to meanwhile.
    deadline = time.time() + 10
    while status(h)["bucket"]["sealed_txn"] < status(h)["txn"] and time.time() < deadline:
        time.sleep(0.05)
    st, _, a = h.json("POST", "/_admin/audit")
    check(st == 202 and a["state"] == "running" and a["started_ms"] > 0 and a["finished_ms"] == 0,
          "POST /_admin/audit: %d %r" % (st, a))
    st, _, again = h.json("POST", "/_admin/audit")
    check(st == 409 and error_code(again) == "audit_running", "a second audit meanwhile: %d %r" % (st, again))
    check(status(h)["bucket"]["audit"]["state"] == "running", "/_status while it runs")
    check(metric(h, "hanudb_bucket_audit_running") == "1", "the running gauge")
    a = wait_done(h)
    segs, files = sizes(os.path.join(bdir, "segments")), sizes(os.path.join(bdir, "files"))
    mans = os.listdir(os.path.join(bdir, "manifests"))
    check(len(segs) >= 4 and len(mans) == 1, "the bucket: %d segments, %d manifests" % (len(segs), len(mans)))
    code, out = cli_audit(bdir)
    m = re.search(r"chain ok: (\d+) segments, (\d+) records", out)
    check(code == 0 and m and int(m.group(1)) == len(segs), "hanudb audit: %d %s" % (code, out))
    want = {"state": "ok", "segments": len(segs), "segments_total": len(segs), "manifests": 1,
            "files": len(files), "records": int(m.group(2)),
            "bytes": sum(segs.values()) + sum(files.values())}
    got = {k: a.get(k) for k in want}
    check(got == want, "the audit's counts %r, wanted %r" % (got, want))
    check(a["finished_ms"] >= a["started_ms"] > 0 and "problem" not in a, "times: %r" % a)
    check(metric(h, "hanudb_bucket_audit_ok") == "1" and metric(h, "hanudb_bucket_audit_running") == "0",
          "metrics after a passed audit")
    check(metric(h, r'hanudb_http_requests_total\{route="audit",status="202"\}') == "1" and
          metric(h, r'hanudb_http_requests_total\{route="audit",status="409"\}') == "1", "the route's counters")
    return sorted(segs)


def on_follower(tmp, bdir, segs):
    """A follower of the same bucket runs it too (it only reads); a read-only token may not."""
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("reader-token-1 ro *\nwriter-token-1 rw *\n")
    fol = HttpServer(os.path.join(tmp, "data-follower"), ["--bucket", "file://" + bdir, "--follow",
                                                          "--poll-ms", "100", "--tokens", tokens])
    fol.start()
    ro, rw = Http(fol.http_port, token="reader-token-1"), Http(fol.http_port, token="writer-token-1")
    try:
        st, _, body = ro.json("POST", "/_admin/audit")
        check(st == 403 and error_code(body) == "forbidden", "a read-only token: %d %r" % (st, body))
        st, _, a = rw.json("POST", "/_admin/audit")
        check(st == 202, "on a follower: %d %r" % (st, a))
        a = wait_done(rw)
        s = status(rw)
        check(s["role"] == "follower" and list(s["bucket"]) == ["audit"], "a follower's bucket: %r" % s["bucket"])
        check(a["state"] == "ok" and a["segments"] == len(segs) and a["manifests"] == 1,
              "the follower's audit: %r" % a)
    finally:
        ro.close()
        rw.close()
        fol.stop()


def damaged(srv, h, bdir, segs):
    name = segs[len(segs) // 2]   # one in the middle of the chain
    path = os.path.join(bdir, "segments", name)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    st, _, a = h.json("POST", "/_admin/audit")
    check(st == 202, "POST /_admin/audit: %d %r" % (st, a))
    a = wait_done(h)
    p = a.get("problem") or {}
    check(a["state"] == "failed" and p.get("object") == "segments/" + name and p.get("reason"),
          "the damaged segment is named: %r" % a)
    check(a["segments"] == len(segs) // 2, "checked up to it: %r" % a)
    code, out = cli_audit(bdir)
    check(code == 1 and ("segments/%s: %s" % (name, p["reason"])) in out, "hanudb audit agrees: %d %s" % (code, out))
    check(metric(h, "hanudb_bucket_audit_ok") == "0", "the gauge after a failed audit")


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-e2e-audit-")
    bdir = os.path.join(tmp, "bucket")
    srv = HttpServer(os.path.join(tmp, "data"), ["--bucket", "file://" + bdir, "--seal-interval-ms", "20",
                                                 "--bucket-latency-get-ms", "60"])
    srv.start()
    h = Http(srv.http_port)
    try:
        segs = healthy(srv, h, bdir)
        print("ok   a healthy bucket: 202, 409 while it runs, then ok with the exact counts of the bucket")
        on_follower(tmp, bdir, segs)
        print("ok   a follower audits the same bucket; a read-only token is 403")
        damaged(srv, h, bdir, segs)
        print("ok   a flipped byte in a segment: failed, naming the object, as hanudb audit does")
        st, _, a = h.json("POST", "/_admin/audit")
        check(st == 202 and a["state"] == "running", "another audit: %d %r" % (st, a))
        t0 = time.time()
        code = srv.stop()
        check(code == 0 and time.time() - t0 < 10, "a stop during an audit: exit %r after %.1fs" % (code, time.time() - t0))
        print("ok   a stop during an audit ends it, exit 0")
    finally:
        h.close()
        srv.kill()
    plain = HttpServer(os.path.join(tmp, "data-plain"), ["--no-bucket"])
    plain.start()
    h = Http(plain.http_port)
    try:
        st, _, body = h.json("POST", "/_admin/audit")
        check(st == 409 and error_code(body) == "no_bucket", "without a bucket: %d %r" % (st, body))
        check("bucket" not in status(h), "no bucket in /_status")
        print("ok   without a bucket: 409 no_bucket")
    finally:
        h.close()
        plain.kill()


if __name__ == "__main__":
    main()
