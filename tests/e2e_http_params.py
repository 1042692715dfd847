"""Query parameters and Hanu-* headers: every route refuses a parameter it does
not accept, or one given twice, with 400 invalid_parameter naming it, and does
nothing else (a misspelt ?durabilty=bucket must not be answered at `local`);
a misspelt Hanu-* header is refused the same way; a request without a token is
401 before its parameters are looked at."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa

# Every route of src/http/http_route.c: method, path, body, the parameters it accepts.
ROUTES = [
    ("GET", "/_health", None, ()),
    ("HEAD", "/_health", None, ()),
    ("OPTIONS", "/_health", None, ()),
    ("GET", "/_status", None, ()),
    ("HEAD", "/_status", None, ()),
    ("OPTIONS", "/_status", None, ()),
    ("GET", "/metrics", None, ()),
    ("HEAD", "/metrics", None, ()),
    ("OPTIONS", "/metrics", None, ()),
    ("GET", "/c", None, ()),
    ("HEAD", "/c", None, ()),
    ("OPTIONS", "/c", None, ()),
    ("GET", "/c/p", None, ()),
    ("HEAD", "/c/p", None, ()),
    ("PUT", "/c/p2", None, ("durability",)),
    ("DELETE", "/c/p", None, ("durability",)),
    ("OPTIONS", "/c/p", None, ("durability",)),
    ("GET", "/c/p/docs", None, ("limit", "after")),
    ("HEAD", "/c/p/docs", None, ("limit", "after")),
    ("POST", "/c/p/docs", {"v": 1}, ("durability",)),
    ("OPTIONS", "/c/p/docs", None, ("durability", "limit", "after")),
    ("GET", "/c/p/docs/a", None, ()),
    ("HEAD", "/c/p/docs/a", None, ()),
    ("PUT", "/c/p/docs/b", {"v": 2}, ("durability",)),
    ("DELETE", "/c/p/docs/a", None, ("durability",)),
    ("OPTIONS", "/c/p/docs/a", None, ("durability", "return")),
    ("PATCH", "/c/p/docs/a", {"$set": {"v": 3}}, ("durability", "return")),
    ("POST", "/c/p/docs/a/_update", {"update": {"$set": {"v": 3}}}, ("durability", "return")),
    ("OPTIONS", "/c/p/docs/a/_update", None, ("durability", "return")),
    ("POST", "/c/p/_update", {"filter": {}, "update": {"$set": {"v": 3}}}, ("durability",)),
    ("OPTIONS", "/c/p/_update", None, ("durability",)),
    ("POST", "/c/p/_delete", {"filter": {}}, ("durability",)),
    ("OPTIONS", "/c/p/_delete", None, ("durability",)),
    ("POST", "/c/p/_batch", {"ops": [{"op": "put", "id": "c", "doc": {}}]}, ("durability",)),
    ("OPTIONS", "/c/p/_batch", None, ("durability",)),
    ("POST", "/c/p/_find", {"filter": {}}, ()),
    ("OPTIONS", "/c/p/_find", None, ()),
    ("POST", "/c/p/_search", {"q": "x"}, ()),
    ("OPTIONS", "/c/p/_search", None, ()),
    ("POST", "/c/p/_aggs", {"aggs": {"n": {"terms": {"field": "v"}}}}, ()),
    ("OPTIONS", "/c/p/_aggs", None, ()),
    ("POST", "/c/p/_export", None, ()),
    ("OPTIONS", "/c/p/_export", None, ()),
    ("POST", "/_admin/snapshot", None, ()),
    ("OPTIONS", "/_admin/snapshot", None, ()),
]


def refused(h, method, path, body, name, what, headers=None):
    st, hd, raw = h.call(method, path, body, headers)
    check(st == 400, "%s %s: %d %r" % (method, path, st, raw))
    if method == "HEAD":   # no body to read the code from
        return
    b = json.loads(raw)
    check(error_code(b) == "invalid_parameter" and '"%s"' % name in b["error"]["message"] and
          what in b["error"]["message"], "%s %s: %r" % (method, path, b))


def state(h):
    """What a refused request must not change."""
    docs = h.json("GET", "/c/p/docs")[2]["docs"]
    names = sorted(c["name"] for c in h.json("GET", "/c")[2]["collections"])
    return [(d["_id"], d["txn"]) for d in docs], names


def t_every_route(h, srv):
    check(h.json("PUT", "/c/p/docs/a", {"v": 1})[0] == 201, "seed")
    before = state(h)
    for method, path, body, accepted in ROUTES:
        refused(h, method, path + "?ttl=60", body, "ttl", "unknown query parameter")
        # a parameter the route does not take is unknown there, also when another route takes it
        for other in ("durability", "limit", "after"):
            if other not in accepted:
                refused(h, method, path + "?%s=1" % other, body, other, "unknown query parameter")
        if accepted:
            p = accepted[0]
            v = {"durability": "local", "limit": "1", "after": "a"}[p]
            refused(h, method, "%s?%s=%s&%s=%s" % (path, p, v, p, v), body, p, "given twice")
        else:
            refused(h, method, path + "?x=1&x=1", body, "x", "unknown query parameter")
        refused(h, method, path, body, "hanu-durabilty", "unknown request header", {"Hanu-Durabilty": "none"})
    check(state(h) == before, "refused requests changed nothing: %r -> %r" % (before, state(h)))


def t_message(h, srv):
    st, _, b = h.json("PUT", "/c/p/docs/z?durabilty=bucket", {"v": 1})
    check(st == 400 and b["error"]["message"] == 'unknown query parameter "durabilty" for PUT '
          '/c/{collection}/docs/{id}; accepted: durability', "the message: %r" % b)
    check(h.json("GET", "/c/p/docs/z")[0] == 404, "nothing was written")
    st, _, b = h.json("GET", "/_status?verbose=1")
    check(st == 400 and b["error"]["message"].endswith("accepted: none"), "a route without parameters: %r" % b)
    st, _, b = h.json("GET", "/c/p/docs?limit=1&after=%zz")
    check(st == 400 and error_code(b) == "invalid_parameter" and "percent-encoding" in b["error"]["message"],
          "malformed percent-encoding: %r" % b)


def t_accepted(h, srv):
    """The parameters and headers a route takes still work."""
    st, _, b = h.json("PUT", "/c/p/docs/ok1?durability=none", {"v": 1})
    check(st == 201, "durability=none %r" % b)
    st, _, b = h.json("PUT", "/c/p/docs/ok2?durability=bucket", {"v": 1})
    check(st == 201, "durability=bucket %r" % b)
    st, _, b = h.json("POST", "/c/p/docs?durability=local", {"v": 1})
    check(st == 201, "POST durability=local %r" % b)
    st, _, b = h.json("PUT", "/c/p/docs/ok3", {"v": 1}, {"Hanu-Durability": "none"})
    check(st == 201, "Hanu-Durability %r" % b)
    st, _, b = h.json("PUT", "/c/p/docs/ok4", {"v": 1}, {"hanu-DURABILITY": "local"})
    check(st == 201, "header names have no case %r" % b)
    st, _, b = h.json("GET", "/c/p/docs/ok4", None, {"Hanu-Durability": "none"})
    check(st == 200, "a read ignores Hanu-Durability (a client may send it on every request) %r" % b)
    st, _, b = h.json("GET", "/c/p/docs?limit=1&after=ok1")
    check(st == 200 and [d["_id"] for d in b["docs"]] == ["ok2"], "limit and after %r" % b)
    st, _, b = h.json("GET", "/c/p/docs?limit=1&after=o%6B1&")
    check(st == 200 and [d["_id"] for d in b["docs"]] == ["ok2"], "percent-decoded, empty pieces skipped %r" % b)
    st, _, b = h.json("POST", "/c/p/_batch?durability=none", {"ops": [{"op": "delete", "id": "ok1"}]})
    check(st == 200, "_batch durability %r" % b)
    st, _, b = h.json("DELETE", "/c/p/docs/ok2?durability=local")
    check(st == 200, "DELETE durability %r" % b)
    st, _, _ = h.call("OPTIONS", "/c/p/docs/ok3?durability=none")
    check(st == 204, "a preflight carries the request's URL")
    st, _, b = h.json("PUT", "/c/p/docs/ok5?durability=sometimes", {"v": 1})
    check(st == 400 and error_code(b) == "invalid_request", "a bad value stays invalid_request %r" % b)
    st, _, b = h.json("PUT", "/c/p/docs/ok6", {"v": 1}, {"Hanu-Durability": "none", "hanu-durability": "none"})
    check(st == 400 and error_code(b) == "invalid_parameter" and "twice" in b["error"]["message"],
          "a header twice %r" % b)


def run_main(tmp):
    srv = HttpServer(os.path.join(tmp, "params"))
    srv.start()
    return run_cases(srv, [t_every_route, t_message, t_accepted])


def run_tokens(tmp):
    """A request without a token learns nothing about the route's parameters."""
    srv = HttpServer(os.path.join(tmp, "tokens"), ["--tokens", "admin-token-1 rw *"])
    srv.start()
    anon, admin = Http(srv.http_port), Http(srv.http_port, token="admin-token-1")
    st, _, b = anon.json("PUT", "/c/p/docs/a?durabilty=bucket", {"v": 1})
    check(st == 401 and error_code(b) == "unauthorized", "401 first: %r" % b)
    st, _, b = anon.json("GET", "/c/p/docs?ttl=1", None, {"Hanu-Durabilty": "none"})
    check(st == 401, "401 first, also with a misspelt header: %r" % b)
    st, _, b = admin.json("PUT", "/c/p/docs/a?durabilty=bucket", {"v": 1})
    check(st == 400 and error_code(b) == "invalid_parameter", "with the token: %r" % b)
    st, _, b = anon.json("GET", "/_health?x=1")
    check(st == 400 and error_code(b) == "invalid_parameter", "/_health is open: %r" % b)
    srv.stop()


def main():
    run_suite("hanudb-params-", run_main, [(run_tokens, "tokens first")])


if __name__ == "__main__":
    main()
