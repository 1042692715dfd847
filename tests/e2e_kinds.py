"""Kinds of databases over both faces of a real server (docs/API.md, docs/PROTOCOL.md):
HTTP creates collections, the key-value protocol creates key-value databases; the
key-value protocol reads a collection and writes only JSON documents into it (same
rules as HTTP, "_id" inserted); the documents API answers 409 wrong_kind on a
key-value database. The kinds survive a restart and an offline compaction."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa
from hanukv import Conn, OPS, BIN, db_field, OK, INVALID_REQUEST, PAYLOAD_TOO_LARGE, DB_ALREADY_EXISTS  # noqa


def kv_of(srv):
    return Conn(srv.port)


def t_kv_database_refused_over_http(h, srv):
    kv = kv_of(srv)
    check(kv.call(OPS["CREATE"], db_field("cache"))[0] == OK, "kv create")
    check(kv.set("k", b"\x00\xffbytes", db="cache")[0] == OK, "bytes in a kv database")
    for method, path, body in (("GET", "/c/cache", None), ("PUT", "/c/cache", None),
                               ("DELETE", "/c/cache", None), ("GET", "/c/cache/docs/k", None),
                               ("PUT", "/c/cache/docs/k", {"a": 1}), ("POST", "/c/cache/docs", {"a": 1}),
                               ("DELETE", "/c/cache/docs/k", None),
                               ("POST", "/c/cache/_batch", {"ops": [{"op": "delete", "id": "k"}]}),
                               ("GET", "/c/default/docs/k", None)):
        st, _, b = h.json(method, path, body)
        check(st == 409 and error_code(b) == "wrong_kind" and "key-value database" in b["error"]["message"],
              "%s %s: %d %r" % (method, path, st, b))
    st, _, b = h.json("GET", "/c")
    names = [c["name"] for c in b["collections"]]
    check(st == 200 and "cache" not in names and "default" not in names, "kv databases not listed: %r" % b)
    check(kv.get("k", db="cache")[2] == b"\x00\xffbytes", "the kv value untouched")
    kv.close()


def t_collection_over_kv(h, srv):
    st, _, b = h.json("PUT", "/c/people/docs/ann", {"age": 31})
    check(st == 201, "http create %d" % st)
    kv = kv_of(srv)
    # Reads work as in any database.
    st, tok, val = kv.get("ann", db="people")
    check(json.loads(val) == {"_id": "ann", "age": 31}, "kv read of a document: %r" % val)
    # A kv write must be a JSON object document, with the key as its id.
    for value, word in ((b"not json", "invalid"), (b"[1,2]", "JSON object"), (b'{"_id":"bob"}', "_id"),
                        (b'{"a":1,"a":2}', "duplicate")):
        st, p = kv.set("ann", value, db="people")
        msg = p.decode(errors="replace")
        check(st == INVALID_REQUEST and msg.startswith("a collection holds JSON documents: ") and word in msg,
              "refused %r: %d %r" % (value, st, msg))
    st, p = kv.set("a/b", b"{}", db="people")
    check(st == INVALID_REQUEST and "document id" in p.decode(), "bad id refused: %r" % p)
    st, p = kv.set("big", b'{"x":"' + b"y" * 3000 + b'"}', db="people")
    check(st == PAYLOAD_TOO_LARGE, "over --max-value: %d" % st)
    st, p = kv.batch([("set", "c1", '{"n":1}'), ("set", "c2", "nope")], db="people")
    check(st == INVALID_REQUEST, "a batch with one bad document is refused whole")
    check(h.call("GET", "/c/people/docs/c1")[0] == 404, "nothing of the refused batch written")
    # Accepted: stored like over HTTP, "_id" first, the other bytes as sent.
    check(kv.set("bob", b'{"age": 7}', db="people")[0] == OK, "kv document write")
    st, _, raw = h.call("GET", "/c/people/docs/bob")
    check(st == 200 and raw == b'{"_id":"bob","age": 7}', "stored with _id: %r" % raw)
    check(kv.batch([("set", "c1", '{"n":1}'), ("delete", "bob")], db="people")[0] == OK, "kv batch")
    check(h.call("GET", "/c/people/docs/bob")[0] == 404 and h.call("GET", "/c/people/docs/c1")[0] == 200,
          "batch applied")
    check(kv.delete("c1", db="people")[0] == OK, "kv delete in a collection")
    # The key-value protocol cannot create what HTTP made, and vice versa.
    check(kv.call(OPS["CREATE"], db_field("people"))[0] == DB_ALREADY_EXISTS, "kv create of a collection")
    kv.close()


def kinds_after(h, srv, what):
    kv = kv_of(srv)
    st, _, b = h.json("GET", "/c/cache")
    check(st == 409 and error_code(b) == "wrong_kind", "kv database still refused after %s: %d" % (what, st))
    check(kv.set("x", b"raw", db="cache")[0] == OK, "kv database takes bytes after %s" % what)
    st, p = kv.set("x", b"raw", db="people")
    check(st == INVALID_REQUEST, "collection still checked after %s: %d" % (what, st))
    st, _, raw = h.call("GET", "/c/people/docs/ann")
    check(st == 200 and json.loads(raw)["age"] == 31, "document kept after %s" % what)
    kv.close()


def t_index_follows_kv_writes(h, srv):
    """Issue 24: the indexer's feed skips key-value records without copying them, but its
    watermark moves past them: after key-value writes only, index.index_txn reaches the
    store's txn, and a read-your-writes query on a collection at that txn does not wait."""
    import time
    st, _, b = h.json("PUT", "/c/notes/docs/n1", {"text": "before"})
    check(st == 201, "collection write %d" % st)
    kv = kv_of(srv)
    check(kv.call(OPS["CREATE"], db_field("plain"))[0] == OK, "kv create")
    for i in range(300):
        check(kv.set("k%d" % i, b"v" * 100)[0] == OK, "kv set in default")
        check(kv.set("p%d" % i, b"\x00bytes", db="plain")[0] == OK, "kv set in plain")
    check(kv.batch([("set", "b%d" % i, "x") for i in range(64)])[0] == OK, "kv batch")
    kv.close()
    st, _, s0 = h.json("GET", "/_status")
    last = s0["txn"]
    check(last > b["txn"] + 600, "kv writes took txns: %d after %d" % (last, b["txn"]))
    t0 = time.time()
    st, _, q = h.json("POST", "/c/notes/_find", {"filter": {}, "min_txn": last})
    took = time.time() - t0
    check(st == 200 and [d["_id"] for d in q["hits"]] == ["n1"] and q["index_txn"] >= last,
          "min_txn past key-value writes: %d %r" % (st, q))
    check(took < 2.0, "min_txn after key-value writes took %.2f s" % took)
    deadline = time.time() + 5
    while True:
        st, _, s1 = h.json("GET", "/_status")
        if s1["index"]["index_txn"] >= s1["txn"] or time.time() > deadline:
            break
        time.sleep(0.1)
    check(s1["index"]["index_txn"] >= s1["txn"] and s1["watermarks"]["index"] >= s1["txn"],
          "the index watermark reaches the store's txn after key-value writes: %r" % s1)


def run_main(tmp):
    data = os.path.join(tmp, "kinds")
    srv = HttpServer(data, ["--max-value", "2048", "--file-size", "1M"])
    srv.start()
    failures = run_cases(srv, (t_kv_database_refused_over_http, t_collection_over_kv, t_index_follows_kv_writes))
    check(srv.stop() == 0, "clean stop")
    srv.start()
    kinds_after(Http(srv.http_port), srv, "a restart")
    check(srv.stop() == 0, "clean stop")
    r = subprocess.run([BIN, "compact", "--data", data], capture_output=True, text=True)
    check(r.returncode == 0, "offline compaction: %s" % r.stderr)
    srv.start()
    kinds_after(Http(srv.http_port), srv, "a compaction")
    print("ok   kinds after a restart and a compaction")
    srv.stop()
    return failures


def main():
    run_suite("hanudb-kinds-", run_main, [])


if __name__ == "__main__":
    main()
