"""The documents API as web clients expect it, against a real server: no dot
segments and no trailing-slash aliases, bodies only as application/json (415),
the Host check of a tokenless server (403), idempotency keys bound to their
request and token (422), RFC 9110 conditional requests (412, 304), Location,
Allow, OPTIONS and HEAD, and the CORS headers a browser needs."""
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa
from hanukv import Server  # noqa


def raw(port, request):
    """Sends request bytes as they are (no Host or path rewriting); returns
    (status, headers with lower-case names, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(request)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers, body


def raw_req(port, method, path, host=None, headers=(), body=b""):
    h = "%s %s HTTP/1.1\r\n" % (method, path)
    if host is not None:
        h += "Host: %s\r\n" % host
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    h += "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    return raw(port, h.encode() + body)


def count(h, col):
    st, _, b = h.json("GET", "/c/" + col)
    check(st == 200, "collection %s exists: %d %r" % (col, st, b))
    return b["count"]


def t_dot_segments(h, srv):
    h.json("PUT", "/c/scratch/docs/keep", {"v": 1})
    for seg in ("..", ".", "%2E%2E", "%2e%2e", "%2E", ".%2E"):
        for method in ("GET", "PUT", "DELETE"):
            st, _, b = h.json(method, "/c/scratch/docs/" + seg, {"v": 2} if method == "PUT" else None)
            check(st == 400 and error_code(b) == "invalid_id", "%s docs/%s: %d %r" % (method, seg, st, b))
        st, _, b = h.json("PUT", "/c/" + seg)
        check(st == 400 and error_code(b) == "invalid_collection", "PUT /c/%s: %d %r" % (seg, st, b))
        st, _, b = h.json("DELETE", "/c/" + seg + "/docs/keep")
        check(st == 400 and error_code(b) == "invalid_collection", "DELETE /c/%s/docs/keep: %d" % (seg, st))
    # what clients send for DELETE .../docs/.. : the collection's path with a slash
    for path in ("/c/scratch/", "/c/scratch//", "/c/scratch/docs/", "/c/", "/c//docs/keep", "/_health/"):
        st, _, b = h.json("DELETE", path)
        check(st == 404 and error_code(b) == "not_found", "DELETE %s is no route: %d %r" % (path, st, b))
        st, _, b = h.json("GET", path)
        check(st == 404, "GET %s is no route: %d" % (path, st))
    st, _, b = h.json("POST", "/c/scratch/docs/", {"v": 3})
    check(st == 404, "POST docs/ is no route: %d" % st)
    check(count(h, "scratch") == 1, "nothing dropped or added")
    st, _, b = h.json("POST", "/c/scratch/_batch", {"ops": [{"op": "delete", "id": ".."}]})
    check(st == 400 and error_code(b) == "invalid_id", "batch id ..: %d %r" % (st, b))
    st, _, b = h.json("POST", "/c/scratch/docs", {"_id": "."})
    check(st == 400 and error_code(b) == "invalid_id", "POST with _id .: %d %r" % (st, b))
    for ok in ("...", ".hidden", "a..b"):
        st, _, b = h.json("PUT", "/c/scratch/docs/" + ok, {"v": 1})
        check(st == 201, "id %s is fine: %d %r" % (ok, st, b))


def t_content_type(h, srv):
    h.json("PUT", "/c/victim/docs/alice", {"v": 1})
    before = count(h, "victim")
    for ct in (None, "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
               "multipart/form-data; boundary=x", "application/xml", "application/jsonx", "json"):
        for method, path, body in (("POST", "/c/victim/docs", b'{"v":2}'),
                                   ("PUT", "/c/victim/docs/bob", b'{"v":2}'),
                                   ("POST", "/c/victim/_batch", b'{"ops":[{"op":"delete","id":"alice"}]}')):
            headers = [("Content-Type", ct)] if ct else []
            st, rh, b = raw_req(srv.http_port, method, path, "127.0.0.1:%d" % srv.http_port, headers, body)
            check(st == 415 and rh.get("content-type") == "application/json" and
                  error_code(json.loads(b)) == "unsupported_media_type",
                  "%s %s with Content-Type %r: %d %r" % (method, path, ct, st, b))
    check(count(h, "victim") == before and h.call("GET", "/c/victim/docs/alice")[0] == 200, "nothing written")
    for ct in ("application/json", "application/json; charset=utf-8", "Application/JSON", "application/json ;x=1"):
        st, _, b = h.json("PUT", "/c/victim/docs/ct", {"v": 1}, {"Content-Type": ct})
        check(st in (200, 201), "Content-Type %r accepted: %d %r" % (ct, st, b))
    # requests without a body need no Content-Type
    st, _, b = raw_req(srv.http_port, "PUT", "/c/nobody", "127.0.0.1:%d" % srv.http_port)
    check(st == 201, "PUT collection without a body: %d %r" % (st, b))
    st, _, b = raw_req(srv.http_port, "DELETE", "/c/victim/docs/ct", "127.0.0.1:%d" % srv.http_port)
    check(st == 200, "DELETE without a body: %d %r" % (st, b))
    # any body is JSON, on any route
    st, _, b = raw_req(srv.http_port, "DELETE", "/c/victim/docs/alice", "127.0.0.1:%d" % srv.http_port,
                       [("Content-Type", "text/plain")], b"x")
    check(st == 415 and h.call("GET", "/c/victim/docs/alice")[0] == 200, "DELETE with a text body: %d" % st)


def t_host(h, srv):
    port = srv.http_port
    for host in ("127.0.0.1:%d" % port, "localhost:%d" % port, "LOCALHOST:%d" % port, "127.1.2.3:%d" % port,
                 "[::1]:%d" % port):
        st, _, b = raw_req(port, "GET", "/c", host)
        check(st == 200, "Host %s: %d %r" % (host, st, b))
    for host in ("evil.example:%d" % port, "evil.example", "localhost:%d" % (port + 1), "localhost",
                 "127.0.0.1", "10.0.0.1:%d" % port, "localhost.evil.example:%d" % port, "[::2]:%d" % port,
                 "localhost:%d0" % port, ""):
        st, rh, b = raw_req(port, "GET", "/c", host)
        check(st == 403 and error_code(json.loads(b)) == "host_not_allowed", "Host %r: %d %r" % (host, st, b))
        st, _, b = raw_req(port, "PUT", "/c/rebound/docs/x", host, [("Content-Type", "application/json")], b"{}")
        check(st == 403, "write with Host %r: %d" % (host, st))
    st, _, b = raw(port, b"GET /c HTTP/1.0\r\n\r\n")
    check(st == 403, "no Host at all: %d %r" % (st, b))
    check(h.call("GET", "/c/rebound")[0] == 404, "nothing written under a foreign Host")


def t_idempotency(h, srv):
    st, hd, first = h.json("POST", "/c/idem/docs", {"v": 1}, {"Idempotency-Key": "k1"})
    check(st == 201 and hd.get("location") == "/c/idem/docs/" + first["_id"], "first use: %d %r" % (st, hd))
    st, hd, again = h.json("POST", "/c/idem/docs", {"v": 1}, {"Idempotency-Key": "k1"})
    check(st == 201 and again == first and hd.get("idempotent-replayed") == "true" and
          hd.get("location") == "/c/idem/docs/" + first["_id"], "replay with its Location: %r %r" % (again, hd))
    h.json("PUT", "/c/idem/docs/alice", {"name": "Alice"})
    # the case: a key of a POST reused on a DELETE must not replay "201 created"
    st, hd, b = h.json("DELETE", "/c/idem/docs/alice", None, {"Idempotency-Key": "k1"})
    check(st == 422 and error_code(b) == "idempotency_key_mismatch" and "idempotent-replayed" not in hd,
          "same key, other method and path: %d %r" % (st, b))
    check(h.call("GET", "/c/idem/docs/alice")[0] == 200, "alice was not deleted")
    st, _, b = h.json("POST", "/c/idem/docs", {"v": 2}, {"Idempotency-Key": "k1"})
    check(st == 422, "same key, other body: %d %r" % (st, b))
    st, _, b = h.json("POST", "/c/idem/_batch", {"ops": [{"op": "delete", "id": "alice"}]}, {"Idempotency-Key": "k1"})
    check(st == 422 and h.call("GET", "/c/idem/docs/alice")[0] == 200, "same key on a batch: %d" % st)
    st, _, b = h.json("POST", "/c/idem/docs?durability=none", {"v": 1}, {"Idempotency-Key": "k1"})
    check(st == 201 and b == first, "the query (durability) is not part of the request's identity: %d %r" % (st, b))
    check(count(h, "idem") == 2, "one posted document and alice")
    # the batch form: a key bound to one batch
    ops = {"ops": [{"op": "put", "id": "b1", "doc": {}}]}
    st, _, b1 = h.json("POST", "/c/idem/_batch", ops, {"Idempotency-Key": "kb"})
    st2, _, b2 = h.json("POST", "/c/idem/_batch", ops, {"Idempotency-Key": "kb"})
    check(st == 200 and st2 == 200 and b1 == b2, "batch replay")
    st, _, b = h.json("POST", "/c/idem/_batch", {"ops": [{"op": "delete", "id": "b1"}]}, {"Idempotency-Key": "kb"})
    check(st == 422 and h.call("GET", "/c/idem/docs/b1")[0] == 200, "batch key with another batch: %d" % st)


def t_conditional(h, srv):
    st, hd, b = h.json("PUT", "/c/cond/docs/d", {"v": 1})
    t1 = b["txn"]
    etag = '"%d"' % t1
    # If-None-Match with ETags on writes: 412 when one matches (weak comparison)
    for inm in (etag, "W/" + etag, '"1", %s' % etag, "*"):
        st, _, b = h.json("PUT", "/c/cond/docs/d", {"v": 2}, {"If-None-Match": inm})
        check(st == 412 and error_code(b) == "precondition_failed", "PUT If-None-Match %s: %d %r" % (inm, st, b))
        st, _, b = h.json("DELETE", "/c/cond/docs/d", None, {"If-None-Match": inm})
        check(st == 412, "DELETE If-None-Match %s: %d %r" % (inm, st, b))
    st, _, b = h.json("PUT", "/c/cond/docs/d", {"v": 2}, {"If-None-Match": '"%d"' % (t1 + 1000)})
    check(st == 200, "If-None-Match with another ETag: %d %r" % (st, b))
    t2 = b["txn"]
    etag = '"%d"' % t2
    st, _, b = h.json("PUT", "/c/cond/docs/new1", {"v": 1}, {"If-None-Match": etag})
    check(st == 201, "If-None-Match on a missing document: %d" % st)
    # If-Match: strong comparison, lists, *
    st, _, b = h.json("PUT", "/c/cond/docs/d", {"v": 3}, {"If-Match": "W/" + etag})
    check(st == 412, "a weak ETag never matches If-Match: %d %r" % (st, b))
    st, _, b = h.json("PUT", "/c/cond/docs/d", {"v": 3}, {"If-Match": '"1", %s, "x"' % etag})
    check(st == 200, "If-Match list: %d %r" % (st, b))
    st, _, b = h.json("PUT", "/c/cond/docs/d", {"v": 4}, {"If-Match": "*"})
    check(st == 200, "If-Match * on an existing document: %d %r" % (st, b))
    t3 = b["txn"]
    st, _, b = h.json("PUT", "/c/cond/docs/missing", {"v": 1}, {"If-Match": "*"})
    check(st == 412 and h.call("GET", "/c/cond/docs/missing")[0] == 404, "If-Match * on a missing one: %d" % st)
    st, _, b = h.json("DELETE", "/c/cond/docs/d", None, {"If-Match": '"%d"' % t2})
    check(st == 412, "DELETE If-Match stale: %d" % st)
    for bad in ('"1', 'W/1', 'abc', '"1" "2"', 'W/'):
        st, _, b = h.json("PUT", "/c/cond/docs/d", {"v": 1}, {"If-Match": bad})
        check(st == 400 and error_code(b) == "invalid_request", "malformed If-Match %r: %d %r" % (bad, st, b))
    st, _, b = h.json("PUT", "/c/cond/docs/d", {"v": 5}, {"If-Match": str(t3)})
    check(st == 200, "a bare txn still works: %d %r" % (st, b))
    t4 = b["txn"]
    etag = '"%d"' % t4
    # reads: 304 for If-None-Match, 412 for If-Match
    for method in ("GET", "HEAD"):
        for inm in (etag, "W/" + etag, '"7", ' + etag, "*"):
            st, hd, raw_body = h.call(method, "/c/cond/docs/d", headers={"If-None-Match": inm})
            check(st == 304 and raw_body == b"" and hd.get("etag") == etag and "content-length" not in hd,
                  "%s If-None-Match %s: %d %r %r" % (method, inm, st, hd, raw_body))
        st, hd, _ = h.call(method, "/c/cond/docs/d", headers={"If-None-Match": '"1"'})
        check(st == 200 and hd.get("etag") == etag, "%s If-None-Match other: %d" % (method, st))
        st, _, _ = h.call(method, "/c/cond/docs/d", headers={"If-Match": '"1"'})
        check(st == 412, "%s If-Match other: %d" % (method, st))
        st, _, _ = h.call(method, "/c/cond/docs/d", headers={"If-Match": "W/" + etag})
        check(st == 412, "%s If-Match weak: %d" % (method, st))
        st, _, _ = h.call(method, "/c/cond/docs/d", headers={"If-Match": etag})
        check(st == 200, "%s If-Match current: %d" % (method, st))
        st, _, _ = h.call(method, "/c/cond/docs/nothere", headers={"If-Match": etag})
        check(st == 404, "%s of a missing document ignores If-Match: %d" % (method, st))
    # If-Match is evaluated first (RFC 9110 13.2.2)
    st, _, _ = h.call("GET", "/c/cond/docs/d", headers={"If-Match": '"1"', "If-None-Match": etag})
    check(st == 412, "If-Match before If-None-Match: %d" % st)


def t_location_allow_options_head(h, srv):
    st, hd, b = h.json("PUT", "/c/loc")
    check(st == 201 and hd.get("location") == "/c/loc", "collection Location: %r" % hd)
    st, hd, b = h.json("PUT", "/c/loc/docs/a%20b%C3%A9", {"v": 1})
    check(st == 201 and hd.get("location") == "/c/loc/docs/a%20b%C3%A9", "doc Location: %r" % hd)
    st, hd, b = h.json("GET", hd["location"])
    check(st == 200 and b["_id"] == "a b\u00e9", "the Location is the document: %r" % b)
    st, hd, b = h.json("PUT", "/c/loc/docs/a%20b%C3%A9", {"v": 2})
    check(st == 200 and "location" not in hd, "no Location on a replace")
    st, hd, b = h.json("POST", "/c/loc/docs", {"v": 1})
    check(st == 201 and hd.get("location") == "/c/loc/docs/" + b["_id"], "POST Location: %r" % hd)
    routes = {
        "/_health": "GET, HEAD, OPTIONS", "/_status": "GET, HEAD, OPTIONS", "/metrics": "GET, HEAD, OPTIONS",
        "/c": "GET, HEAD, OPTIONS", "/c/loc": "GET, HEAD, PUT, DELETE, OPTIONS",
        "/c/loc/docs": "GET, HEAD, POST, OPTIONS", "/c/loc/_batch": "POST, OPTIONS",
        "/c/loc/docs/x": "GET, HEAD, PUT, PATCH, DELETE, OPTIONS", "/c/loc/docs/x/_update": "POST, OPTIONS",
        "/c/loc/_update": "POST, OPTIONS", "/c/loc/_delete": "POST, OPTIONS",
    }
    for path, allow in routes.items():
        st, hd, b = h.call("OPTIONS", path)
        check(st == 204 and hd.get("allow") == allow and b == b"", "OPTIONS %s: %d %r" % (path, st, hd))
        allowed = [m.strip() for m in allow.split(",")]
        for m in ("GET", "PUT", "POST", "DELETE", "PATCH"):
            if m in allowed:
                continue
            st, hd, b = h.json(m, path, {} if m in ("PUT", "POST", "PATCH") else None)
            check(st == 405 and hd.get("allow") == allow and error_code(b) == "method_not_allowed",
                  "%s %s: %d %r" % (m, path, st, hd))
    for path in ("/nope", "/c/loc/other", "/c/loc/docs/x/y", "/"):
        st, hd, b = h.json("OPTIONS", path)
        check(st == 404 and error_code(b) == "not_found" and "allow" not in hd, "OPTIONS %s: %d" % (path, st))
    for path in ("/_health", "/_status", "/metrics", "/c", "/c/loc", "/c/loc/docs/a%20b%C3%A9"):
        st, hd, b = h.call("HEAD", path)
        gst, ghd, gb = h.call("GET", path)
        check(st == 200 and b == b"" and gst == 200, "HEAD %s: %d %r" % (path, st, b))
        if path != "/metrics" and path != "/_status":
            check(hd.get("content-length") == str(len(gb)), "HEAD %s has GET's length" % path)
    st, _, b = h.call("HEAD", "/c/ghost")
    check(st == 404 and b == b"", "HEAD of a missing collection")


def t_cors(h, srv):
    origin = "https://app.example"
    for path, methods in (("/c/users/docs/a", "GET, HEAD, PUT, PATCH, DELETE, OPTIONS"), ("/c/users/docs", "GET, HEAD, POST, OPTIONS"),
                          ("/c/users/_batch", "POST, OPTIONS"), ("/c", "GET, HEAD, OPTIONS")):
        st, hd, _ = h.call("OPTIONS", path, headers={"Origin": origin, "Access-Control-Request-Method": "PUT",
                                                     "Access-Control-Request-Headers": "traceparent"})
        check(st == 204 and hd.get("access-control-allow-origin") == origin and
              hd.get("access-control-allow-methods") == methods, "preflight %s: %r" % (path, hd))
        allowed = [x.strip().lower() for x in hd.get("access-control-allow-headers", "").split(",")]
        for name in ("authorization", "content-type", "if-match", "if-none-match", "idempotency-key",
                     "hanu-durability", "traceparent", "tracestate", "x-request-id", "x-tenant"):
            check(name in allowed, "allowed request header %s: %r" % (name, allowed))
        check("origin" in hd.get("vary", "").lower(), "preflight varies by Origin")
    h.json("PUT", "/c/users/docs/cors", {"v": 1})
    st, hd, _ = h.call("GET", "/c/users/docs/cors", headers={"Origin": origin})
    exposed = [x.strip().lower() for x in hd.get("access-control-expose-headers", "").split(",")]
    for name in ("etag", "hanu-txn", "idempotent-replayed", "location", "retry-after"):
        check(name in exposed, "exposed %s: %r" % (name, hd))
    # Vary: Origin on every answer of a CORS server: with an allowed Origin, another one, none, errors
    for hdrs, path in (({"Origin": origin}, "/c/users/docs/cors"), ({"Origin": "https://evil.example"}, "/c/users"),
                       ({}, "/c/users/docs/cors"), ({}, "/nope"), ({"Origin": origin}, "/c/users/docs/none")):
        st, hd, _ = h.call("GET", path, headers=hdrs)
        check("origin" in hd.get("vary", "").lower(), "Vary: Origin on %s %r: %r" % (path, hdrs, hd))
    st, hd, _ = h.call("GET", "/c/users", headers={"Origin": "https://evil.example"})
    check("access-control-allow-origin" not in hd and "access-control-expose-headers" not in hd, "other origins")
    st, hd, _ = h.call("OPTIONS", "/c/users", headers={"Origin": "https://evil.example",
                                                       "Access-Control-Request-Method": "DELETE"})
    check(st == 204 and "access-control-allow-methods" not in hd, "no preflight grant for other origins: %r" % hd)


def run_main(tmp):
    srv = HttpServer(os.path.join(tmp, "main"), ["--cors-origins", "https://app.example",
                                                 "--cors-allow-headers", "X-Tenant"])
    srv.start()
    failures = run_cases(srv, (t_dot_segments, t_content_type, t_host, t_idempotency, t_conditional,
              t_location_allow_options_head, t_cors))
    # fingerprints survive a restart
    check(srv.stop() == 0, "clean stop")
    srv.start()
    h = Http(srv.http_port)
    st, _, b = h.json("DELETE", "/c/idem/docs/alice", None, {"Idempotency-Key": "k1"})
    check(st == 422 and h.call("GET", "/c/idem/docs/alice")[0] == 200, "mismatch after restart: %d" % st)
    srv.stop()
    return failures


def run_allowed_hosts(tmp):
    """--allowed-hosts (here from its environment variable, like every option)."""
    port = free_port()
    os.environ["HANUDB_ALLOWED_HOSTS"] = "db.internal:%d, App.Example" % port
    try:
        srv = HttpServer(os.path.join(tmp, "hosts"), http_port=port)
        srv.start()
    finally:
        del os.environ["HANUDB_ALLOWED_HOSTS"]
    for host, want in (("db.internal:%d" % port, 200), ("db.internal:%d" % (port + 1), 403), ("db.internal", 403),
                       ("app.example", 200), ("APP.example:8443", 200), ("localhost:%d" % port, 200),
                       ("other.example:%d" % port, 403)):
        st, _, b = raw_req(port, "GET", "/c", host)
        check(st == want, "--allowed-hosts, Host %s: %d %r" % (host, st, b))
    srv.stop()
    srv2 = HttpServer(os.path.join(tmp, "hosts2"), ["--allowed-hosts", "bad:port:x"])
    check(srv2.start(expect_ok=False) is False and "--allowed-hosts" in srv2.tail(), "a bad entry is refused")
    srv2.kill()
    # with tokens the token is the guard: any Host
    srv3 = HttpServer(os.path.join(tmp, "hosts3"), ["--tokens", "tok-admin-1 rw *"])
    srv3.start()
    st, _, b = raw_req(srv3.http_port, "GET", "/c", "anything.example", [("Authorization", "Bearer tok-admin-1")])
    check(st == 200, "tokens: no Host check: %d %r" % (st, b))
    st, hd, _ = Http(srv3.http_port, token="tok-admin-1").call("GET", "/c", headers={"Origin": "https://a.example"})
    check("vary" not in hd and "access-control-allow-origin" not in hd, "no CORS headers without --cors-origins")
    srv3.stop()


def run_token_scope(tmp):
    """Idempotency keys are scoped to the token that used them."""
    srv = HttpServer(os.path.join(tmp, "scope"), ["--tokens", "tok-alpha-1 rw *;tok-beta-22 rw *"])
    srv.start()
    a = Http(srv.http_port, token="tok-alpha-1")
    b = Http(srv.http_port, token="tok-beta-22")
    st, _, ra = a.json("POST", "/c/shared/docs", {"v": 1}, {"Idempotency-Key": "same"})
    check(st == 201, "alpha writes")
    st, hd, rb = b.json("POST", "/c/shared/docs", {"v": 1}, {"Idempotency-Key": "same"})
    check(st == 201 and rb["_id"] != ra["_id"] and "idempotent-replayed" not in hd,
          "beta's key is its own: %r %r" % (ra, rb))
    st, hd, ra2 = a.json("POST", "/c/shared/docs", {"v": 1}, {"Idempotency-Key": "same"})
    check(ra2 == ra and hd.get("idempotent-replayed") == "true", "alpha's replay")
    check(a.json("GET", "/c/shared")[2]["count"] == 2, "two documents")
    srv.stop()


def run_concurrent_retry(tmp):
    """A retry that arrives while the first write still waits for its fdatasync waits
    for the same sync and gets the same answer: no 409, no second write. The sync is
    held with tests/fault_fsync.c (LD_PRELOAD) while a file exists."""
    hold = os.path.join(tmp, "hold-fsync")
    srv = start_with_fsync_hold(os.path.join(tmp, "retry"), hold)
    check(Http(srv.http_port).json("PUT", "/c/r")[0] == 201, "collection")
    open(hold, "w").close()
    results = {}

    def send(name):
        results[name] = Http(srv.http_port).json("POST", "/c/r/docs", {"v": 1}, {"Idempotency-Key": "once"})
    first = threading.Thread(target=send, args=("first",))
    first.start()
    time.sleep(0.3)   # applied, its answer parked until the held sync
    retry = threading.Thread(target=send, args=("retry",))
    retry.start()
    time.sleep(0.3)
    waiting = dict(results)
    os.unlink(hold)
    first.join(15)
    retry.join(15)
    check(not waiting, "neither is answered before the sync: %r" % waiting)
    (s1, h1, b1), (s2, h2, b2) = results["first"], results["retry"]
    check(s1 == 201 and s2 == 201 and b1 == b2 and h2.get("idempotent-replayed") == "true" and
          "idempotent-replayed" not in h1, "the retry waited and got the first answer: %r %r" % (b1, b2))
    check(Http(srv.http_port).json("GET", "/c/r")[2]["count"] == 1, "one document")
    srv.stop()


def main():
    run_suite("hanudb-sem-", run_main, [(run_allowed_hosts, "allowed hosts"), (run_token_scope, "idempotency keys scoped to tokens"), (run_concurrent_retry, "a concurrent retry waits for the first write's sync")])


if __name__ == "__main__":
    main()
