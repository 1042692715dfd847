"""Queries over the documents index against a real server (docs/API.md, docs/QUERY.md):
a fixed set of 40 documents put over HTTP, then _find with min_txn for every operator
family, sorts, limit/offset and count, each answer compared exactly with a brute-force
evaluator written here; 400 invalid_query with its message, 404 and 409; min_txn held
without blocking the loop (a write on another connection releases it) and 503
index_behind past --min-txn-wait-ms; the same answers after a restart; _aggs and
_search (BM25 computed here) exact on small corpora, its count_relation and track_total, and
its pages through after/next (limit 7) exactly the exhaustive ranking; the listing by id page by page;
docbench's request shapes; the index in _status."""
import functools
import json
import math
import os
import subprocess
import random
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa
from hanukv import Conn, OPS, db_field, OK  # noqa

# ---- the brute-force evaluator (the meaning in docs/QUERY.md) ----


def typ(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num"
    if isinstance(v, str):
        return "str"
    return "arr" if isinstance(v, list) else "obj"


def equal(a, b):
    if typ(a) != typ(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(equal(a[k], b[k]) for k in a)
    return a == b


def walk(v, segs):
    """The values a dotted path reaches (empty: missing)."""
    if not segs:
        return [v]
    s, rest = segs[0], segs[1:]
    if isinstance(v, dict):
        return walk(v[s], rest) if s in v else []
    if isinstance(v, list):
        out = walk(v[int(s)], rest) if s.isdigit() and int(s) < len(v) else []
        for e in v:
            if isinstance(e, dict):
                out += walk(e, segs)
        return out
    return []


def flat(vals):
    out = []
    for v in vals:
        out.append(v)
        if isinstance(v, list):
            out += v
    return out


def eq(vals, operand):
    if not vals:
        return operand is None
    return any(equal(v, operand) for v in flat(vals))


def in_range(vals, op, operand):
    if operand is None:
        return eq(vals, None) if op in ("$gte", "$lte") else False
    t = typ(operand)
    for v in flat(vals):
        if typ(v) != t:
            continue
        if ((op == "$gt" and v > operand) or (op == "$gte" and v >= operand) or
                (op == "$lt" and v < operand) or (op == "$lte" and v <= operand)):
            return True
    return False


def ops_hold(vals, ops):
    for op, x in ops.items():
        if op == "$eq":
            ok = eq(vals, x)
        elif op == "$ne":
            ok = not eq(vals, x)
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            ok = in_range(vals, op, x)
        elif op == "$in":
            ok = any(eq(vals, y) for y in x)
        elif op == "$nin":
            ok = not any(eq(vals, y) for y in x)
        elif op == "$exists":
            ok = bool(vals) == x
        elif op == "$not":
            ok = not ops_hold(vals, x)
        else:
            raise ValueError(op)
        if not ok:
            return False
    return True


def matches(f, doc):
    for k, v in f.items():
        if k == "$and":
            ok = all(matches(x, doc) for x in v)
        elif k == "$or":
            ok = any(matches(x, doc) for x in v)
        elif k == "$nor":
            ok = not any(matches(x, doc) for x in v)
        elif k == "$not":
            ok = not matches(v, doc)
        else:
            vals = walk(doc, k.split("."))
            if isinstance(v, dict) and v and all(o.startswith("$") for o in v):
                ok = ops_hold(vals, v)
            else:
                ok = eq(vals, v)
        if not ok:
            return False
    return True


RANK = {"null": 0, "num": 1, "str": 2, "obj": 3, "arr": 4, "bool": 5}


def sort_value(doc, path):
    vals = walk(doc, path.split("."))
    v = vals[0] if vals else None
    return (RANK[typ(v)], v if v is not None else 0)


def expected_find(docs, body):
    f = body.get("filter", {})
    sort = body.get("sort", [])
    keys = [list(s.items())[0] for s in (sort if isinstance(sort, list) else [{k: v} for k, v in sort.items()])]
    hits = [i for i in docs if matches(f, docs[i])]

    def cmp(a, b):
        for path, direction in keys:
            x, y = sort_value(docs[a], path), sort_value(docs[b], path)
            if x != y:
                return (-1 if x < y else 1) * direction
        return -1 if a.encode() < b.encode() else 1 if a != b else 0
    hits.sort(key=functools.cmp_to_key(cmp))
    off, lim = body.get("offset", 0), body.get("limit", 20)
    return hits[off:off + lim], len(hits)


# ---- the data set ----


def make_docs():
    rnd = random.Random(13)
    docs = {}
    for i in range(40):
        d = {"user": "u%d" % (i % 5), "ts": 1000 + (i * 37) % 41, "kind": ["log", "http", "db"][i % 3]}
        if i % 4:
            d["ms"] = round(rnd.uniform(0, 200), 1)
        if i % 7 == 0:
            d["ms"] = i * 10
        if i % 3 == 0:
            d["tags"] = sorted(rnd.sample(["a", "b", "c", "d"], 1 + i % 3))
        if i % 5 == 0:
            d["addr"] = {"city": ["Oslo", "Rome"][i % 2], "zip": i}
        if i % 6 == 0:
            d["flag"] = i % 12 == 0
        if i % 9 == 0:
            d["note"] = None
        if i % 8 == 1:
            d["code"] = "7"
        elif i % 8 == 2:
            d["code"] = 7
        docs["d%02d" % i] = d
    return docs


FILTERS = [
    {}, {"user": "u1"}, {"user": {"$eq": "u2"}}, {"user": {"$ne": "u2"}},
    {"ts": {"$gt": 1020}}, {"ts": {"$gte": 1020, "$lt": 1030}}, {"ts": {"$lte": 1005}},
    {"ms": {"$gt": 100}}, {"ms": {"$lt": 50.5}}, {"ms": {"$gte": "a"}}, {"kind": {"$gt": "db"}},
    {"code": 7}, {"code": "7"}, {"code": {"$in": [7, "7"]}}, {"code": {"$nin": [7]}},
    {"user": {"$in": ["u0", "u3"]}}, {"user": {"$nin": ["u0", "u3"]}},
    {"ms": {"$exists": False}}, {"addr": {"$exists": True}}, {"note": None}, {"note": {"$exists": True}},
    {"flag": True}, {"flag": False}, {"flag": {"$gte": False}}, {"tags": "b"}, {"tags": ["a", "b"]},
    {"tags": {"$in": ["c", "d"]}}, {"tags": {"$nin": ["a"]}}, {"addr.city": "Oslo"},
    {"addr": {"city": "Rome", "zip": 5}}, {"addr.zip": {"$gt": 10}},
    {"$or": [{"user": "u1"}, {"kind": "db"}]}, {"$and": [{"user": "u1"}, {"ts": {"$gt": 1010}}]},
    {"$nor": [{"user": "u1"}, {"kind": "db"}]}, {"$not": {"kind": "log"}},
    {"ts": {"$not": {"$gt": 1020}}}, {"user": "u4", "kind": {"$in": ["log", "db"]}, "ms": {"$exists": True}},
    {"$or": [{"tags": "a"}, {"ms": {"$gt": 150}}], "ts": {"$lt": 1035}},
]
SORTS = [None, {"ts": -1}, {"ts": 1}, [{"user": 1}, {"ts": -1}], [{"kind": -1}, {"ms": 1}],
         {"ms": -1}, {"code": 1}, {"flag": -1}]


def post_raw(h, path, body):
    """The parsed answer and its text (for byte-identical documents)."""
    st, _, data = h.call("POST" if body is not None else "GET", path, body)
    check(st == 200, "%s %r: %d %r" % (path, body, st, data))
    return json.loads(data), data.decode()


def check_docs(text, hits, raw):
    """Each hit's doc is the stored bytes, as they are, with the write's txn."""
    for x in hits:
        doc, txn = raw[x["_id"]]
        check(('"_id":%s,"txn":%d,"doc":%s' % (json.dumps(x["_id"]), txn, doc)) in text,
              "doc bytes and txn of %s" % x["_id"])


def check_find(h, docs, raw, body, txn):
    body = dict(body, min_txn=txn)
    b, text = post_raw(h, "/c/ev/_find", body)
    want, total = expected_find(docs, body)
    got = [x["_id"] for x in b["hits"]]
    check(got == want and b["count"] == total, "find %r: got %r (%d), want %r (%d)" %
          (body, got, b["count"], want, total))
    more = total > body.get("offset", 0) + body.get("limit", 20)   # next: a cursor exactly when more follow
    check((b["next"] is not None) == more and b["index_txn"] >= txn, "next and index_txn: %r" % b)
    check_docs(text, b["hits"], raw)
    return b


def t_find_pages_fields_count(h, ctx):
    """after/next pages give every match once in order; fields projects; count alone; cursors checked."""
    docs = ctx["docs"]
    for sort in SORTS:
        for flt in ({}, {"kind": {"$ne": "db"}}, {"ms": {"$exists": True}}):
            body = {"filter": flt, "limit": 1000, "min_txn": ctx["txn"]}
            if sort is not None:
                body["sort"] = sort
            want, total = expected_find(docs, body)
            got, after, pages = [], None, 0
            while True:
                page = dict(body, limit=7)
                if after:
                    page["after"] = after
                b, _ = post_raw(h, "/c/ev/_find", page)
                check(b["count"] == total, "count with after: %r" % b)
                got += [x["_id"] for x in b["hits"]]
                pages += 1
                after = b["next"]
                if after is None or pages > 20:
                    break
            check(got == want, "pages of %r: %r, want %r" % (body, got, want))
    b, text = post_raw(h, "/c/ev/_find", {"filter": {"addr.city": "Oslo"}, "fields": ["user", "addr.zip", "nope"],
                                          "limit": 3, "min_txn": ctx["txn"]})
    for x in b["hits"]:
        d = docs[x["_id"]]
        check(x["doc"] == {"_id": x["_id"], "user": d["user"], "addr": {"zip": d["addr"]["zip"]}},
              "projection %r" % x)
    check('"doc":{"_id":"d00","user":"u0","addr":{"zip":0}}' in text, "projection bytes: %s" % text)
    b, text = post_raw(h, "/c/ev/_find", {"filter": {"user": "u1"}, "count": True, "min_txn": ctx["txn"]})
    check(b == {"count": len([d for d in docs.values() if d["user"] == "u1"]), "index_txn": b["index_txn"]},
          "count alone: %r" % b)
    b, _ = post_raw(h, "/c/ev/_find", {"sort": {"ts": 1}, "limit": 2, "min_txn": ctx["txn"]})
    cursor = b["next"]
    for bad in (cursor[:-2], cursor[:5] + ("A" if cursor[5] != "A" else "B") + cursor[6:], "", "!!", 7):
        st, _, e = h.json("POST", "/c/ev/_find", {"sort": {"ts": 1}, "after": bad})
        check(st == 400 and error_code(e) == "invalid_query" and "after" in e["error"]["message"],
              "tampered cursor %r: %d %r" % (bad, st, e))
    st, _, e = h.json("POST", "/c/ev/_find", {"sort": {"ts": -1}, "after": cursor})
    check(st == 400 and error_code(e) == "invalid_query", "cursor of another sort: %d %r" % (st, e))
    # the listing by id, paged while other documents are written: each original once, in order
    for i in range(30):
        h.json("PUT", "/c/lst/docs/k%02d" % i, {"i": i})
    seen, after, extra = [], None, 0
    while True:
        st, _, b = h.json("GET", "/c/lst/docs?limit=4" + ("&after=" + after if after else ""))
        check(st == 200, "listing page: %d %r" % (st, b))
        seen += [d["_id"] for d in b["docs"] if d["_id"].startswith("k")]
        after = b["next"]
        if after is None:
            break
        h.json("PUT", "/c/lst/docs/a%02d" % extra, {"x": extra})   # sorts before every k..
        h.json("PUT", "/c/lst/docs/z%02d" % extra, {"x": extra})   # and after
        extra += 1
    check(seen == ["k%02d" % i for i in range(30)], "listing under writes: %r" % seen)
    st, _, b = h.json("GET", "/_status")
    fc = b["index"]["filter_cache"]
    check(st == 200 and fc["hits"] + fc["misses"] > 0 and fc["max_bytes"] == 64 << 20, "filter cache %r" % fc)


def put_all(h, col, docs):
    raw, txn = {}, 0
    for i, d in docs.items():
        st, _, b = h.json("PUT", "/c/%s/docs/%s" % (col, i), d)
        check(st == 201, "put %s: %d %r" % (i, st, b))
        txn = b["txn"]
        st, hd, data = h.call("GET", "/c/%s/docs/%s" % (col, i))
        raw[i] = (data.decode(), txn)
    return raw, txn


def all_find_cases():
    cases = [{"filter": f} for f in FILTERS]
    cases += [{"filter": {"ts": {"$gt": 1005}}, "sort": s} for s in SORTS if s]
    cases += [{"sort": {"ts": 1}, "limit": 7, "offset": o} for o in (0, 7, 35, 40, 100)]
    cases += [{"filter": {"user": "u2"}, "limit": 1}, {"limit": 1000}]
    return cases


def t_find_every_operator(h, ctx):
    docs, raw, txn = ctx["docs"], ctx["raw"], ctx["txn"]
    ctx["answers"] = [check_find(h, docs, raw, body, txn) for body in all_find_cases()]
    # count: only the count
    for f in FILTERS[:10]:
        st, _, b = h.json("POST", "/c/ev/_find", {"filter": f, "count": True, "min_txn": txn})
        check(st == 200 and b["count"] == expected_find(docs, {"filter": f})[1] and set(b) == {"count", "index_txn"},
              "count of %r: %r" % (f, b))


def t_find_after_delete_and_replace(h, ctx):
    docs, raw = ctx["docs"], ctx["raw"]
    st, _, b = h.json("DELETE", "/c/ev/docs/d03")
    check(st == 200, "delete")
    del docs["d03"]
    docs["d04"] = {"user": "u9", "ts": 999, "kind": "log"}
    st, _, b = h.json("PUT", "/c/ev/docs/d04", docs["d04"])
    check(st == 200, "replace")
    raw["d04"] = (h.call("GET", "/c/ev/docs/d04")[2].decode(), b["txn"])
    ctx["txn"] = b["txn"]
    for body in ({"filter": {"user": {"$in": ["u3", "u4", "u9"]}}, "sort": {"ts": 1}}, {"filter": {"ts": {"$lt": 1003}}}):
        check_find(h, docs, raw, body, b["txn"])


INVALID = [
    ({"filter": {"a": {"$foo": 1}}}, "filter.a: unknown operator $foo"),
    ({"filter": {"$and": [{"x": 1}, {"age": {"$bar": 1}}]}}, "filter.$and[1].age: unknown operator $bar"),
    ({"sort": {"tags": 1}, "filter": {"tags": "a"}}, "sort.tags: cannot sort on an array path"),
    ({"limit": 0}, "limit: must be an integer from 1 to 1000"),
    ({"limit": 1001}, "limit: must be an integer from 1 to 1000"),
    ({"offset": -1}, "offset: must be an integer from 0 to 1000000"),
    ({"count": 1}, "count: must be true or false"),
    ({"bogus": 1}, "bogus: unknown member of a _find request"),
    ([1], "the body must be a JSON object"),
]


def t_invalid_queries(h, ctx):
    for body, msg in INVALID:
        st, _, b = h.json("POST", "/c/ev/_find", body)
        check(st == 400 and error_code(b) == "invalid_query" and b["error"]["message"].startswith(msg),
              "%r: %d %r" % (body, st, b))
    st, _, b = h.json("POST", "/c/ev/_search", {"q": "  "})
    check(st == 400 and error_code(b) == "invalid_query" and b["error"]["message"] == "q: no words to search for",
          "empty q: %r" % b)
    st, _, b = h.json("POST", "/c/ev/_aggs", {"aggs": {"x": {"terms": {"field": "kind", "size": 0}}}})
    check(st == 400 and error_code(b) == "invalid_query" and b["error"]["message"].startswith("aggs.x"), "%r" % b)
    st, _, b = h.json("POST", "/c/ev/_aggs", {})
    check(st == 400 and b["error"]["message"].startswith("aggs: missing"), "%r" % b)


def t_missing_and_wrong_kind(h, ctx):
    for route in ("_find", "_search", "_aggs"):
        st, _, b = h.json("POST", "/c/nope/" + route, {"q": "x", "aggs": {}} if route != "_find" else {})
        check(st == 404 and error_code(b) == "collection_not_found", "%s: %d %r" % (route, st, b))
    st, _, b = h.json("GET", "/c/nope/docs")
    check(st == 404, "listing of a missing collection: %d" % st)
    kv = Conn(ctx["srv"].port)
    check(kv.call(OPS["CREATE"], db_field("cache"))[0] == OK, "kv create")
    kv.close()
    for method, route in (("POST", "_find"), ("POST", "_search"), ("POST", "_aggs"), ("GET", "docs")):
        st, _, b = h.json(method, "/c/cache/" + route, {"q": "x"} if method == "POST" else None)
        check(st == 409 and error_code(b) == "wrong_kind", "%s on a kv database: %d %r" % (route, st, b))


def t_min_txn_held_until_a_write(h, ctx):
    """A query for the next txn is held; a write on another connection is served
    meanwhile (the loop is free), and the held query then sees it."""
    nxt = h.json("GET", "/_status")[2]["txn"] + 1
    out = {}

    def held():
        out["answer"] = Http(ctx["srv"].http_port).json("POST", "/c/ev/_find",
                                                        {"filter": {"user": "late"}, "min_txn": nxt})
    t = threading.Thread(target=held)
    t.start()
    st, _, b = h.json("PUT", "/c/ev/docs/late", {"user": "late", "ts": 1})
    check(st == 201 and b["txn"] == nxt, "write while a query waits: %d %r" % (st, b))
    t.join(30)
    st, _, b = out["answer"]
    check(st == 200 and [x["_id"] for x in b["hits"]] == ["late"] and b["index_txn"] >= nxt, "held find: %r" % b)
    ctx["docs"]["late"] = {"user": "late", "ts": 1}
    ctx["raw"]["late"] = (h.call("GET", "/c/ev/docs/late")[2].decode(), nxt)
    ctx["txn"] = nxt


def t_min_txn_before_the_collection(h, ctx):
    """A query with a min_txn past the log, on a collection that does not exist yet, waits
    for that txn instead of answering 404 (a follower behind its leader sees this): the
    write that creates the collection at that txn answers it. Without min_txn: 404."""
    st, _, b = h.json("POST", "/c/later/_find", {"filter": {}})
    check(st == 404 and error_code(b) == "collection_not_found", "no min_txn: %d %r" % (st, b))
    nxt = h.json("GET", "/_status")[2]["txn"] + 2   # the collection's creation, then the document
    out = {}

    def held():
        out["answer"] = Http(ctx["srv"].http_port).json("POST", "/c/later/_find", {"filter": {}, "min_txn": nxt})
    t = threading.Thread(target=held)
    t.start()
    time.sleep(0.2)   # the query is held by then (not needed for the outcome, only to exercise the wait)
    st, _, b = h.json("PUT", "/c/later/docs/one", {"n": 1})
    check(st == 201 and b["txn"] == nxt, "the creating write: %d %r" % (st, b))
    t.join(30)
    st, _, b = out["answer"]
    check(st == 200 and [x["_id"] for x in b["hits"]] == ["one"], "held find on a new collection: %d %r" % (st, b))
    st, _, _ = h.call("DELETE", "/c/later")
    check(st == 200, "drop: %d" % st)
    ctx["txn"] = h.json("GET", "/_status")[2]["txn"]


def t_aggs(h, ctx):
    docs, txn = ctx["docs"], ctx["txn"]
    body = {"aggs": {"kinds": {"terms": {"field": "kind"}},
                     "tags": {"terms": {"field": "tags", "size": 2}},
                     "ms": {"stats": {"field": "ms"}, "filter": {"kind": "http"}},
                     "h": {"histogram": {"field": "ts", "interval": 10}}},
            "filter": {"ts": {"$gte": 1000}}, "min_txn": txn}
    st, _, b = h.json("POST", "/c/ev/_aggs", body)
    check(st == 200, "aggs: %d %r" % (st, b))
    sel = [d for d in docs.values() if matches(body["filter"], d)]
    check(b["count"] == len(sel), "aggs count %d, want %d" % (b["count"], len(sel)))

    def terms(field, size):
        counts = {}
        for d in sel:
            for v in set(json.dumps(x) for x in flat(walk(d, [field])) if isinstance(x, str)):
                counts[v] = counts.get(v, 0) + 1
        order = sorted(counts.items(), key=lambda kv: (-kv[1], json.loads(kv[0])))
        return ([{"key": json.loads(k), "count": c} for k, c in order[:size]], sum(c for _, c in order[size:]))
    for name, field, size in (("kinds", "kind", 10), ("tags", "tags", 2)):
        buckets, other = terms(field, size)
        check(b["aggs"][name] == {"buckets": buckets, "other": other}, "%s: %r, want %r %r" %
              (name, b["aggs"][name], buckets, other))
    ms = [d["ms"] for d in sel if d["kind"] == "http" and "ms" in d]
    s = b["aggs"]["ms"]
    check(s["count"] == len(ms) and s["min"] == min(ms) and s["max"] == max(ms) and
          abs(s["sum"] - sum(ms)) < 1e-9 and abs(s["avg"] - sum(ms) / len(ms)) < 1e-9, "stats %r of %r" % (s, ms))
    hist = {}
    for d in sel:
        k = math.floor(d["ts"] / 10) * 10
        hist[k] = hist.get(k, 0) + 1
    check(b["aggs"]["h"] == {"buckets": [{"key": k, "count": hist[k]} for k in sorted(hist)]}, "histogram %r" % b)


# ---- search ----

NOTES = {
    "n1": {"title": "Disk full", "body": "the disk is full and the write error repeats", "kind": "log"},
    "n2": {"title": "Write error", "body": "a write error on disk two", "kind": "log"},
    "n3": {"title": "Test run", "body": "test of the disk checker, disk disk", "kind": "test"},
    "n4": {"title": "Network", "body": "packets lost on the network", "kind": "log"},
    "n5": {"title": "Error budget", "body": "error budget spent: error error", "kind": "slo"},
    "n6": {"title": "Disk", "body": "write then error", "kind": "log", "tags": ["disk", "ops"]},
    "n7": {"title": "Quiet", "body": "nothing happened", "kind": "log"},
}


def tokens(s):
    return re.findall(r"[a-z0-9]+", s.lower())


def texts(doc, fields):
    out = []

    def go(v, path):
        if isinstance(v, str):
            if path != "_id" and (not fields or any(path == f or path.startswith(f + ".") for f in fields)):
                out.append(tokens(v))
        elif isinstance(v, list):
            for e in v:
                go(e, path)
        elif isinstance(v, dict):
            for k, x in v.items():
                go(x, k if not path else path + "." + k)
    go(doc, "")
    return out


def occurrences(vals, words):
    n = 0
    for t in vals:
        n += sum(1 for i in range(len(t) - len(words) + 1) if t[i:i + len(words)] == words)
    return n


def bm25(tf, dl, avgdl, n, df):
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))


def expected_search(docs, q, fields=(), flt=None, limit=20):
    clauses = []
    for m in re.finditer(r'([+-]?)("([^"]*)"|(\S+))', q):
        words = tokens(m.group(3) if m.group(3) is not None else m.group(4))
        if words:
            clauses.append((m.group(1), words))
    ids = sorted(docs)
    t = {i: texts(docs[i], fields) for i in ids}
    n = len(ids)
    dl = {i: sum(len(x) for x in t[i]) for i in ids}
    avgdl = sum(dl.values()) / n
    df = {}
    for _, words in clauses:
        for w in words:
            df[w] = sum(1 for i in ids if occurrences(t[i], [w]))
    out = []
    for i in ids:
        tf = [occurrences(t[i], words) for _, words in clauses]
        if any(tf[k] and c[0] == "-" for k, c in enumerate(clauses)):
            continue
        musts = [k for k, c in enumerate(clauses) if c[0] == "+"]
        if any(not tf[k] for k in musts) or (not musts and not any(tf[k] for k, c in enumerate(clauses) if c[0] == "")):
            continue
        score = 0.0
        for k, (occ, words) in enumerate(clauses):
            if occ != "-" and tf[k]:
                idf = sum(math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) for w in words)
                score += idf * tf[k] * 2.2 / (tf[k] + 1.2 * (0.25 + 0.75 * dl[i] / avgdl))
        if flt is None or matches(flt, docs[i]):
            out.append((i, score))
    out.sort(key=lambda x: (-round(x[1], 9), x[0]))
    return out[:limit], len(out)


def t_search(h, ctx):
    raw, txn = put_all(h, "notes", NOTES)
    for body in ({"q": "disk"}, {"q": "disk error"}, {"q": "+disk -test"}, {"q": '"write error"'},
                 {"q": "error", "fields": ["title"]}, {"q": "disk", "fields": ["tags"]},
                 {"q": "disk error", "filter": {"kind": "log"}, "limit": 2}, {"q": "+error +budget"},
                 {"q": "nothingatall"}):
        b, text = post_raw(h, "/c/notes/_search", dict(body, min_txn=txn))
        want, total = expected_search(NOTES, body["q"], body.get("fields", ()), body.get("filter"),
                                      body.get("limit", 20))
        got = [(x["_id"], x["score"]) for x in b["hits"]]
        check(b["count_relation"] == "eq" and (b["next"] is None) == (total <= body.get("limit", 20)),
              "search %r: relation and next %r" % (body, b))
        check([g[0] for g in got] == [w[0] for w in want] and b["count"] == total and
              all(abs(g[1] - w[1]) < 1e-9 for g, w in zip(got, want)),
              "search %r: got %r (%d), want %r (%d)" % (body, got, b["count"], want, total))
        check_docs(text, b["hits"], raw)


PAGE_WORDS = ["alpha", "beta", "gamma", "delta", "echo", "fox", "golf", "hotel"]


def page_docs():
    """200 notes of a small vocabulary (common words, long postings); every fifth text repeats an
    earlier one, so that equal scores are ordered by _id."""
    rnd = random.Random(11)
    docs, texts_so_far = {}, []
    for i in range(200):
        if i % 5 == 4:
            text = rnd.choice(texts_so_far)
        else:
            text = " ".join(rnd.choice(PAGE_WORDS[:rnd.randrange(2, 9)]) for _ in range(rnd.randrange(1, 12)))
        texts_so_far.append(text)
        docs["p%03d" % (199 - i)] = {"text": text, "kind": rnd.choice(["a", "b"])}   # written in reverse id order
    return docs


def search_pages(h, body, limit, txn):
    """Every page of a search through after/next: the hits and the answers."""
    hits, answers, after = [], [], None
    while True:
        b, _ = post_raw(h, "/c/pages/_search", dict(body, limit=limit, min_txn=txn,
                                                     **({"after": after} if after else {})))
        answers.append(b)
        hits += [(x["_id"], x["score"]) for x in b["hits"]]
        after = b["next"]
        check(len(answers) < 1000, "paging does not end")
        if after is None:
            return hits, answers
        check(len(b["hits"]) == limit, "a page before the last is full: %r" % b)


def t_search_pages(h, ctx):
    """Pages of 7 through after/next give the exhaustive ranking: no duplicate, no gap; track_total
    and count_relation; bad track_total and after are 400."""
    docs = page_docs()
    _, txn = put_all(h, "pages", docs)
    for body in ({"q": "alpha beta"}, {"q": "gamma +delta"}, {"q": "hotel golf fox", "filter": {"kind": "a"}},
                 {"q": '"alpha alpha" beta'}, {"q": "alpha", "fields": ["text"]}):
        want, total = expected_search(docs, body["q"], body.get("fields", ()), body.get("filter"), limit=1000)
        check(total > 14, "%r matches %d" % (body, total))
        one, _ = post_raw(h, "/c/pages/_search", dict(body, limit=1000, track_total=True, min_txn=txn))
        exhaustive = [(x["_id"], x["score"]) for x in one["hits"]]
        check(one["count"] == total and one["count_relation"] == "eq" and one["next"] is None and
              sorted(i for i, _ in exhaustive) == sorted(i for i, _ in want) and
              all(abs(s - dict(want)[i]) < 1e-9 for i, s in exhaustive) and
              all((a[1], b[0]) > (b[1], a[0]) for a, b in zip(exhaustive, exhaustive[1:])),
              "%r: the one page %r, want %r" % (body, exhaustive, want))
        ties = sum(1 for a, b in zip(exhaustive, exhaustive[1:]) if a[1] == b[1])
        for track, count, relation in ((None, total, "eq"), (True, total, "eq"), (5, 5, "gte"),
                                       (0, 0, "gte"), (False, 0, "gte"), (total, total, "eq"),
                                       (total - 1, total - 1, "gte")):
            b = dict(body) if track is None else dict(body, track_total=track)
            hits, answers = search_pages(h, b, 7, txn)
            first = next((k for k, (a, b) in enumerate(zip(hits, exhaustive)) if a != b), min(len(hits), len(exhaustive)))
            check(hits == exhaustive, "%r track_total %r: pages differ from hit %d: %r, want %r (%d vs %d hits)" %
                  (body, track, first, hits[first:first + 3], exhaustive[first:first + 3], len(hits), len(exhaustive)))
            check(len(set(i for i, _ in hits)) == len(hits) == total, "duplicates or gaps: %r" % hits)
            check(all(a["count"] == count and a["count_relation"] == relation for a in answers),
                  "%r track_total %r: counts %r" % (body, track, [(a["count"], a["count_relation"]) for a in answers]))
        check(ties > 0 or body["q"] != "alpha beta", "the corpus has equal scores: %d" % ties)
    # offset with after: the page skips that many after the cursor
    b, _ = post_raw(h, "/c/pages/_search", {"q": "alpha beta", "limit": 7})
    one, _ = post_raw(h, "/c/pages/_search", {"q": "alpha beta", "limit": 1000})
    c, _ = post_raw(h, "/c/pages/_search", {"q": "alpha beta", "limit": 3, "offset": 2, "after": b["next"]})
    check([x["_id"] for x in c["hits"]] == [x["_id"] for x in one["hits"][9:12]], "after + offset: %r" % c)
    for body, msg in (({"track_total": "yes"}, "track_total: must be true, false or an integer from 0 to 10000000"),
                      ({"track_total": -1}, "track_total: must be true"),
                      ({"track_total": 10000001}, "track_total: must be true"),
                      ({"track_total": 1.5}, "track_total: must be true"),
                      ({"after": "AAAA"}, "after: not a cursor"),
                      ({"after": 7}, "after: not a cursor"),
                      ({"after": b["next"][:-2]}, "after: not a cursor"),
                      ({"q": "alpha", "after": b["next"]}, "after: not a cursor"),
                      ({"fields": ["text"], "after": b["next"]}, "after: not a cursor")):
        st, _, e = h.json("POST", "/c/pages/_search", dict({"q": "alpha beta"}, **body))
        check(st == 400 and error_code(e) == "invalid_query" and e["error"]["message"].startswith(msg),
              "%r: %d %r" % (body, st, e))
    f, _ = post_raw(h, "/c/pages/_find", {"limit": 2})
    st, _, e = h.json("POST", "/c/pages/_search", {"q": "alpha", "after": f["next"]})
    check(st == 400 and e["error"]["message"].startswith("after: not a cursor"), "a _find cursor: %r" % e)
    st, _, e = h.json("POST", "/c/pages/_find", {"limit": 2, "after": b["next"]})
    check(st == 400 and e["error"]["message"].startswith("after: not a cursor"), "a _search cursor: %r" % e)


def t_listing(h, ctx):
    docs, raw = ctx["docs"], ctx["raw"]
    seen, after = [], None
    while True:
        b, text = post_raw(h, "/c/ev/docs?limit=7" + ("&after=" + after if after else ""), None)
        check_docs(text, b["docs"], raw)
        seen += [x["_id"] for x in b["docs"]]
        after = b["next"]
        if after is None:
            break
    check(seen == sorted(docs), "listing by id: %r" % seen)
    st, _, b = h.json("GET", "/c/ev/docs?limit=0")
    check(st == 400, "limit 0: %d" % st)


def t_docbench_shapes(h, ctx):
    st, _, b = h.json("POST", "/c/ev/_find", {"filter": {"user": "u1"}, "sort": {"ts": -1}, "limit": 20})
    check(st == 200 and b["count"] == len([d for d in ctx["docs"].values() if d["user"] == "u1"]), "find %r" % b)
    st, _, b = h.json("POST", "/c/notes/_search", {"q": "disk", "filter": {"kind": "log"}, "limit": 10})
    check(st == 200 and b["count"] == 3, "search %r" % b)


def t_status(h, ctx):
    st, _, b = h.json("GET", "/_status")
    ix = b["index"]
    check(st == 200 and ix["index_txn"] >= ctx["txn"] and ix["lag_txns"] == b["txn"] - ix["index_txn"] and
          ix["segments"] >= 1 and ix["bytes"] > 0, "status index %r" % b)
    st, _, text = h.call("GET", "/metrics")
    for name in ("hanudb_index_txn", "hanudb_index_lag_txns", "hanudb_index_segments"):
        check(("# TYPE %s gauge" % name) in text.decode(), "metric %s" % name)


def index_behind(tmp):
    srv = HttpServer(os.path.join(tmp, "behind"), ["--min-txn-wait-ms", "200"])
    srv.start()
    h = Http(srv.http_port)
    st, _, w = h.json("PUT", "/c/ev/docs/a", {"x": 1})
    st, _, b = h.json("POST", "/c/ev/_find", {"min_txn": w["txn"] + 5})
    check(st == 503 and error_code(b) == "index_behind" and isinstance(b["error"]["index_txn"], int) and
          b["error"]["index_txn"] <= w["txn"] and "below min_txn %d" % (w["txn"] + 5) in b["error"]["message"],
          "index_behind: %d %r" % (st, b))
    st, _, b = h.json("POST", "/c/ev/_find", {"min_txn": w["txn"]})
    check(st == 200 and [x["_id"] for x in b["hits"]] == ["a"], "min_txn of the write: %d %r" % (st, b))
    check(srv.stop() == 0, "clean stop")


def thread_nice(pid, name):
    """The nice value of the process's thread called name (field 19 of its stat)."""
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            if f.read().strip() != name:
                continue
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            return int(f.read().rsplit(")", 1)[1].split()[16])
    return None


def index_nice(tmp):
    srv = HttpServer(os.path.join(tmp, "nice"), ["--index-nice", "7"])
    srv.start()
    h = Http(srv.http_port)
    st, _, w = h.json("PUT", "/c/ev/docs/a", {"x": 1})
    st, _, b = h.json("POST", "/c/ev/_find", {"min_txn": w["txn"]})
    check(st == 200 and [x["_id"] for x in b["hits"]] == ["a"], "indexed at nice 7: %d %r" % (st, b))
    check(thread_nice(srv.proc.pid, "hanu-indexer") == 7, "indexer thread nice %r" % thread_nice(srv.proc.pid, "hanu-indexer"))
    check(thread_nice(srv.proc.pid, "hanudb") == 0, "the loop stays at nice 0")
    check(srv.stop() == 0, "clean stop")
    for bad in ("20", "-1", "x"):
        out = subprocess.run([os.environ.get("HANUDB_BIN", "build/hanudb"), "serve", "--data", os.path.join(tmp, "bad"),
                              "--index-nice", bad], capture_output=True, text=True, timeout=30)
        check(out.returncode == 2 and "index-nice" in out.stderr, "--index-nice %s: %d %r" % (bad, out.returncode, out.stderr))


def with_ctx(fn, ctx):
    """A case as run_cases calls it, (h, srv), over the shared data set."""
    def case(h, srv):
        fn(h, ctx)
    case.__name__ = fn.__name__
    return case


def run_main(tmp):
    srv = HttpServer(os.path.join(tmp, "q"), ["--index-commit-ms", "50"])
    srv.start()
    h = Http(srv.http_port)
    docs = make_docs()
    raw, txn = put_all(h, "ev", docs)
    ctx = {"srv": srv, "docs": docs, "raw": raw, "txn": txn}
    cases = (t_find_every_operator, t_find_after_delete_and_replace, t_invalid_queries, t_missing_and_wrong_kind,
             t_min_txn_held_until_a_write, t_min_txn_before_the_collection, t_aggs, t_search, t_search_pages, t_listing, t_docbench_shapes, t_status,
             t_find_pages_fields_count)
    failures = run_cases(srv, [with_ctx(t, ctx) for t in cases])
    check(srv.stop() == 0, "clean stop")
    srv.start()
    h = Http(srv.http_port)
    try:
        before = [check_find(h, docs, raw, body, ctx["txn"]) for body in all_find_cases()]
        check(len(before) == len(all_find_cases()), "all cases")
        print("ok   the same answers after a restart")
    except Exception as e:  # noqa
        failures += 1
        print("FAIL restart: %s" % e)
    srv.stop()
    return failures


def main():
    run_suite("hanudb-query-", run_main, [(index_behind, "min_txn past the index: 503 index_behind"),
                                          (index_nice, "--index-nice 7: the indexer thread at nice 7, bad values refused")])


if __name__ == "__main__":
    main()
