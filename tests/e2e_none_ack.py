"""durability=none answers promise that a process crash cannot lose the write:
the answer leaves only once the frame is in the page cache, and a failed pwrite
never yields Ok. Both faces, against a real server with an LD_PRELOAD shim
(tests/fault_fsync.c) that stalls or fails the pwrite of log files while a
trigger file exists. On 968cee4 the stalled case lost an answered write: the
answer went out at once while the frame waited for the loop's pwrite."""
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http

BUILD = os.environ.get("HANUDB_BUILD", os.path.join(ROOT, "build"))
JSON = {"Content-Type": "application/json"}


def start(srv_cls, data, tmp):
    os.environ["LD_PRELOAD"] = os.path.join(BUILD, "tests", "libfault_fsync.so")
    os.environ["HANUDB_FAULT_PWRITE_DELAY_TRIGGER"] = os.path.join(tmp, "stall")
    os.environ["HANUDB_FAULT_PWRITE_FAIL_TRIGGER"] = os.path.join(tmp, "fail")
    srv = srv_cls(data, ["--file-size", "1M"])
    srv.start()
    del os.environ["LD_PRELOAD"]
    return srv


def kv_stalled_pwrite_then_kill(tmp):
    data = os.path.join(tmp, "kv")
    srv = start(Server, data, tmp)
    try:
        c = Conn(srv.port)
        check(c.set("before", "1")[0] == OK, "a local write")
        open(os.path.join(tmp, "stall"), "w").close()
        t0 = time.time()
        st, p = c.set("answered", "yes", flags=NONE)
        waited = time.time() - t0
        srv.kill()   # SIGKILL as soon as the answer is in
        os.unlink(os.path.join(tmp, "stall"))
        check(st == OK, "the none write was answered Ok")
        srv.start()
        c = Conn(srv.port)
        check(c.get("answered")[2] == b"yes", "an answered none write survives a process crash")
        check(c.get("before")[2] == b"1", "the local write too")
        check(waited >= 0.25, "the answer waited for the stalled pwrite (%.3f s)" % waited)
        srv.stop()
    finally:
        srv.kill()


def kv_failed_pwrite_is_not_ok(tmp):
    data = os.path.join(tmp, "kv-fail")
    srv = start(Server, data, tmp)
    try:
        c = Conn(srv.port)
        check(c.set("before", "1")[0] == OK, "a local write")
        open(os.path.join(tmp, "fail"), "w").close()
        try:
            st, p = c.set("doomed", "x", flags=NONE)
            check(st != OK, "a none write whose pwrite failed was answered Ok")
        except (ConnectionError, socket.timeout):
            pass   # closed without an answer: unknown outcome, not a success
        os.unlink(os.path.join(tmp, "fail"))
        c = Conn(srv.port)
        st, p = c.set("later", "y", flags=NONE)
        check(st == INTERNAL_ERROR and b"stopped" in p, "writes refused after the failure: %d %r" % (st, p))
        srv.kill()
        srv.start()
        c = Conn(srv.port)
        check(c.get("before")[2] == b"1", "acknowledged write kept")
        srv.stop()
    finally:
        srv.kill()


def http_stalled_pwrite_then_kill(tmp):
    data = os.path.join(tmp, "http")
    srv = start(HttpServer, data, tmp)
    try:
        h = Http(srv.http_port)
        st, _, _ = h.call("PUT", "/c/notes/docs/a", '{"n":1}', JSON)
        check(st in (200, 201), "a local write: %d" % st)
        open(os.path.join(tmp, "stall"), "w").close()
        t0 = time.time()
        st, _, body = h.call("PUT", "/c/notes/docs/b?durability=none", '{"n":2}', JSON)
        waited = time.time() - t0
        srv.kill()
        os.unlink(os.path.join(tmp, "stall"))
        check(st == 201, "the none write was answered: %d %r" % (st, body))
        check(waited >= 0.25, "the answer waited for the stalled pwrite (%.3f s)" % waited)
        srv.start()
        h = Http(srv.http_port)
        st, _, body = h.call("GET", "/c/notes/docs/b")
        check(st == 200 and b'"n":2' in body, "an answered none write survives a process crash: %d %r" % (st, body))
        srv.stop()
    finally:
        srv.kill()


def http_failed_pwrite_is_not_ok(tmp):
    data = os.path.join(tmp, "http-fail")
    srv = start(HttpServer, data, tmp)
    try:
        h = Http(srv.http_port)
        st, _, _ = h.call("PUT", "/c/notes/docs/a", '{"n":1}', JSON)
        check(st in (200, 201), "a local write: %d" % st)
        open(os.path.join(tmp, "fail"), "w").close()
        try:
            st, _, body = h.call("PUT", "/c/notes/docs/b?durability=none", '{"n":2}', JSON)
            check(st == 500 and b"not acknowledged" in body, "a none write whose pwrite failed: %d %r" % (st, body))
        except (ConnectionError, socket.timeout):
            pass
        os.unlink(os.path.join(tmp, "fail"))
        srv.kill()
        srv.start()
        h = Http(srv.http_port)
        st, _, _ = h.call("GET", "/c/notes/docs/a")
        check(st == 200, "the acknowledged write is kept")
        srv.stop()
    finally:
        srv.kill()


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-none-")
    try:
        kv_stalled_pwrite_then_kill(tmp)
        print("ok   kv: a none answer leaves after its pwrite; it survives SIGKILL right after")
        kv_failed_pwrite_is_not_ok(tmp)
        print("ok   kv: a failed pwrite never yields Ok; writes refused until restart")
        http_stalled_pwrite_then_kill(tmp)
        print("ok   http: a none answer leaves after its pwrite; it survives SIGKILL right after")
        http_failed_pwrite_is_not_ok(tmp)
        print("ok   http: a failed pwrite answers 500, never a success")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
