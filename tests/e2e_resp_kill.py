#!/usr/bin/env python3
"""e2e_resp_kill.py: every write acknowledged over the Redis protocol at durability
`local` (the default) survives a SIGKILL of the server and a restart. Writers pipe
SET, INCR, MSET and RPUSH batches on their own connections; after each kill the
restarted server must hold every acknowledged value (a later unacknowledged write
of the same key may have landed too: the check allows only values the writer sent),
and each writer's list must still be a list holding 1..n in order, n at least the
number of acknowledged pushes.
"""
import os
import socket
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hanukv  # noqa: E402
import hanuresp  # noqa: E402
from hanukv import check  # noqa: E402

WRITERS = 4
ROUNDS = int(os.environ.get("ROUNDS", "6"))


class Writer(threading.Thread):
    def __init__(self, wid, port, rng):
        super().__init__(daemon=True)
        self.wid, self.port, self.rng = wid, port, rng.random()
        self.acked = 0
        self.error = None
        self.last = {}       # key -> last acknowledged value
        self.sent = {}       # key -> every value sent (acknowledged or not)
        self.counter = 0     # acknowledged INCRs of this writer's counter
        self.list = "w%d:list:%d" % (wid, int(self.rng * 1e9))   # a new list every round
        self.pushed = 0      # acknowledged RPUSHes: the list holds 1..pushed at least

    def run(self):
        try:
            c = hanuresp.Conn(self.port)
        except OSError:
            return
        i = 0
        try:
            while True:
                i += 1
                k = "w%d:k%d" % (self.wid, i % 50)
                v = "v%d" % i
                m = ["w%d:m%d" % (self.wid, j) for j in range(3)]
                batch = [("SET", k, v), ("INCR", "w%d:counter" % self.wid), ("MSET", m[0], v, m[1], v, m[2], v),
                         ("RPUSH", self.list, str(i))]
                for key in [k] + m:
                    self.sent.setdefault(key, set()).add(v)
                c.send(b"".join(hanuresp.encode(*x) for x in batch))
                check(c.reply() == b"+OK\r\n", "set")
                self.last[k] = v
                self.acked += 1
                got = c.reply()
                check(got.startswith(b":"), "incr %r" % got)
                self.counter = int(got[1:-2])
                self.acked += 1
                check(c.reply() == b"+OK\r\n", "mset")
                for key in m:
                    self.last[key] = v
                self.acked += 1
                check(c.reply() == b":%d\r\n" % i, "rpush")
                self.pushed = i
                self.acked += 1
        except (ConnectionError, socket.timeout, OSError):
            return
        except AssertionError as e:
            self.error = str(e)


def writers(port, rng):
    return [Writer(i, port, rng) for i in range(WRITERS)]


def verify(port, ws):
    c = hanuresp.Conn(port)
    for w in ws:
        for key, v in w.last.items():
            got = c.call("GET", key)
            val = got.split(b"\r\n")[1].decode() if got.startswith(b"$") and got != b"$-1\r\n" else None
            check(val is not None, "writer %d: acknowledged %s=%s lost after SIGKILL" % (w.wid, key, v))
            n = lambda s: int(s[1:])  # noqa: E731
            check(val in w.sent[key] and n(val) >= n(v),
                  "writer %d: %s is %s, acknowledged %s" % (w.wid, key, val, v))
        got = c.call("GET", "w%d:counter" % w.wid)
        count = int(got.split(b"\r\n")[1]) if got != b"$-1\r\n" else 0
        check(count >= w.counter, "writer %d: counter %d below the acknowledged %d" % (w.wid, count, w.counter))
        if w.pushed:
            check(c.call("TYPE", w.list) == b"+list\r\n", "writer %d: %s is no longer a list" % (w.wid, w.list))
            got = c.call("LRANGE", w.list, 0, -1).split(b"\r\n")
            elems = [int(x) for x in got[2::2][:int(got[0][1:])]]
            check(len(elems) >= w.pushed and elems == list(range(1, len(elems) + 1)),
                  "writer %d: list of %d elements after %d acknowledged pushes: %r"
                  % (w.wid, len(elems), w.pushed, elems[:10]))
    c.close()


def main():
    with tempfile.TemporaryDirectory(prefix="hanudb-e2e-resp-kill-") as tmp:
        port = hanukv.free_port()
        srv = hanukv.Server(os.path.join(tmp, "d"), extra=["--no-bucket", "--resp-addr", "127.0.0.1:%d" % port])
        total = hanukv.kill_rounds(srv, ROUNDS, writers, lambda: port, verify, min_acked=200)
        print("e2e_resp_kill: ok, %d acknowledged writes over %d kills" % (total, ROUNDS))


if __name__ == "__main__":
    main()
