"""Read-your-writes for GET by id and _find against a real server, with the hot-document
cache configured and without it (docs/INDEX.md, "The document cache"). Whatever reads
through the cache must never answer an old version; GET and _find's hits did in a
measured version and were switched back to the store, the cache costing more than it
saved. Writer threads each own a few ids and, in a loop, PUT (or DELETE) one of them and
at once GET it on the same connection: the answer must be exactly the version just
written (404 after a delete), while reader threads keep reading every id and the
indexer's invalidations lag behind (commits are rare). Every so often a writer's _find
with min_txn of its write must show its own ids at their newest versions. Then, with
nothing running, two GETs of one document count in /metrics as two lookups with one hit
at least, or as none when GET does not read through the cache; with --doc-cache-bytes 0
nothing is counted and the answers are the same."""
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa

WRITERS, READERS, IDS_PER_WRITER, ROUNDS = 4, 3, 5, 150


def body_of(w, i, k):
    # lengths differ from version to version, so an old copy cannot pass for the new one
    return {"owner": w, "v": k, "pad": "x" * ((k * 37 + i * 11) % 300)}


def writer(port, w, out, errors):
    h = Http(port)
    rnd = random.Random(w)
    current = {}   # id -> version written last (None: deleted)
    try:
        for k in range(1, ROUNDS + 1):
            i = rnd.randrange(IDS_PER_WRITER)
            doc_id = "w%d-%d" % (w, i)
            if rnd.random() < 0.15 and current.get(doc_id) is not None:
                st, _, b = h.json("DELETE", "/c/cc/docs/" + doc_id)
                check(st == 200, "delete %s: %d %r" % (doc_id, st, b))
                current[doc_id] = None
                st, _, b = h.json("GET", "/c/cc/docs/" + doc_id)
                check(st == 404, "GET %s after its DELETE answered: %d %r" % (doc_id, st, b))
            else:
                want = body_of(w, i, k)
                st, _, b = h.json("PUT", "/c/cc/docs/" + doc_id, want)
                check(st in (200, 201), "put %s: %d %r" % (doc_id, st, b))
                txn = b["txn"]
                current[doc_id] = k
                for _ in range(2):   # the first may fill the cache, the second may be served from it
                    st, hd, got = h.json("GET", "/c/cc/docs/" + doc_id)
                    check(st == 200 and got == dict(want, _id=doc_id) and hd.get("etag") == '"%d"' % txn,
                          "GET %s after the PUT of v%d (txn %d) answered: %d %r %r" %
                          (doc_id, k, txn, st, hd.get("etag"), got))
                if k % 25 == 0:
                    st, _, f = h.json("POST", "/c/cc/_find", {"filter": {"owner": w}, "min_txn": txn, "limit": 100})
                    seen = {x["_id"]: x["doc"]["v"] for x in f.get("hits", []) if x["doc"] == dict(
                        body_of(w, int(x["_id"].split("-")[1]), x["doc"]["v"]), _id=x["_id"])}
                    live = {d: v for d, v in current.items() if v is not None}
                    check(st == 200 and seen == live, "_find of writer %d at txn %d: %d %r, want %r" %
                          (w, txn, st, seen, live))
        out[w] = current
    except Exception as e:  # noqa
        errors.append("writer %d: %s" % (w, e))


def reader(port, stop, errors):
    h = Http(port)
    rnd = random.Random()
    try:
        while not stop.is_set():
            doc_id = "w%d-%d" % (rnd.randrange(WRITERS), rnd.randrange(IDS_PER_WRITER))
            st, _, _ = h.call("GET", "/c/cc/docs/" + doc_id)
            check(st in (200, 404), "reader GET %s: %d" % (doc_id, st))
            if rnd.random() < 0.05:
                st, _, _ = h.call("POST", "/c/cc/_find", {"filter": {"owner": rnd.randrange(WRITERS)}})
                check(st in (200, 404), "reader _find: %d" % st)   # 404 until the first PUT
    except Exception as e:  # noqa
        errors.append("reader: %s" % e)


def cache_counts(h):
    st, _, text = h.call("GET", "/metrics")
    vals = {}
    for line in text.decode().splitlines():
        for name in ("hits", "misses"):
            if line.startswith("hanudb_doc_cache_%s_total " % name):
                vals[name] = int(float(line.split()[1]))
    check(st == 200 and len(vals) == 2, "cache metrics: %r" % vals)
    return vals["hits"], vals["misses"]


def run(tmp, name, extra, cached):
    srv = HttpServer(os.path.join(tmp, name), ["--index-commit-ms", "2000"] + extra)
    srv.start()
    port = srv.http_port
    errors, out, stop = [], {}, threading.Event()
    readers = [threading.Thread(target=reader, args=(port, stop, errors)) for _ in range(READERS)]
    writers = [threading.Thread(target=writer, args=(port, w, out, errors)) for w in range(WRITERS)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    check(not errors, "; ".join(errors[:5]))
    check(len(out) == WRITERS, "every writer finished")
    h = Http(port)
    # everything indexed (and so every invalidation done): then the counts are exact
    st, _, b = h.json("PUT", "/c/cc/docs/last", {"owner": -1})
    st, _, f = h.json("POST", "/c/cc/_find", {"filter": {"owner": -1}, "min_txn": b["txn"]})
    check(st == 200 and [x["_id"] for x in f["hits"]] == ["last"], "_find last: %d %r" % (st, f))
    hits0, misses0 = cache_counts(h)
    for _ in range(2):
        st, _, got = h.json("GET", "/c/cc/docs/last")
        check(st == 200 and got == {"_id": "last", "owner": -1}, "GET last: %d %r" % (st, got))
    hits1, misses1 = cache_counts(h)
    if cached:
        # GET reads through the cache (two lookups, the second a hit) or not at all (none): the
        # cache is unused while it costs more than it saves (docs/INDEX.md, "The document cache")
        lookups = (hits1 - hits0) + (misses1 - misses0)
        check((lookups == 2 and hits1 - hits0 >= 1) or (lookups == 0 and hits1 == hits0),
              "two GETs: hits %d -> %d, misses %d -> %d" % (hits0, hits1, misses0, misses1))
    else:
        check((hits0, misses0, hits1, misses1) == (0, 0, 0, 0), "no cache, no counts: %r" %
              ((hits0, misses0, hits1, misses1),))
    # every id at its final version, through GET and through _find
    for w, current in out.items():
        for doc_id, k in current.items():
            st, _, got = h.json("GET", "/c/cc/docs/" + doc_id)
            if k is None:
                check(st == 404, "final GET %s: %d" % (doc_id, st))
            else:
                i = int(doc_id.split("-")[1])
                check(st == 200 and got == dict(body_of(w, i, k), _id=doc_id), "final GET %s: %r" % (doc_id, got))
    check(srv.stop() == 0, "clean stop")


def run_main(tmp):
    failures = 0
    for name, extra, cached in (("cached", [], True), ("uncached", ["--doc-cache-bytes", "0"], False)):
        try:
            run(tmp, name, extra, cached)
            print("ok   read-your-writes under concurrency, %s" % name)
        except Exception as e:  # noqa
            failures += 1
            print("FAIL %s: %s" % (name, e))
    return failures


def main():
    run_suite("hanudb-doccache-", run_main, [])


if __name__ == "__main__":
    main()
