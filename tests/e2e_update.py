"""Partial updates against a real server (docs/API.md "Updates"): PATCH with a
merge patch and with operators, If-Match (412 on a stale ETag), ?return=document,
idempotency keys; concurrent PATCHes from 8 threads on one document each
setting its own field (all there at the end) and $inc from 8 threads x 50 (the
exact total); update and delete by filter with exact matched/modified/deleted
counts that a later _find agrees with, limit and upsert; the refusals (unknown
operator, a type error naming its path, an "_id" change, too many matches, a
bad Content-Type) each with its code and nothing changed; and an update by
filter under SIGKILL: after the restart either all or none of its documents
changed, and an answered one changed them all."""
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa

MERGE = {"Content-Type": "application/merge-patch+json"}


def get(h, col, id_):
    st, hd, b = h.call("GET", "/c/%s/docs/%s" % (col, id_))
    return st, hd.get("etag"), b


def doc(h, col, id_):
    st, _, b = get(h, col, id_)
    check(st == 200, "GET %s: %d" % (id_, st))
    return json.loads(b)


def find_count(h, col, flt, txn):
    st, _, b = h.json("POST", "/c/%s/_find" % col, {"filter": flt, "count": True, "min_txn": txn})
    check(st == 200, "_find: %d %r" % (st, b))
    return b["count"]


def refused(h, method, path, body, status, code, headers=None, contains=None):
    st, _, b = h.json(method, path, body, headers)
    check(st == status and error_code(b) == code, "%s %s %r: want %d %s, got %d %r" % (method, path, body, status,
                                                                                        code, st, b))
    if contains:
        check(contains in b["error"]["message"], "message %r lacks %r" % (b["error"]["message"], contains))
    return b


def t_patch(h):
    check(h.json("PUT", "/c/u/docs/a", {"n": 1, "o": {"p": 1, "q": 1}, "keep": "x"})[0] == 201, "put a")
    st, hd, b = h.json("PATCH", "/c/u/docs/a", {"o": {"q": None, "r": [1]}, "n": 2}, MERGE)
    check(st == 200 and b["_id"] == "a" and b["etag"] == '"%d"' % b["txn"] and hd.get("etag") == b["etag"],
          "merge patch answer: %d %r %r" % (st, b, hd))
    check(doc(h, "u", "a") == {"_id": "a", "n": 2, "o": {"p": 1, "r": [1]}, "keep": "x"}, "merged")
    stale = b["etag"]
    st, _, b2 = h.json("PATCH", "/c/u/docs/a", {"$inc": {"n": 5}}, {"If-Match": stale})
    check(st == 200 and doc(h, "u", "a")["n"] == 7, "operators by PATCH with a current If-Match: %d %r" % (st, b2))
    _, etag, before = get(h, "u", "a")
    refused(h, "PATCH", "/c/u/docs/a", {"n": 0}, 412, "precondition_failed", dict(MERGE, **{"If-Match": stale}))
    refused(h, "PATCH", "/c/u/docs/a", {"n": 0}, 412, "precondition_failed", dict(MERGE, **{"If-None-Match": "*"}))
    check(get(h, "u", "a")[2] == before, "a failed precondition changes nothing")
    # ?return=document: the new document, as GET returns it
    st, _, b = h.json("PATCH", "/c/u/docs/a?return=document", {"$set": {"z": True}})
    check(st == 200 and b["doc"] == json.loads(get(h, "u", "a")[2]) and b["doc"]["z"] is True, "return=document %r" % b)
    refused(h, "PATCH", "/c/u/docs/a?return=all", {"$set": {"z": 1}}, 400, "invalid_parameter")
    refused(h, "PATCH", "/c/u/docs/a?limit=1", {"$set": {"z": 1}}, 400, "invalid_parameter")
    # a missing document is 404 for both formats, and nothing is created
    refused(h, "PATCH", "/c/u/docs/none", {"x": 1}, 404, "not_found", MERGE)
    refused(h, "PATCH", "/c/u/docs/none", {"$set": {"x": 1}}, 404, "not_found")
    check(get(h, "u", "none")[0] == 404, "no document made")
    # durability none is accepted like any write
    st, _, b = h.json("PATCH", "/c/u/docs/a?durability=none", {"$unset": {"z": 1}})
    check(st == 200 and "z" not in doc(h, "u", "a"), "durability=none: %d %r" % (st, b))
    # idempotency: the same key and request is the first answer again, no second write
    k = {"Idempotency-Key": "patch-1"}
    st1, h1, b1 = h.json("PATCH", "/c/u/docs/a", {"$inc": {"n": 1}}, k)
    st2, h2, b2 = h.json("PATCH", "/c/u/docs/a", {"$inc": {"n": 1}}, k)
    check(st1 == st2 == 200 and b1 == b2 and h2.get("idempotent-replayed") == "true" and doc(h, "u", "a")["n"] == 8,
          "idempotent PATCH: %r %r" % (b1, b2))
    refused(h, "PATCH", "/c/u/docs/a", {"$inc": {"n": 2}}, 422, "idempotency_key_mismatch", k)
    # by id with _update, and upsert
    st, _, b = h.json("POST", "/c/u/docs/a/_update", {"update": {"$push": {"t": {"$each": [1, 2, 3], "$slice": -2}}}})
    check(st == 200 and doc(h, "u", "a")["t"] == [2, 3], "_update by id: %d %r" % (st, b))
    refused(h, "POST", "/c/u/docs/b/_update", {"update": {"$inc": {"n": 1}}}, 404, "not_found")
    st, hd, b = h.json("POST", "/c/u/docs/b/_update", {"update": {"$inc": {"n": 1}}, "upsert": True})
    check(st == 201 and b["upserted"] is True and hd.get("location") == "/c/u/docs/b" and
          doc(h, "u", "b") == {"_id": "b", "n": 1}, "upsert by id: %d %r" % (st, b))
    refused(h, "POST", "/c/u/docs/b/_update", {"update": {"$inc": {"n": 1}}, "other": 1}, 400, "invalid_request")
    st, _, b = h.json("POST", "/c/u/docs/b/_update", {"update": {"$currentDate": {"d": True}}})
    d = doc(h, "u", "b")["d"]
    check(st == 200 and len(d) == 24 and d[10] == "T" and d.endswith("Z"), "$currentDate: %r" % d)


def t_refusals(h):
    h.json("PUT", "/c/u/docs/r", {"a": {"b": "text"}, "n": 1})
    _, etag, before = get(h, "u", "r")
    refused(h, "PATCH", "/c/u/docs/r", {"$foo": {"n": 1}}, 400, "invalid_update", contains="unknown update operator $foo")
    refused(h, "PATCH", "/c/u/docs/r", {"$set": {"n": 2}, "$inc": {"a.b": 1}}, 400, "invalid_update",
            contains='$inc of "a.b": the value is a string, not a number')
    refused(h, "PATCH", "/c/u/docs/r", {"$set": {"_id": "other"}}, 400, "invalid_update", contains='"_id" cannot be changed')
    refused(h, "PATCH", "/c/u/docs/r", {"_id": "other"}, 400, "invalid_update", MERGE)
    refused(h, "PATCH", "/c/u/docs/r", {"n": 2}, 400, "invalid_update", contains="not an update operator")
    refused(h, "PATCH", "/c/u/docs/r", [1], 400, "invalid_update", MERGE)
    refused(h, "PATCH", "/c/u/docs/r", "{", 400, "invalid_json", MERGE)
    st, hd, b = h.call("PATCH", "/c/u/docs/r", b'{"n":2}', {"Content-Type": "text/plain"})
    check(st == 415 and error_code(json.loads(b)) == "unsupported_media_type" and "merge-patch" in hd.get("accept-patch", ""),
          "bad content type: %d %r" % (st, hd))
    refused(h, "POST", "/c/u/_update", {"filter": {"_id": "r"}, "update": {"$inc": {"a.b": 1}}}, 400, "invalid_update",
            contains='document "r": $inc of "a.b": the value is a string, not a number')
    refused(h, "POST", "/c/u/_update", {"filter": {"_id": "r"}, "update": {"$rename": {"_id": "x"}}}, 400, "invalid_update")
    refused(h, "POST", "/c/u/_update", {"filter": {"n": {"$bad": 1}}, "update": {"$set": {"x": 1}}}, 400, "invalid_query")
    refused(h, "POST", "/c/u/_update", {"update": {"$set": {"x": 1}}}, 400, "invalid_request")
    refused(h, "POST", "/c/u/_delete", {"filter": {}, "update": {}}, 400, "invalid_request")
    refused(h, "POST", "/c/u/_delete", {"filter": {}, "limit": 0}, 400, "invalid_request")
    check(get(h, "u", "r") == (200, etag, before), "no refusal changed the document")
    allow = h.call("OPTIONS", "/c/u/docs/r")[1].get("allow", "")
    check("PATCH" in allow, "Allow names PATCH: %r" % allow)


def t_concurrent(port):
    h = Http(port)
    h.json("PUT", "/c/u/docs/conc", {"start": True})
    h.json("PUT", "/c/u/docs/ctr", {"n": 0})
    errors = []

    def fields(i):
        c = Http(port)
        for k in range(10):
            st, _, b = c.json("PATCH", "/c/u/docs/conc", {"f%d_%d" % (i, k): i}, MERGE)
            if st != 200:
                errors.append((st, b))

    def incs(i):
        c = Http(port)
        for _ in range(50):
            st, _, b = c.json("PATCH", "/c/u/docs/ctr", {"$inc": {"n": 1}})
            if st != 200:
                errors.append((st, b))
    for fn in (fields, incs):
        ts = [threading.Thread(target=fn, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
    check(not errors, "every concurrent PATCH answered 200: %r" % errors[:3])
    d = doc(h, "u", "conc")
    missing = [(i, k) for i in range(8) for k in range(10) if d.get("f%d_%d" % (i, k)) != i]
    check(not missing and d["start"] is True, "no patch lost a field: missing %r" % missing[:5])
    check(doc(h, "u", "ctr")["n"] == 400, "$inc 8 x 50 = 400: %r" % doc(h, "u", "ctr"))


def t_by_query(h):
    ops = [{"op": "put", "id": "q%02d" % i, "doc": {"kind": "abc"[i % 3], "v": i}} for i in range(30)]
    st, _, b = h.json("POST", "/c/q/_batch", {"ops": ops})
    check(st == 200, "batch: %r" % b)
    # right after the write, no min_txn: the update waits for the index to see it
    st, _, b = h.json("POST", "/c/q/_update", {"filter": {"kind": "a"}, "update": {"$set": {"flag": True}, "$inc": {"v": 100}}})
    check(st == 200 and b["matched"] == 10 and b["modified"] == 10 and b["upserted_id"] is None, "update a: %r" % b)
    check(find_count(h, "q", {"flag": True}, b["txn"]) == 10, "_find sees the 10")
    check(find_count(h, "q", {"v": {"$gte": 100}}, b["txn"]) == 10, "_find sees the $inc")
    # the same $set again: matched, not modified (and no write)
    st, _, b = h.json("POST", "/c/q/_update", {"filter": {"kind": "a"}, "update": {"$set": {"flag": True}}})
    check(st == 200 and b["matched"] == 10 and b["modified"] == 0, "idempotent set: %r" % b)
    # limit: the first N by _id
    st, _, b = h.json("POST", "/c/q/_update", {"filter": {"kind": "b"}, "update": {"$set": {"lim": 1}}, "limit": 3})
    check(st == 200 and b["matched"] == 3 and b["modified"] == 3, "limit: %r" % b)
    check(find_count(h, "q", {"lim": 1}, b["txn"]) == 3, "_find agrees with the limit")
    check(all(doc(h, "q", "q%02d" % i).get("lim") == 1 for i in (1, 4, 7)), "the first three by _id")
    # nothing matches, no upsert
    st, _, b = h.json("POST", "/c/q/_update", {"filter": {"kind": "zz"}, "update": {"$set": {"x": 1}}})
    check(st == 200 and b["matched"] == 0 and b["modified"] == 0 and b["upserted_id"] is None, "no match: %r" % b)
    # upsert: the filter's equalities, then the update
    st, _, b = h.json("POST", "/c/q/_update", {"filter": {"_id": "new1", "kind": "z", "v": {"$gt": 3}},
                                              "update": {"$inc": {"n": 1}}, "upsert": True})
    check(st == 201 and b["upserted_id"] == "new1" and b["matched"] == 0, "upsert: %r" % b)
    check(doc(h, "q", "new1") == {"_id": "new1", "kind": "z", "n": 1}, "upserted doc %r" % doc(h, "q", "new1"))
    st, _, b = h.json("POST", "/c/q/_update", {"filter": {"kind": "y"}, "update": {"$set": {"w": 1}}, "upsert": True})
    check(st == 201 and len(b["upserted_id"]) == 20 and doc(h, "q", b["upserted_id"])["kind"] == "y", "new id: %r" % b)
    # delete by filter
    st, _, b = h.json("POST", "/c/q/_delete", {"filter": {"kind": "c"}})
    check(st == 200 and b["deleted"] == 10, "delete c: %r" % b)
    check(find_count(h, "q", {"kind": "c"}, b["txn"]) == 0, "_find sees none of c")
    st, _, b = h.json("POST", "/c/q/_delete", {"filter": {"kind": "b"}, "limit": 4})
    check(st == 200 and b["deleted"] == 4 and find_count(h, "q", {"kind": "b"}, b["txn"]) == 6, "delete limit: %r" % b)
    st, _, b = h.json("POST", "/c/q/_delete", {"filter": {"kind": "nothing"}})
    check(st == 200 and b["deleted"] == 0, "delete none: %r" % b)
    # idempotency key on a write by filter
    k = {"Idempotency-Key": "del-b"}
    st1, _, b1 = h.json("POST", "/c/q/_delete", {"filter": {"kind": "b"}}, k)
    st2, h2, b2 = h.json("POST", "/c/q/_delete", {"filter": {"kind": "b"}}, k)
    check(st1 == st2 == 200 and b1 == b2 and b1["deleted"] == 6 and h2.get("idempotent-replayed") == "true",
          "idempotent delete: %r %r" % (b1, b2))
    refused(h, "POST", "/c/nosuch/_update", {"filter": {}, "update": {"$set": {"a": 1}}}, 404, "collection_not_found")


def t_too_many(h):
    for base in (0, 5001):
        ops = [{"op": "put", "id": "b%05d" % i, "doc": {"v": 1}} for i in range(base, base + 5001)]
        check(h.json("POST", "/c/big/_batch", {"ops": ops})[0] == 200, "batch")
    b = refused(h, "POST", "/c/big/_update", {"filter": {"v": 1}, "update": {"$inc": {"v": 1}}}, 400, "too_many",
                contains="10002 documents match")
    check(b["error"]["matched"] == 10002, "the count in the error: %r" % b)
    refused(h, "POST", "/c/big/_delete", {"filter": {}}, 400, "too_many")
    st, _, b = h.json("GET", "/c/big")
    check(b["count"] == 10002 and find_count(h, "big", {"v": 1}, 0) == 10002, "nothing changed")
    # a limit of the batch's size is one record
    st, _, b = h.json("POST", "/c/big/_update", {"filter": {"v": 1}, "update": {"$inc": {"v": 1}}, "limit": 10000})
    check(st == 200 and b["modified"] == 10000 and find_count(h, "big", {"v": 2}, b["txn"]) == 10000, "limit 10000: %r" % b)


def run_main(tmp):
    srv = HttpServer(os.path.join(tmp, "main"))
    srv.start()
    h = Http(srv.http_port)
    check(h.json("PUT", "/c/u")[0] == 201, "collection")
    for name, fn in (("PATCH, If-Match, return, idempotency, _update by id", lambda: t_patch(h)),
                     ("refusals change nothing", lambda: t_refusals(h)),
                     ("8 concurrent PATCHes and $inc 8 x 50", lambda: t_concurrent(srv.http_port)),
                     ("update and delete by filter", lambda: t_by_query(h)),
                     ("too many matches", lambda: t_too_many(h))):
        fn()
        print("ok   %s" % name)
    srv.stop()
    return 0


def run_kill(tmp):
    """An update by filter, SIGKILLed right after its answer or at a random moment
    before: after each restart the 100 documents it touches all have one value."""
    data = os.path.join(tmp, "kill")
    srv = HttpServer(data)
    srv.start()
    h = Http(srv.http_port)
    ops = [{"op": "put", "id": "k%03d" % i, "doc": {"g": i % 2, "v": 0}} for i in range(200)]
    check(h.json("POST", "/c/k/_batch", {"ops": ops})[0] == 200, "batch")
    answered_v = 0
    rng = random.Random(7)
    for rnd in range(8):
        port = srv.http_port
        result = {}

        def send():
            try:
                result["r"] = Http(port).json("POST", "/c/k/_update", {"filter": {"g": 0}, "update": {"$inc": {"v": 1}}})
            except Exception as e:  # the kill cut it
                result["e"] = e
        t = threading.Thread(target=send)
        t.start()
        if rnd % 2 == 0:
            t.join(15)       # killed right after the answer
        else:
            time.sleep(rng.uniform(0, 0.004))   # killed at some moment before or after it
        srv.kill()
        t.join(15)
        srv = HttpServer(data, http_port=srv.http_port)
        srv.start()
        h = Http(srv.http_port)
        st, _, b = h.json("POST", "/c/k/_find", {"filter": {"g": 0}, "limit": 1000})
        vs = set(x["doc"]["v"] for x in b["hits"])
        check(st == 200 and b["count"] == 100 and len(vs) == 1, "round %d: all or none changed: %r" % (rnd, vs))
        v = vs.pop()
        if rnd % 2 == 0:
            # answered at once after a restart too: the wait is for the log's newest record,
            # not for the txn numbering, which resumes higher after a crash
            check("r" in result and result["r"][0] == 200, "round %d: answered %r" % (rnd, result))
        if "r" in result and result["r"][0] == 200:
            check(result["r"][2]["modified"] == 100 and v >= answered_v + 1, "round %d: the answered update is there"
                  % rnd)
        check(v in (answered_v, answered_v + 1), "round %d: one update or none: %d after %d" % (rnd, v, answered_v))
        answered_v = v
        odd = h.json("POST", "/c/k/_find", {"filter": {"g": 1, "v": 0}, "count": True})[2]["count"]
        check(odd == 100, "the others untouched")
    srv.stop()


def run_tokens(tmp):
    """A read-only token updates and deletes nothing (403), by id or by filter."""
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("rw-token-1 rw *\nro-token-1 ro *\n")
    srv = HttpServer(os.path.join(tmp, "tokens-data"), ["--tokens", tokens])
    srv.start()
    rw, ro = Http(srv.http_port, token="rw-token-1"), Http(srv.http_port, token="ro-token-1")
    check(rw.json("PUT", "/c/t/docs/a", {"n": 1})[0] == 201, "rw writes")
    for method, path, body, hd in (("PATCH", "/c/t/docs/a", {"n": 2}, MERGE),
                                   ("PATCH", "/c/t/docs/a", {"$inc": {"n": 1}}, None),
                                   ("POST", "/c/t/docs/a/_update", {"update": {"$inc": {"n": 1}}}, None),
                                   ("POST", "/c/t/_update", {"filter": {}, "update": {"$inc": {"n": 1}}}, None),
                                   ("POST", "/c/t/_delete", {"filter": {}}, None)):
        refused(ro, method, path, body, 403, "forbidden", hd)
    check(json.loads(get(rw, "t", "a")[2])["n"] == 1, "nothing changed")
    check(rw.json("PATCH", "/c/t/docs/a", {"$inc": {"n": 1}})[0] == 200, "rw updates")
    srv.stop()


def main():
    run_suite("hanudb-update-", run_main, [(run_tokens, "a read-only token cannot update"),
                                           (run_kill, "an update by filter under SIGKILL: all or nothing")])


if __name__ == "__main__":
    main()
