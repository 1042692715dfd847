"""`POST /c/{col}/_export` and `hanudb export`: a collection's live documents as
zstd JSON lines in the bucket, read back with DuckDB's read_json
(tests/duckdb/read_export.js, npm @duckdb/node-api): the same count and the same
values as the documents served; every refusal (400, 404, 405, 409, 501); the CLI's
exit statuses. Twin buckets (`serve --bucket A --bucket B`): a write at durability
`bucket` and an export land in both folders; a folder deleted entirely is
re-mirrored at the next start, byte for byte; `hanudb audit` with both buckets
passes, then finds a segment missing from one."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, error_code

DUCKDB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "duckdb")


def read_with_duckdb(path, *columns):
    r = subprocess.run(["node", os.path.join(DUCKDB_DIR, "read_export.js"), path] + list(columns),
                       capture_output=True, timeout=120, cwd=DUCKDB_DIR)
    check(r.returncode == 0, "duckdb read_json of %s: %s" % (path, r.stderr.decode()[-2000:]))
    return json.loads(r.stdout)


def export_cli(port, collection, *extra):
    r = subprocess.run([BIN, "export", "--url", "http://127.0.0.1:%d" % port, "--collection", collection]
                       + list(extra), capture_output=True, timeout=120)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def files_under(root):
    """{relative path: bytes} of every object file (names starting with '.' are the backend's)."""
    out = {}
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for n in names:
            if not n.startswith("."):
                p = os.path.join(d, n)
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = f.read()
    return out


def write_people(h, n):
    """n documents, some changed and some deleted afterwards; the expected live ones."""
    live = {}
    for i in range(n):
        doc = {"name": "person %d" % i, "age": i % 90, "nested": {"x": i * 3}, "note": "caf\u00e9 \u2713"}
        st, _, body = h.json("PUT", "/c/people/docs/p%04d" % i, doc)
        check(st == 201, "put p%04d: %d %r" % (i, st, body))
        live["p%04d" % i] = doc
    # A document sent pretty-printed: stored as sent, exported on one line.
    pretty = '{\n  "name": "pretty",\n  "age": 7,\n  "nested": {"x": -1}\n}'
    st, _, _ = h.call("PUT", "/c/people/docs/p9999", pretty)
    check(st == 201, "put pretty: %d" % st)
    live["p9999"] = json.loads(pretty)
    for i in range(0, n, 10):
        check(h.call("DELETE", "/c/people/docs/p%04d" % i)[0] == 200, "delete p%04d" % i)
        del live["p%04d" % i]
    for i in range(5, n, 10):
        live["p%04d" % i] = dict(live["p%04d" % i], age=200 + i % 50)
        st, _, _ = h.json("PUT", "/c/people/docs/p%04d" % i, live["p%04d" % i])
        check(st == 200, "replace p%04d: %d" % (i, st))
    return live


def check_export(bucket_dir, answer, live):
    key = answer["key"]
    check(key.startswith("exports/people/%d-" % answer["txn"]) and key.endswith(".jsonl.zst"), "key %s" % key)
    path = os.path.join(bucket_dir, key)
    check(os.path.getsize(path) == answer["bytes"], "object size %d, answer %r" % (os.path.getsize(path), answer))
    check(answer["docs"] == len(live), "docs %d, live %d" % (answer["docs"], len(live)))
    got = read_with_duckdb(path, "_id", "name", "age", "nested.x")
    check(got["count"] == len(live), "duckdb count %r, live %d" % (got["count"], len(live)))
    want = [[i, d["name"], str(d["age"]), str(d["nested"]["x"])] for i, d in sorted(live.items())]
    check(got["rows"] == want, "duckdb rows differ: first %r, want %r" % (got["rows"][:2], want[:2]))
    return path


def export_and_refusals(tmp):
    bdir = os.path.join(tmp, "bucket")
    srv = HttpServer(os.path.join(tmp, "data"), ["--bucket", "file://" + bdir, "--seal-interval-ms", "100"])
    srv.start()
    try:
        h = Http(srv.http_port)
        live = write_people(h, 300)
        c = Conn(srv.port)
        check(c.call(OPS["CREATE"], db_field("plainkv"))[0] == OK, "create key-value db")
        st, _, answer = h.json("POST", "/c/people/_export")
        check(st == 200, "export: %d %r" % (st, answer))
        check(set(answer) == {"key", "docs", "bytes", "raw_bytes", "txn", "ms"}, "answer members %r" % answer)
        check_export(bdir, answer, live)

        # The CLI: the same export, printed; then a refusal and no server at all.
        code, out, err = export_cli(srv.http_port, "people")
        check(code == 0, "hanudb export: %d %s" % (code, err))
        cli_answer = json.loads(out)
        check(cli_answer["docs"] == len(live) and cli_answer["key"] != answer["key"], "cli answer %r" % cli_answer)
        check_export(bdir, cli_answer, live)
        code, _, err = export_cli(srv.http_port, "nosuch")
        check(code == 1 and "collection_not_found" in err, "cli, missing collection: %d %s" % (code, err))
        code, _, err = export_cli(free_port(), "people")
        check(code == 2, "cli, nothing listening: %d %s" % (code, err))
        code, _, err = export_cli(srv.http_port, "_bad")
        check(code == 2, "cli, bad name: %d %s" % (code, err))

        # Refusals.
        st, _, body = h.json("POST", "/c/nosuch/_export")
        check(st == 404 and error_code(body) == "collection_not_found", "missing: %d %r" % (st, body))
        st, _, body = h.json("POST", "/c/plainkv/_export")
        check(st == 409 and error_code(body) == "wrong_kind", "key-value db: %d %r" % (st, body))
        st, _, body = h.json("POST", "/c/_bad/_export")
        check(st == 400 and error_code(body) == "invalid_collection", "bad name: %d %r" % (st, body))
        st, _, body = h.json("GET", "/c/people/_export")
        check(st == 405, "GET: %d %r" % (st, body))
        st, _, body = h.json("POST", "/c/people/_export", {"format": "csv"})
        check(st == 400 and error_code(body) == "invalid_request", "options: %d %r" % (st, body))
        # An empty collection exports an empty object DuckDB reads as no rows.
        check(h.call("PUT", "/c/empty")[0] in (200, 201), "create empty collection")
        st, _, answer = h.json("POST", "/c/empty/_export", {})
        check(st == 200 and answer["docs"] == 0, "empty export: %d %r" % (st, answer))
        check(os.path.getsize(os.path.join(bdir, answer["key"])) == answer["bytes"], "empty object size")
        # Writes go on while exports run: the loop is not held by them.
        st, _, _ = h.json("PUT", "/c/people/docs/after", {"name": "after", "age": 1, "nested": {"x": 0}})
        check(st == 201, "write after the exports: %d" % st)
        check(srv.stop() == 0, "clean stop")
    finally:
        srv.kill()
    print("ok   export: %d documents, read back by DuckDB read_json; CLI; 400/404/405/409" % len(live))

    # No bucket: 501.
    srv = HttpServer(os.path.join(tmp, "data"), ["--no-bucket"])
    srv.start()
    try:
        st, _, body = Http(srv.http_port).json("POST", "/c/people/_export")
        check(st == 501 and error_code(body) == "no_bucket", "no bucket: %d %r" % (st, body))
    finally:
        srv.kill()
    print("ok   export without a bucket: 501 no_bucket")

    # Tokens: an export writes to the bucket, so a read-only token may not ask for one.
    srv = HttpServer(os.path.join(tmp, "data"), ["--bucket", "file://" + bdir,
                                                 "--tokens", "rw-token-0123456789 rw people;ro-token-0123456789 ro *"])
    srv.start()
    try:
        st, _, body = Http(srv.http_port, token="ro-token-0123456789").json("POST", "/c/people/_export")
        check(st == 403 and error_code(body) == "forbidden", "read-only token: %d %r" % (st, body))
        code, _, err = export_cli(srv.http_port, "people")
        check(code == 1 and "unauthorized" in err, "cli without a token: %d %s" % (code, err))
        code, out, err = export_cli(srv.http_port, "people", "--token", "rw-token-0123456789")
        check(code == 0 and json.loads(out)["docs"] == len(live) + 1, "cli with a token: %d %s %s" % (code, out, err))
    finally:
        srv.kill()
    print("ok   export with tokens: read-only 403, none 401, read-write exports")


def audit(*dirs):
    args = [BIN, "audit"]
    for d in dirs:
        args += ["--bucket", "file://" + d]
    r = subprocess.run(args, capture_output=True, timeout=60)
    return r.returncode, r.stdout.decode() + r.stderr.decode()


def twin_buckets(tmp):
    a, b = os.path.join(tmp, "twin-a"), os.path.join(tmp, "twin-b")
    data = os.path.join(tmp, "twin-data")
    args = ["--bucket", "file://" + a, "--bucket", "file://" + b, "--seal-interval-ms", "100"]
    srv = HttpServer(data, args)
    srv.start()
    try:
        h = Http(srv.http_port)
        for i in range(20):
            st, _, body = h.json("PUT", "/c/people/docs/t%02d?durability=bucket" % i,
                                 {"name": "twin %d" % i, "age": i, "nested": {"x": i}})
            check(st == 201, "bucket write on twins: %d %r" % (st, body))
        st, _, answer = h.json("POST", "/c/people/_export")
        check(st == 200 and answer["docs"] == 20, "twin export: %d %r" % (st, answer))
        fa, fb = files_under(a), files_under(b)
        segs = [k for k in fa if k.startswith("segments/")]
        check(segs and fa == fb, "both buckets hold the same objects: %d and %d" % (len(fa), len(fb)))
        check(answer["key"] in fb, "the export is in the second bucket too")
        st, _, status = h.json("GET", "/_status")
        sides = status["bucket"].get("twin")
        check(st == 200 and len(sides) == 2 and all(s["class_a"] > 0 for s in sides), "per side: %r" % sides)
        check(status["bucket"]["class_a"] == sides[0]["class_a"] + sides[1]["class_a"], "sum of the sides")
        st, _, metrics = h.call("GET", "/metrics")
        for side in (0, 1):
            line = 'hanudb_bucket_side_requests_total{side="%d",class="A"} %d\n' % (side, sides[side]["class_a"])
            check(line in metrics.decode(), "metrics per side: %s" % line)
        promtool = shutil.which("promtool")
        if promtool:   # e2e_metrics.py requires it; here it only adds a check
            p = subprocess.run([promtool, "check", "metrics"], input=metrics, capture_output=True)
            complaints = [l for l in (p.stdout + p.stderr).decode().splitlines() if l.strip()]
            check(p.returncode == 0 and not complaints, "promtool: %s" % complaints)
        check(srv.stop() == 0, "clean stop")
    finally:
        srv.kill()
    code, out = audit(a, b)
    check(code == 0 and "twin buckets agree" in out, "audit of twins: %d %s" % (code, out))

    # The second folder goes entirely: the next start copies every object back.
    shutil.rmtree(b)
    code, out = audit(a, b)
    check(code == 1 and "only in" in out, "audit finds the one-sided segments: %d %s" % (code, out))
    srv = HttpServer(data, args)
    srv.start()
    try:
        h = Http(srv.http_port)
        st, _, body = h.json("PUT", "/c/people/docs/again?durability=bucket", {"name": "again", "age": 1,
                                                                                "nested": {"x": 1}})
        check(st == 201, "bucket write after re-mirroring: %d %r" % (st, body))
        check(srv.stop() == 0, "clean stop")
    finally:
        srv.kill()
    check("copied 0 to the first and %d to the second" % len(fa) in srv.tail(4000), "log: %s" % srv.tail(600))
    fa2, fb2 = files_under(a), files_under(b)
    check(all(fb2.get(k) == v for k, v in fa.items()), "every object re-mirrored byte for byte")
    check(fa2 == fb2 and len(fa2) > len(fa), "both grew alike after the restart")
    code, out = audit(a, b)
    check(code == 0, "audit after re-mirroring: %d %s" % (code, out))
    print("ok   twin buckets: %d objects in both; a deleted folder re-mirrored at start; audit of both" % len(fa2))


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-export-")
    try:
        export_and_refusals(tmp)
        twin_buckets(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
