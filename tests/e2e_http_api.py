"""Documents API test: every route and every error against a real server over
HTTP: collections, documents, batches, conditional writes, durability levels,
idempotency keys, bearer tokens and scopes, CORS, limits, malformed input,
metrics, status, TLS."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa
from hanukv import Conn, db_field, bytes_field, OPS, KEY_VALUE_TOKEN  # noqa


def t_health_status_metrics(h, srv):
    st, _, b = h.json("GET", "/_health")
    check(st == 200 and b == {"ok": True}, "health")
    st, _, b = h.json("GET", "/_status")
    check(st == 200 and "durable_txn" in b and b["store_failed"] is False, "status %r" % b)
    p = b["process"]
    check(0 < p["anon_bytes"] < p["rss_bytes"] <= p["peak_rss_bytes"], "process memory %r" % p)
    st, hd, raw = h.call("GET", "/metrics")
    check(st == 200 and hd["content-type"].startswith("text/plain"), "metrics type")
    text = raw.decode()
    for name in ("hanudb_http_requests_total{route=\"health\",status=\"200\"}", "hanudb_txn ",
                 "hanudb_durable_txn ", "hanudb_log_bytes_written_total ", "hanudb_keys ",
                 "hanudb_collections ", "hanudb_http_request_duration_seconds_bucket"):
        check(name in text, "metrics has %s" % name)
    st, _, b = h.json("POST", "/_health")
    check(st == 405 and error_code(b) == "method_not_allowed", "POST /_health")
    st, _, b = h.json("GET", "/nope")
    check(st == 404 and error_code(b) == "not_found", "unknown route")


def t_collections(h, srv):
    st, _, b = h.json("PUT", "/c/users")
    check(st == 201 and b["created"] is True and b["txn"] > 0, "create collection %r" % b)
    st, _, b = h.json("PUT", "/c/users")
    check(st == 200 and b["created"] is False, "create again")
    st, _, b = h.json("GET", "/c")
    names = [c["name"] for c in b["collections"]]
    check("users" in names and not any(n.startswith("_") for n in names), "list %r" % names)
    st, _, b = h.json("GET", "/c/users")
    check(st == 200 and b == {"name": "users", "count": 0, "bytes": 0}, "stats %r" % b)
    st, _, b = h.json("GET", "/c/ghost")
    check(st == 404 and error_code(b) == "collection_not_found", "unknown collection")
    st, _, b = h.json("PUT", "/c/_system")
    check(st == 400 and error_code(b) == "invalid_collection", "reserved name")
    st, _, b = h.json("PUT", "/c/" + "x" * 65)
    check(st == 400 and error_code(b) == "invalid_collection", "long name")
    st, _, b = h.json("POST", "/c/users")
    check(st == 405, "POST collection")
    st, _, b = h.json("PUT", "/c/temp")
    h.json("PUT", "/c/temp/docs/a", {"x": 1})
    st, _, b = h.json("DELETE", "/c/temp")
    check(st == 200 and b["dropped"] is True, "drop")
    st, _, b = h.json("DELETE", "/c/temp")
    check(st == 404, "drop twice")
    st, _, b = h.json("GET", "/c/temp/docs/a")
    check(st == 404 and error_code(b) == "collection_not_found", "doc of dropped collection")


def t_documents(h, srv):
    raw = b'{ "name" : "Alice",  "age":31, "tags":["a","b"], "nested":{"x":[1,2.5e3,null,true]} }'
    st, _, b = h.json("PUT", "/c/users/docs/alice", raw)
    check(st == 201 and b["_id"] == "alice" and b["created"] is True, "put new %r" % b)
    t1 = b["txn"]
    st, hd, got = h.call("GET", "/c/users/docs/alice")
    check(st == 200 and got == b'{"_id":"alice",' + raw[1:], "stored byte-identical with _id first: %r" % got)
    check(hd["etag"] == '"%d"' % t1 and hd["hanu-txn"] == str(t1), "etag is the txn")
    st, _, b = h.json("PUT", "/c/users/docs/alice", {"_id": "alice", "age": 32})
    check(st == 200 and b["created"] is False, "replace")
    t2 = b["txn"]
    st, _, got = h.call("GET", "/c/users/docs/alice")
    check(got == b'{"_id": "alice", "age": 32}', "a document with its own _id is kept as sent: %r" % got)
    st, _, b = h.json("PUT", "/c/users/docs/alice", {"x": 1}, {"If-Match": '"%d"' % t1})
    check(st == 412 and error_code(b) == "precondition_failed", "If-Match stale")
    st, _, b = h.json("PUT", "/c/users/docs/alice", {"x": 2}, {"If-Match": '"%d"' % t2})
    check(st == 200, "If-Match current")
    st, _, b = h.json("PUT", "/c/users/docs/alice", {"x": 3}, {"If-None-Match": "*"})
    check(st == 412, "If-None-Match * on existing")
    st, _, b = h.json("PUT", "/c/users/docs/nobody", {"x": 3}, {"If-Match": '"5"'})
    check(st == 412, "If-Match on missing")
    st, _, b = h.json("PUT", "/c/users/docs/alice", {"x": 1}, {"If-Match": "bogus"})
    check(st == 400, "malformed If-Match")
    st, _, b = h.json("POST", "/c/users/docs", {"name": "Bob"})
    check(st == 201 and len(b["_id"]) == 20, "post assigns an id %r" % b)
    bob = b["_id"]
    st, _, b2 = h.json("POST", "/c/users/docs", {"name": "Bob2"})
    check(b2["_id"] > bob, "assigned ids grow with time")
    st, _, got = h.json("GET", "/c/users/docs/" + bob)
    check(got == {"_id": bob, "name": "Bob"}, "posted doc %r" % got)
    st, _, b = h.json("POST", "/c/users/docs", {"_id": "chosen", "v": 1})
    check(st == 201 and b["_id"] == "chosen", "post keeps the body's _id")
    st, _, b = h.json("PUT", "/c/users/docs/zed", {"_id": "other"})
    check(st == 400 and error_code(b) == "invalid_id", "_id differs from URL")
    st, _, b = h.json("PUT", "/c/users/docs/zed", {"_id": 5})
    check(st == 400 and error_code(b) == "invalid_id", "_id not a string")
    st, _, b = h.json("PUT", "/c/users/docs/%E2%9C%93%20ok", {"v": 1})
    check(st == 201 and b["_id"] == "\u2713 ok", "percent-encoded id %r" % b)
    st, _, b = h.json("DELETE", "/c/users/docs/chosen")
    check(st == 200 and b["deleted"] is True, "delete")
    st, _, b = h.json("DELETE", "/c/users/docs/chosen")
    check(st == 404 and error_code(b) == "not_found", "delete missing")
    st, _, b = h.json("GET", "/c/users/docs/chosen")
    check(st == 404 and error_code(b) == "not_found", "get deleted")
    st, _, b = h.json("PATCH", "/c/users/docs", {"x": 1})
    check(st == 405, "PATCH of the listing")
    st, _, b = h.json("PUT", "/c/auto/docs/a", {"v": 1})
    check(st == 201, "first write creates the collection")
    st, _, b = h.json("GET", "/c/auto")
    check(b["count"] == 1, "implicit collection")
    # the same bytes are visible to the key-value protocol (one store)
    kv = Conn(srv.port)
    s2, tok, val = kv.get("a", db="auto")
    check(s2 == KEY_VALUE_TOKEN and val == b'{"_id":"a","v": 1}', "kv sees the document: %r" % val)


def t_malformed(h, srv):
    for body, what in ((b'{"a":', "truncated"), (b'[1,2]', "array"), (b'"str"', "string"),
                       (b'{"a":1,"a":2}', "duplicate key"), (b'{"a":"\xff"}', "bad utf-8"),
                       (b'{"a":01}', "bad number"), (b'', "empty")):
        st, _, b = h.json("PUT", "/c/users/docs/m", body)
        check(st == 400 and error_code(b) in ("invalid_json", "invalid_request"), "%s: %d %r" % (what, st, b))
    deep = b'{"a":' * 70 + b'1' + b'}' * 70
    st, _, b = h.json("PUT", "/c/users/docs/m", deep)
    check(st == 400 and "64" in b["error"]["message"], "depth limit %r" % b)
    st, _, b = h.json("PUT", "/c/users/docs/" + "i" * 257, {"v": 1})
    check(st == 400 and error_code(b) == "invalid_id", "id too long")
    st, _, b = h.json("PUT", "/c/users/docs/a%2Fb", {"v": 1})
    check(st == 400 and error_code(b) == "invalid_id", "slash in id")
    st, _, b = h.json("GET", "/c/users/docs/bad%zz")
    check(st == 400, "bad percent encoding")


def t_limits(h, srv):
    big = json.dumps({"v": "x" * 5000})
    st, _, b = h.json("PUT", "/c/users/docs/big", big)
    check(st == 413 and error_code(b) == "too_large", "document over --max-value 4K: %d %r" % (st, b))
    # A body over --max-body is refused from its Content-Length, before it is sent,
    # with a JSON error, and the connection is closed.
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=5)
    s.sendall(b"PUT /c/users/docs/huge HTTP/1.1\r\nHost: x\r\nContent-Length: 1100000\r\n\r\n{")
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 413") and b"close" in head.lower(), "body over --max-body 1M: %r" % head[:80])
    check(error_code(json.loads(body)) == "too_large" and b"1100000" in body, "413 JSON body: %r" % body)
    check(h.call("GET", "/c/users/docs/huge")[0] == 404, "nothing written")
    # A chunked body announces no length: h2o stops it once it passes --max-body, and
    # the answer is the same JSON error (h2o's own error path, see http_guard.c).
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=5)
    s.sendall(b"PUT /c/users/docs/chunky HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"x" * 65536
    try:
        for _ in range(40):   # 2.6 MB, over the 1M limit
            s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
    except OSError:
        pass   # the server may close before everything is sent
    data = b""
    while True:
        try:
            chunk = s.recv(4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 413") and b"application/json" in head.lower() and b"close" in head.lower(),
          "chunked body over --max-body: %r" % head[:200])
    check(body and error_code(json.loads(body)) == "too_large", "chunked 413 JSON body: %r" % body[:200])
    check(h.call("GET", "/c/users/docs/chunky")[0] == 404, "nothing written (chunked)")
    ops = [{"op": "delete", "id": "x%d" % i} for i in range(10001)]
    st, _, b = h.json("POST", "/c/users/_batch", {"ops": ops})
    check(st == 413 and "10000" in b["error"]["message"], "batch over 10000 ops: %d %r" % (st, b))


def t_batch(h, srv):
    h.json("PUT", "/c/b/docs/gone", {"v": 0})
    st, _, b = h.json("POST", "/c/b/_batch", {"ops": [
        {"op": "put", "id": "p1", "doc": {"v": 1}},
        {"op": "put", "doc": {"_id": "p2", "v": 2}},
        {"op": "put", "doc": {"v": 3}},
        {"op": "delete", "id": "gone"}]})
    check(st == 200 and len(b["results"]) == 4, "batch %r" % b)
    txn = b["txn"]
    auto = b["results"][2]["_id"]
    for i in ("p1", "p2", auto):
        st, hd, _ = h.call("GET", "/c/b/docs/" + i)
        check(st == 200 and hd["etag"] == '"%d"' % txn, "batch doc %s has the batch txn" % i)
    check(h.call("GET", "/c/b/docs/gone")[0] == 404, "batch delete")
    st, _, got = h.call("POST", "/c/b/_batch", b'{"ops":[{"op":"put","id":"raw","doc":{ "k" : [1, 2] }}]}')
    check(h.call("GET", "/c/b/docs/raw")[2] == b'{"_id":"raw", "k" : [1, 2] }', "batch stores the doc's exact bytes")
    for body, what in (({"ops": []}, "empty"), ({"nope": 1}, "no ops"), ({"ops": [{"op": "frob", "id": "x"}]}, "bad op"),
                       ({"ops": [{"op": "delete"}]}, "delete without id"),
                       ({"ops": [{"op": "put", "id": "x", "doc": [1]}]}, "doc not an object"),
                       ({"ops": [{"op": "put", "id": 7, "doc": {}}]}, "id not a string")):
        st, _, b = h.json("POST", "/c/b/_batch", body)
        check(st == 400, "batch %s: %d %r" % (what, st, b))
    # a refused batch wrote nothing
    st, _, b = h.json("POST", "/c/b/_batch", {"ops": [{"op": "put", "id": "half", "doc": {}},
                                                      {"op": "put", "id": "x", "doc": 5}]})
    check(st == 400 and h.call("GET", "/c/b/docs/half")[0] == 404, "no half batch on error")
    st, _, b = h.json("GET", "/c/b/_batch")
    check(st == 405, "GET batch")


def t_durability(h, srv):
    st, _, b = h.json("PUT", "/c/d/docs/n?durability=none", {"v": 1})
    check(st == 201, "durability=none")
    st, _, b = h.json("PUT", "/c/d/docs/l", {"v": 1}, {"Hanu-Durability": "local"})
    check(st == 201, "durability local header")
    st, _, b = h.json("PUT", "/c/d/docs/b?durability=bucket", {"v": 1})
    # The default bucket (DATA.bucket) takes it; --no-bucket refuses it (e2e_bucket.py).
    check(st == 201, "bucket: %d %r" % (st, b))
    st, _, b = h.json("PUT", "/c/d/docs/x?durability=sometimes", {"v": 1})
    check(st == 400, "bad durability")
    st, _, b = h.json("GET", "/_status")
    check(b["durable_txn"] == b["txn"], "local writes are durable when answered")


def t_idempotency(h, srv):
    hdr = {"Idempotency-Key": "order-42"}
    st, _, b1 = h.json("POST", "/c/orders/docs", {"item": "book"}, hdr)
    check(st == 201, "first idempotent post")
    st, hd, b2 = h.json("POST", "/c/orders/docs", {"item": "book"}, hdr)
    check(st == 201 and b2 == b1 and hd.get("idempotent-replayed") == "true", "retry returns the first answer")
    st, _, c = h.json("GET", "/c/orders")
    check(c["count"] == 1, "the retry wrote nothing: %r" % c)
    st, _, b3 = h.json("POST", "/c/orders/_batch", {"ops": [{"op": "put", "id": "o1", "doc": {}}]}, {"Idempotency-Key": "b-1"})
    st, _, b4 = h.json("POST", "/c/orders/_batch", {"ops": [{"op": "put", "id": "o1", "doc": {}}]}, {"Idempotency-Key": "b-1"})
    check(b3 == b4, "batch retry")
    st, _, b = h.json("POST", "/c/orders/docs", {"item": "x"}, {"Idempotency-Key": "k" * 129})
    check(st == 400, "key too long")
    st, _, b5 = h.json("POST", "/c/orders/docs", {"item": "pen"}, {"Idempotency-Key": "order-43"})
    check(b5["_id"] != b1["_id"], "another key, another write")


def t_duplicate_content_length(h, srv):
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=5)
    s.sendall(b"PUT /c/users/docs/dup HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\nContent-Length: 9\r\n\r\n{\"v\":1}  ")
    data = s.recv(4096)
    s.close()
    check(data.startswith(b"HTTP/1.1 400"), "conflicting Content-Length refused: %r" % data[:60])
    check(h.call("GET", "/c/users/docs/dup")[0] == 404, "and nothing written")


def t_cors(h, srv):
    st, hd, _ = h.call("OPTIONS", "/c/users/docs/a", headers={"Origin": "https://app.example",
                                                             "Access-Control-Request-Method": "PUT"})
    check(st == 204 and hd.get("access-control-allow-origin") == "https://app.example" and
          "PUT" in hd.get("access-control-allow-methods", ""), "preflight %r" % hd)
    st, hd, _ = h.call("GET", "/c/users", headers={"Origin": "https://app.example"})
    check(hd.get("access-control-allow-origin") == "https://app.example", "CORS on a response")
    st, hd, _ = h.call("GET", "/c/users", headers={"Origin": "https://evil.example"})
    check("access-control-allow-origin" not in hd, "other origins get no CORS header")


def run_main(tmp):
    srv = HttpServer(os.path.join(tmp, "main"), ["--max-value", "4K", "--max-body", "1M",
                                                 "--cors-origins", "https://app.example"])
    srv.start()
    failures = run_cases(srv, (t_health_status_metrics, t_collections, t_documents, t_malformed, t_limits,
                               t_batch, t_durability, t_idempotency, t_duplicate_content_length, t_cors))
    # documents and idempotency keys survive a restart
    check(srv.stop() == 0, "clean stop")
    srv.start()
    h = Http(srv.http_port)
    st, _, got = h.call("GET", "/c/users/docs/alice")
    check(st == 200, "doc after restart")
    st, _, b = h.json("POST", "/c/orders/docs", {"item": "book"}, {"Idempotency-Key": "order-42"})
    check(st == 201, "idempotency key after restart")
    st, _, c = h.json("GET", "/c/orders")
    check(c["count"] == 3, "no extra write after restart: %r" % c)
    srv.stop()
    return failures


def run_auth(tmp):
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("# comment\nadmin-token-1 rw *\nreader-token-1 ro *\nusers-writer-1 rw users\n")
    srv = HttpServer(os.path.join(tmp, "auth"), ["--tokens", tokens])
    srv.start()
    anon = Http(srv.http_port)
    st, hd, b = anon.json("GET", "/c")
    check(st == 401 and error_code(b) == "unauthorized" and hd.get("www-authenticate") == "Bearer", "no token")
    check(anon.json("GET", "/_health")[0] == 200, "health stays open")
    check(anon.json("GET", "/metrics")[0] == 401, "metrics need a token unless --open-metrics")
    bad = Http(srv.http_port, token="wrong-token-9")
    check(bad.json("GET", "/c")[0] == 401, "wrong token")
    admin = Http(srv.http_port, token="admin-token-1")
    check(admin.json("PUT", "/c/users/docs/a", {"v": 1})[0] == 201, "rw token writes")
    check(admin.json("PUT", "/c/other/docs/a", {"v": 1})[0] == 201, "rw * token writes anywhere")
    ro = Http(srv.http_port, token="reader-token-1")
    check(ro.json("GET", "/c/users/docs/a")[0] == 200, "ro token reads")
    st, _, b = ro.json("PUT", "/c/users/docs/b", {"v": 1})
    check(st == 403 and error_code(b) == "forbidden", "ro token cannot write")
    uw = Http(srv.http_port, token="users-writer-1")
    check(uw.json("PUT", "/c/users/docs/c", {"v": 1})[0] == 201, "scoped token writes its collection")
    check(uw.json("PUT", "/c/other/docs/c", {"v": 1})[0] == 403, "scoped token elsewhere")
    check(uw.json("GET", "/c/other/docs/a")[0] == 403, "scoped token cannot read elsewhere")
    names = [c["name"] for c in uw.json("GET", "/c")[2]["collections"]]
    check(names == ["users"], "scoped token lists its collections only: %r" % names)
    srv.stop()
    # a tokens file that does not parse stops the server with a message
    with open(tokens, "w") as f:
        f.write("short rw *\n")
    srv2 = HttpServer(os.path.join(tmp, "auth2"), ["--tokens", tokens])
    check(srv2.start(expect_ok=False) is False and "tokens line 1" in srv2.tail(), "bad tokens file refused")
    srv2.kill()
    # without tokens, a public address is replaced by loopback, loudly
    srv3 = Server(os.path.join(tmp, "auth3"), ["--http-addr", "0.0.0.0:%d" % free_port()])
    srv3.start()
    check("loopback only" in srv3.tail(), "no tokens: loopback only, and it says so")
    srv3.stop()


def run_expiry(tmp):
    srv = HttpServer(os.path.join(tmp, "expiry"), ["--idempotency-ttl", "1"])
    srv.start()
    h = Http(srv.http_port)
    for i in range(3):
        check(h.json("POST", "/c/e/docs", {"i": i}, {"Idempotency-Key": "k%d" % i})[0] == 201, "write")
    keys = h.json("GET", "/_status")[2]["keys"]
    check(keys == 6, "3 documents and 3 idempotency keys: %d" % keys)
    import time
    deadline = time.time() + 10
    while time.time() < deadline and h.json("GET", "/_status")[2]["keys"] != 3:
        time.sleep(0.2)
    check(h.json("GET", "/_status")[2]["keys"] == 3, "expired idempotency keys are deleted")
    st, hd, b = h.json("POST", "/c/e/docs", {"i": 0}, {"Idempotency-Key": "k0"})
    check(st == 201 and "idempotent-replayed" not in hd, "an expired key makes the write happen again")
    check(h.json("GET", "/c/e")[2]["count"] == 4, "four documents")
    check("hanudb_idempotency_keys_expired_total 3" in h.call("GET", "/metrics")[2].decode(), "expiry metric")
    srv.stop()


def run_tls(tmp):
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1"], capture_output=True)
    check(r.returncode == 0, "openssl req: %r" % r.stderr[-300:])
    srv = HttpServer(os.path.join(tmp, "tls"), ["--tls-cert", cert, "--tls-key", key])
    srv.start()
    h = Http(srv.http_port, tls=True)
    check(h.json("PUT", "/c/s/docs/a", {"v": 1})[0] == 201, "HTTPS write")
    check(h.call("GET", "/c/s/docs/a")[2] == b'{"_id":"a","v": 1}', "HTTPS read")
    srv.stop()


def main():
    run_suite("hanudb-http-", run_main, [(run_auth, "auth"), (run_expiry, "idempotency expiry"), (run_tls, "tls")])


if __name__ == "__main__":
    main()
