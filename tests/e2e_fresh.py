"""Fresh by default (docs/API.md, "Read your writes"): a query sees every write
acknowledged before it arrived, without min_txn. The index commits only every 60 s
here, so everything a query sees it sees through a refresh asked for by the query.

- a write's 201 at `none` and at `local`, then at once _find, _search, _aggs and a
  count: the document is there, every time;
- a delete, then at once: count 0 and no hits (it used to answer count 1, hits []);
- "fresh": false answers from what the index had (below the write's txn), at once;
  "fresh": "yes" is 400;
- `fields` goes into nested arrays, and {"a.0":42} does not match {"a":[[42]]}
  (MongoDB's rules), over HTTP;
- on a follower: ?min_txn= on a get by id and on the listing waits until the follower
  has applied the txn (a get without it answers 404 then), past --min-txn-wait-ms 503
  store_behind with applied_txn; a bad or repeated min_txn is 400 invalid_parameter;
  a query on the follower right after that get sees the document too;
- writes to another collection and to a key-value database do not hold a fresh query
  (query.held stays), while a write to its own collection does."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import check  # noqa
from hanuhttp import HttpServer, Http, error_code

COMMIT_MS = "60000"   # no commit during the test: only refreshes publish


def doc_ids(body):
    return [h["_id"] for h in body["hits"]]


def writes_then_queries(h):
    st, _, b = h.json("PUT", "/c/f")
    check(st in (200, 201), "create: %d %r" % (st, b))
    for durability in ("none", "local"):
        for i in range(25):
            did = "%s-%d" % (durability, i)
            st, _, w = h.json("PUT", "/c/f/docs/%s?durability=%s" % (did, durability),
                              {"user": did, "body": "word%s%d common" % (durability, i), "n": i})
            check(st == 201, "put %s: %d %r" % (did, st, w))
            st, _, f = h.json("POST", "/c/f/_find", {"filter": {"user": did}})
            check(st == 200 and doc_ids(f) == [did] and f["count"] == 1 and f["index_txn"] >= w["txn"],
                  "find right after the 201 of %s (txn %d): %d %r" % (did, w["txn"], st, f))
            st, _, s = h.json("POST", "/c/f/_search", {"q": "word%s%d" % (durability, i)})
            check(st == 200 and doc_ids(s) == [did] and s["count"] == 1, "search for %s: %d %r" % (did, st, s))
            st, _, a = h.json("POST", "/c/f/_aggs", {"filter": {"n": i}, "aggs": {"u": {"terms": {"field": "user"}}}})
            check(st == 200 and a["count"] == 2 - (durability == "none") and
                  {"key": did, "count": 1} in a["aggs"]["u"]["buckets"], "aggs for %s: %d %r" % (did, st, a))
    print("ok   a write's 201 (none and local), then at once: _find, _search and _aggs see it (50 writes)")

    for i in range(10):
        did = "none-%d" % i
        st, _, d = h.json("DELETE", "/c/f/docs/%s?durability=none" % did)
        check(st == 200, "delete %s: %d %r" % (did, st, d))
        st, _, f = h.json("POST", "/c/f/_find", {"filter": {"user": did}})
        check(st == 200 and f["count"] == 0 and f["hits"] == [], "find after the delete of %s: %r" % (did, f))
        st, _, c = h.json("POST", "/c/f/_find", {"filter": {"user": did}, "count": True})
        check(st == 200 and c["count"] == 0, "count after the delete of %s: %r" % (did, c))
    print("ok   a delete, then at once: count 0 and no hits")

    st, _, w = h.json("PUT", "/c/f/docs/late?durability=none", {"user": "late"})
    check(st == 201, "put late: %d" % st)
    st, _, f = h.json("POST", "/c/f/_find", {"filter": {"user": "late"}, "fresh": False})
    check(st == 200 and f["index_txn"] < w["txn"] and f["hits"] == [] and f["count"] == 0,
          "fresh:false answers from what the index had: %d %r (write txn %d)" % (st, f, w["txn"]))
    st, _, f = h.json("POST", "/c/f/_find", {"filter": {"user": "late"}, "fresh": True})
    check(st == 200 and doc_ids(f) == ["late"], "fresh:true: %d %r" % (st, f))
    st, _, e = h.json("POST", "/c/f/_search", {"q": "x", "fresh": "yes"})
    check(st == 400 and error_code(e) == "invalid_query" and "fresh" in e["error"]["message"],
          "fresh must be a boolean: %d %r" % (st, e))
    print("ok   \"fresh\": false answers from the index as it is (below the write's txn); a non-boolean is 400")


def mongo_semantics(h):
    st, _, _ = h.json("PUT", "/c/m/docs/nested", {"a": [[1, {"x": 2}], {"x": 3}, 5], "b": [[42]]})
    check(st == 201, "put nested: %d" % st)
    st, _, _ = h.json("PUT", "/c/m/docs/flat", {"b": [42]})
    check(st == 201, "put flat: %d" % st)
    st, _, f = h.json("POST", "/c/m/_find", {"filter": {"_id": "nested"}, "fields": ["a.x"]})
    check(st == 200 and f["hits"][0]["doc"] == {"_id": "nested", "a": [[{"x": 2}], {"x": 3}]},
          "projection into nested arrays: %d %r" % (st, f))
    st, _, f = h.json("POST", "/c/m/_find", {"filter": {"b.0": 42}})
    check(st == 200 and doc_ids(f) == ["flat"], "{b.0: 42} matches [42], not [[42]]: %r" % f)
    st, _, f = h.json("POST", "/c/m/_find", {"filter": {"b.0": [42]}})
    check(st == 200 and doc_ids(f) == ["nested"], "{b.0: [42]} matches [[42]]: %r" % f)
    print("ok   fields into nested arrays; a position picks an element compared whole")


def follower_min_txn(tmp):
    url = "file://" + os.path.join(tmp, "bucket")
    leader = HttpServer(os.path.join(tmp, "leader"), ["--bucket", url, "--seal-interval-ms", "100"])
    leader.start()
    h = Http(leader.http_port)
    st, _, w = h.json("PUT", "/c/r/docs/first?durability=bucket", {"n": 1})
    check(st == 201, "first: %d" % st)
    follower = HttpServer(os.path.join(tmp, "follower"),
                          ["--bucket", url, "--follow", "--poll-ms", "400", "--min-txn-wait-ms", "1500",
                           "--index-commit-ms", COMMIT_MS])
    follower.start()
    fh = Http(follower.http_port)
    st, _, d = fh.json("GET", "/c/r/docs/first?min_txn=%d" % w["txn"])
    check(st == 200 and d["n"] == 1, "get first on the follower with min_txn: %d %r" % (st, d))
    seen_404 = 0
    for i in range(5):
        st, _, w = h.json("PUT", "/c/r/docs/d%d?durability=bucket" % i, {"n": 10 + i})
        check(st == 201, "put d%d: %d" % (i, st))
        st, _, d = fh.json("GET", "/c/r/docs/d%d" % i)
        seen_404 += st == 404
        st, _, d = fh.json("GET", "/c/r/docs/d%d?min_txn=%d" % (i, w["txn"]))
        check(st == 200 and d["n"] == 10 + i, "get d%d with min_txn %d: %d %r" % (i, w["txn"], st, d))
        st, _, f = fh.json("POST", "/c/r/_find", {"filter": {"n": 10 + i}})
        check(st == 200 and doc_ids(f) == ["d%d" % i], "find on the follower after the get: %r" % f)
    check(seen_404 >= 3, "without min_txn the follower answered before applying (%d of 5 gets were 404)" % seen_404)
    st, _, w = h.json("PUT", "/c/r/docs/listed?durability=bucket", {"n": 99})
    check(st == 201, "put listed: %d" % st)
    st, _, l = fh.json("GET", "/c/r/docs?limit=100&min_txn=%d" % w["txn"])
    check(st == 200 and "listed" in [x["_id"] for x in l["docs"]], "listing with min_txn: %d %r" % (st, l))
    print("ok   follower: ?min_txn= on a get by id and on the listing waits until the txn is applied")

    t0 = time.time()
    st, _, e = fh.json("GET", "/c/r/docs/first?min_txn=%d" % (w["txn"] + 1000000))
    took = time.time() - t0
    check(st == 503 and error_code(e) == "store_behind" and e["error"]["applied_txn"] >= w["txn"] and took >= 1.4,
          "min_txn never applied: %d %r after %.2f s" % (st, e, took))
    st, _, e = fh.json("GET", "/c/r/docs?min_txn=%d" % (w["txn"] + 1000000))
    check(st == 503 and error_code(e) == "store_behind", "listing, min_txn never applied: %d %r" % (st, e))
    for q in ("min_txn=x", "min_txn=-1", "min_txn=", "min_txn=1&min_txn=2", "min_txn=99999999999999999999"):
        for path in ("/c/r/docs/first", "/c/r/docs"):
            st, _, e = fh.json("GET", "%s?%s" % (path, q))
            check(st == 400 and error_code(e) == "invalid_parameter", "%s?%s: %d %r" % (path, q, st, e))
    st, _, e = fh.json("GET", "/c/r/docs/first?bogus=1")
    check(st == 400 and error_code(e) == "invalid_parameter", "bogus on a get: %d %r" % (st, e))
    print("ok   min_txn never applied: 503 store_behind after --min-txn-wait-ms; bad or repeated min_txn: 400")
    check(follower.stop() == 0, "follower stopped cleanly")
    check(leader.stop() == 0, "leader stopped cleanly")


def others_do_not_hold(h, kv_port):
    """Writes to another collection and to a key-value database do not hold a fresh
    query of this one: its target is its own collection's newest record. The index
    commits only every 60 s here, so a held query would show in query.held (and wait
    for a refresh); a write to this collection still holds the next query."""
    import hanukv
    for col in ("quiet", "busy"):
        st, _, b = h.json("PUT", "/c/%s" % col)
        check(st in (200, 201), "create %s: %d %r" % (col, st, b))
    st, _, _ = h.json("PUT", "/c/quiet/docs/q1", {"n": 1})
    check(st == 201, "put q1: %d" % st)
    st, _, f = h.json("POST", "/c/quiet/_find", {"filter": {"n": 1}})
    check(st == 200 and doc_ids(f) == ["q1"], "q1 found: %r" % f)
    kv = hanukv.Conn(kv_port)
    held0 = h.json("GET", "/_status")[2]["query"]["held"]
    for i in range(30):
        st, _, _ = h.json("PUT", "/c/busy/docs/b%d?durability=none" % i, {"n": i})
        check(st == 201, "busy write %d: %d" % (i, st))
        check(kv.set(b"k%d" % i, b"v", flags=hanukv.NONE)[0] == hanukv.OK, "kv write %d" % i)
        st, _, f = h.json("POST", "/c/quiet/_find", {"filter": {"n": 1}})
        check(st == 200 and doc_ids(f) == ["q1"], "quiet find %d: %r" % (i, f))
    held1 = h.json("GET", "/_status")[2]["query"]["held"]
    check(held1 == held0, "fresh queries of a quiet collection were held %d times by others' writes" % (held1 - held0))
    # its own write still holds the next query until the index has it
    st, _, _ = h.json("PUT", "/c/quiet/docs/q2?durability=none", {"n": 1})
    check(st == 201, "put q2: %d" % st)
    st, _, f = h.json("POST", "/c/quiet/_find", {"filter": {"n": 1}, "sort": [{"_id": 1}]})
    check(st == 200 and doc_ids(f) == ["q1", "q2"], "q2 seen at once: %r" % f)
    check(h.json("GET", "/_status")[2]["query"]["held"] == held1 + 1, "the query after q2 was held once")
    kv.close()


def run(tmp):
    srv = HttpServer(os.path.join(tmp, "data"), ["--index-commit-ms", COMMIT_MS])
    srv.start()
    h = Http(srv.http_port)
    writes_then_queries(h)
    mongo_semantics(h)
    others_do_not_hold(h, srv.port)
    st, _, s = h.json("GET", "/_status")
    check(st == 200 and s["index"]["commits"] == 0 and s["index"]["refreshes"] >= 50,
          "published by refreshes, no commit: %r" % s["index"])
    check(srv.stop() == 0, "server stopped cleanly")
    follower_min_txn(tmp)


if __name__ == "__main__":
    from hanuhttp import run_suite
    run_suite("fresh-", run, [])
