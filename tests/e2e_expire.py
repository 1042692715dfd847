"""Expiring documents (`PUT /c/{col}` `{"expire_after_field": ...}`), against a real
leader on a file bucket and a follower of it: documents whose field (epoch seconds
or an RFC 3339 string) passes disappear at once from every read path (GET, the
listing, _find, _search, the NDJSON export) on both nodes; the follower never
sweeps (its key count stays while the leader is down); the leader's sweep deletes
them as ordinary deletes that reach the follower through the bucket; what was
swept stays deleted across a restart; the option survives restarts and is
refused when malformed; a follower refuses the option and imports (421)."""
import json
import os
import sys
import time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, error_code, run_suite

J = {"Content-Type": "application/json"}


def get_json(h, method, path, body=None):
    st, _, d = h.call(method, path, json.dumps(body) if body is not None else None)
    return st, json.loads(d) if d else None


def visible(port, col, min_txn=0):
    """The ids each read path returns: GET of each known id, the listing, _find,
    _search, the NDJSON export."""
    h = Http(port)
    out = {}
    st, lst = get_json(h, "GET", "/c/%s/docs?limit=1000" % col)
    check(st == 200, "listing %d" % st)
    out["list"] = sorted(d["_id"] for d in lst["docs"])
    st, f = get_json(h, "POST", "/c/%s/_find" % col, {"filter": {}, "limit": 1000, "min_txn": min_txn})
    check(st == 200, "find %d %r" % (st, f))
    out["find"] = sorted(x["_id"] for x in f["hits"])
    st, s = get_json(h, "POST", "/c/%s/_search" % col, {"q": "common", "limit": 1000, "min_txn": min_txn})
    check(st == 200, "search %d %r" % (st, s))
    out["search"] = sorted(x["_id"] for x in s["hits"])
    st, _, nd = h.call("GET", "/c/%s/docs?format=ndjson" % col)
    check(st == 200, "export %d" % st)
    out["export"] = sorted(json.loads(x)["_id"] for x in nd.decode().splitlines())
    out["get"] = sorted(i for i in IDS if h.call("GET", "/c/%s/docs/%s" % (col, i))[0] == 200)
    return out


IDS = ["epoch", "rfc", "never", "later", "notadate", "past"]


def keys(port, col):
    st, info = get_json(Http(port), "GET", "/c/%s" % col)
    check(st == 200, "GET /c/%s: %d" % (col, st))
    return info["count"]


def wait_txn(leader, follower, timeout=20):
    target = get_json(Http(leader.http_port), "GET", "/_status")[1]["txn"]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if get_json(Http(follower.http_port), "GET", "/_status")[1]["txn"] >= target:
            return target
        time.sleep(0.05)
    raise AssertionError("the follower did not reach txn %d" % target)


def all_paths_are(v, want, where):
    for path, ids in v.items():
        check(ids == want, "%s, %s: %r, want %r" % (where, path, ids, want))


def run(tmp):
    url = "file://" + os.path.join(tmp, "bucket")
    leader = HttpServer(os.path.join(tmp, "leader"), ["--bucket", url, "--seal-interval-ms", "100", "--retain", "0"])
    leader.start()
    h = Http(leader.http_port)
    # the option: refused when malformed, set, shown
    for body in ({"expire_after_field": 5}, {"expire_after_field": ""}, {"expire": "x"},
                 {"expire_after_field": "a", "more": 1}, [1]):
        st, b = get_json(h, "PUT", "/c/ttl", body)
        check(st == 400 and error_code(b) == "invalid_request", "refused %r: %d %r" % (body, st, b))
    check(h.call("GET", "/c/ttl")[0] == 404, "a refused option creates nothing")
    st, b = get_json(h, "PUT", "/c/ttl", {"expire_after_field": "expires_at"})
    check(st == 201 and b["expire_after_field"] == "expires_at" and b["created"], "set: %d %r" % (st, b))
    st, b = get_json(h, "GET", "/c/ttl")
    check(b.get("expire_after_field") == "expires_at", "shown: %r" % b)
    # documents: two expire in ~2.5 s (epoch seconds; RFC 3339 with an offset), the rest never
    # or far later, one expired already when written
    at = time.time() + 2.5
    rfc = datetime.fromtimestamp(at, timezone(timedelta(hours=2))).isoformat(timespec="milliseconds")
    docs = {"epoch": {"expires_at": at}, "rfc": {"expires_at": rfc}, "never": {"x": 1},
            "later": {"expires_at": time.time() + 3600}, "notadate": {"expires_at": "soon"},
            "past": {"expires_at": "2001-01-01T00:00:00Z"}}
    last = 0
    for i, d in docs.items():
        d["text"] = "common words"
        st, b = get_json(h, "PUT", "/c/ttl/docs/" + i, d)
        check(st == 201, "put %s: %d %r" % (i, st, b))
        last = b["txn"]
    follower = HttpServer(os.path.join(tmp, "follower"), ["--bucket", url, "--follow", "--poll-ms", "100"])
    follower.start()
    wait_txn(leader, follower)
    fh = Http(follower.http_port)
    st, _, d = fh.call("POST", "/c/ttl/_import", '{"_id":"x"}\n', {"Content-Type": "application/x-ndjson"})
    check(st == 421 and error_code(json.loads(d)) == "not_leader", "import on a follower: %d %r" % (st, d))
    st, b = get_json(fh, "PUT", "/c/ttl", {"expire_after_field": "other"})
    check(st == 421, "the option on a follower: %d %r" % (st, b))
    live = ["epoch", "later", "never", "notadate", "rfc"]
    all_paths_are(visible(leader.http_port, "ttl", last), live, "leader before")
    all_paths_are(visible(follower.http_port, "ttl", last), live, "follower before")
    print("ok   before expiry: every read path on both nodes; an expired one hidden from its write on")
    # stop the leader before the two expire: the follower alone must hide them, and not sweep
    check(keys(follower.http_port, "ttl") >= 5, "follower keys before")
    leader.stop()
    keys_before = keys(follower.http_port, "ttl")
    while time.time() < at + 0.05:
        time.sleep(0.05)
    left = ["later", "never", "notadate"]
    all_paths_are(visible(follower.http_port, "ttl", last), left, "follower after expiry")
    time.sleep(2.5)   # two sweep intervals: a follower that swept would have written (or tried)
    check(keys(follower.http_port, "ttl") == keys_before, "the follower did not sweep: %d keys, had %d" % (
        keys(follower.http_port, "ttl"), keys_before))
    print("ok   the follower alone hides them at once and does not sweep")
    # the leader back: it hides them at once and sweeps them as deletes the follower applies
    leader.start()
    h = Http(leader.http_port)
    all_paths_are(visible(leader.http_port, "ttl"), left, "leader after restart")
    deadline = time.time() + 15
    while keys(leader.http_port, "ttl") != 3 and time.time() < deadline:
        time.sleep(0.1)
    check(keys(leader.http_port, "ttl") == 3, "swept on the leader: %d keys" % keys(leader.http_port, "ttl"))
    st, s = get_json(h, "GET", "/_status")
    check(s.get("expired_docs", 0) == 3, "3 swept (epoch, rfc, past): %r" % s.get("expired_docs"))
    wait_txn(leader, follower)
    check(keys(follower.http_port, "ttl") == 3, "the deletes reached the follower: %d keys" % keys(follower.http_port, "ttl"))
    print("ok   the leader sweeps them as deletes that reach the follower")
    # after a restart: still deleted, the option still there, nothing more swept
    leader.stop()
    leader.start()
    h = Http(leader.http_port)
    check(keys(leader.http_port, "ttl") == 3, "after restart: %d keys" % keys(leader.http_port, "ttl"))
    check(get_json(h, "GET", "/c/ttl")[1].get("expire_after_field") == "expires_at", "option kept")
    all_paths_are(visible(leader.http_port, "ttl"), left, "leader after second restart")
    # a renewed document is kept; removing the option shows what it hid
    st, b = get_json(h, "PUT", "/c/ttl/docs/later", {"expires_at": "2001-01-01T00:00:00+00:00", "text": "common"})
    check(h.call("GET", "/c/ttl/docs/later")[0] == 404, "expired by its new version")
    st, b = get_json(h, "PUT", "/c/ttl", {"expire_after_field": None})
    check(st == 200 and b["expire_after_field"] is None, "removed: %d %r" % (st, b))
    if keys(leader.http_port, "ttl") == 3:   # not swept yet: visible again without the option
        check(h.call("GET", "/c/ttl/docs/later")[0] == 200, "no option, no expiry")
    check("expire_after_field" not in get_json(h, "GET", "/c/ttl")[1], "no option shown")
    # dropping the collection drops its option: a new one of the name does not expire
    check(h.call("DELETE", "/c/ttl")[0] == 200, "drop")
    st, b = get_json(h, "PUT", "/c/ttl", {"expire_after_field": "e"})
    check(h.call("DELETE", "/c/ttl")[0] == 200, "drop again")
    check(h.call("PUT", "/c/ttl")[0] == 201, "created again")
    check("expire_after_field" not in get_json(h, "GET", "/c/ttl")[1], "the dropped collection's option is gone")
    print("ok   restart, renewal, removing the option, dropping the collection")
    leader.stop()
    follower.stop()
    return 0


def main():
    run_suite("hanudb-expire-", run, [])


if __name__ == "__main__":
    main()
