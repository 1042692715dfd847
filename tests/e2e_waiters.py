#!/usr/bin/env python3
"""e2e_waiters.py: both faces wait in one place (src/server/waiters.h). With the group
commit's fdatasync held (tests/fault_fsync.c), `local` answers of both faces wait, a `none`
answer behind a `local` one on the same connection waits too (answers stay in request
order), a key-value client that leaves is forgotten (hanudb_waiters counts only who still waits),
and releasing the sync answers everything, in order, with what each write asked; a failed sync
answers nothing as a success."""
import os
import re
import select
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import Http, check, run_suite, start_with_fsync_hold  # noqa
from hanukv import Conn, NONE, OK, OPS, frame, db_field, bytes_field, token_of  # noqa


def metric(port, name):
    text = Http(port).call("GET", "/metrics")[2].decode()
    return float(re.search(r"^%s (\S+)$" % name, text, re.M).group(1))


def wait_for(what, cond, limit=10.0):
    """Polls until cond() holds (the server notices a closed socket on its own time)."""
    deadline = time.time() + limit
    while not cond():
        check(time.time() < deadline, "still not true after %.0f s: %s" % (limit, what))
        time.sleep(0.02)


def nothing_to_read(conn):
    return not conn.buf and not select.select([conn.sock], [], [], 0)[0]


def set_frame(key, flags):
    return frame(OPS["SET"], db_field("default") + bytes_field(key) + bytes_field(b"v"), flags)


def run_held_sync(tmp):
    hold = os.path.join(tmp, "hold-fsync")
    srv = start_with_fsync_hold(os.path.join(tmp, "data"), hold)
    check(Http(srv.http_port).json("PUT", "/c/w")[0] == 201, "collection")
    open(hold, "w").close()

    # Key-value: a `local` write, then a `none` write behind it on the same connection.
    kv = Conn(srv.port)
    kv.send(set_frame(b"a", 0) + set_frame(b"b", NONE))
    # A `none` write alone on its connection is answered after the loop's pwrite, sync or not.
    alone = Conn(srv.port)
    st, p = alone.set(b"c", b"v", flags=NONE)
    check(st == OK, "a none write does not wait for the held sync: %d" % st)
    # Clients that leave while they wait: one of each face.
    gone_kv = Conn(srv.port)
    gone_kv.send(set_frame(b"d", 0))
    gone_http = socket.create_connection(("127.0.0.1", srv.http_port))
    body = b'{"n":1}'
    gone_http.sendall(b"PUT /c/w/docs/gone HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (srv.http_port, len(body), body))
    # An HTTP `local` write that stays.
    result = {}
    t = threading.Thread(target=lambda: result.update(r=Http(srv.http_port).json("PUT", "/c/w/docs/x", {"n": 2})))
    t.start()
    wait_for("four waiters", lambda: metric(srv.http_port, "hanudb_waiters") == 4)
    check(metric(srv.http_port, "hanudb_http_parked_writes") == 2, "two HTTP answers held")
    gone_kv.close()
    gone_http.close()
    # h2o reads nothing from a connection while its request is being answered, so the
    # HTTP client that left is noticed only when its answer is written.
    wait_for("the key-value client that left is forgotten", lambda: metric(srv.http_port, "hanudb_waiters") == 3)
    check(metric(srv.http_port, "hanudb_http_parked_writes") == 2, "two HTTP answers held")
    check(nothing_to_read(kv), "no key-value answer before the sync")
    check("r" not in result, "no HTTP answer before the sync")

    os.unlink(hold)
    st_a, p_a = kv.read_response()
    st_b, p_b = kv.read_response()
    check(st_a == OK and st_b == OK and token_of(p_b) > token_of(p_a), "both answered, in order")
    t.join(15)
    check(result.get("r", (0,))[0] == 201, "the HTTP write answered 201: %r" % (result,))
    durable = metric(srv.http_port, "hanudb_durable_txn")
    check(durable >= token_of(p_b), "answered only once durable (%s < %d)" % (durable, token_of(p_b)))
    check(metric(srv.http_port, "hanudb_waiters") == 0, "nothing waits")
    st, _, _ = Http(srv.http_port).json("GET", "/c/w/docs/gone")
    check(st == 200, "the write of the client that left is applied and durable: %d" % st)
    st, _, doc = Http(srv.http_port).json("GET", "/c/w/docs/x")
    check(st == 200 and doc == {"_id": "x", "n": 2}, "the held write reads back: %r" % (doc,))


def run_failed_sync(tmp):
    """The held sync fails: what waited for it is never a success. A key-value connection
    gets the answers before the failed one, then is closed (outcome unknown); a `none`
    write that was written is still Ok; the HTTP write is a 500."""
    hold, trigger = os.path.join(tmp, "hold2"), os.path.join(tmp, "fail2")
    srv = start_with_fsync_hold(os.path.join(tmp, "failing"), hold, trigger)
    check(Http(srv.http_port).json("PUT", "/c/f")[0] == 201, "collection")
    open(hold, "w").close()
    kv = Conn(srv.port)
    kv.send(set_frame(b"n", NONE) + set_frame(b"l", 0) + set_frame(b"after", NONE))
    result = {}
    t = threading.Thread(target=lambda: result.update(r=Http(srv.http_port).json("PUT", "/c/f/docs/x", {"n": 1})))
    t.start()
    wait_for("two waiters", lambda: metric(srv.http_port, "hanudb_waiters") == 2)
    open(trigger, "w").close()
    os.unlink(hold)
    st, _ = kv.read_response()
    check(st == OK, "the none write before the failed sync was written: Ok")
    try:
        st, p = kv.read_response()
        check(False, "an answer after the failed sync: %d %r" % (st, p))
    except ConnectionError:
        pass   # closed: the outcome of the local write and what followed is unknown
    t.join(15)
    st, _, body = result["r"]
    check(st == 500 and body["error"]["code"] == "internal", "the HTTP write is a 500: %d %r" % (st, body))
    check(metric(srv.http_port, "hanudb_waiters") == 0, "nothing waits")
    check(metric(srv.http_port, "hanudb_store_failed") == 1, "the store says it failed")


if __name__ == "__main__":
    run_suite("hanudb-waiters-", lambda tmp: 0,
              [(run_held_sync, "both faces wait in one place: order, none behind local, a client that leaves"),
               (run_failed_sync, "a failed sync: key-value closed after what was answerable, HTTP 500")])
