"""Kill test: a real server under a concurrent write load (sets, deletes and
atomic batches at durability local, over 8 connections) is killed with SIGKILL
at random moments, 24 times. After every restart each acknowledged write must
be there with its exact value and token (or the one write that was in flight
on its connection, never acknowledged, may have landed), and every batch is
either wholly applied or not at all."""
import random
import shutil
import sys
import tempfile
import threading

sys.path.insert(0, __import__("os").path.dirname(__file__))
from hanukv import *  # noqa

WRITERS = 8
KEYS_PER_WRITER = 40
BATCH = 6
ROUNDS = 24


class Writer(threading.Thread):
    """Writes only its own keys, so the acknowledged state per key is known exactly."""

    def __init__(self, wid, port, state, seed):
        super().__init__(daemon=True)
        self.wid, self.port, self.state = wid, port, state   # state: key -> (value or None, token)
        self.rng = random.Random(seed)
        self.inflight = {}       # key -> value or None of the op sent but not yet answered
        self.acked = 0
        self.error = None

    def run(self):
        try:
            c = Conn(self.port)
        except OSError:
            return
        seq = 0
        try:
            while True:
                seq += 1
                r = self.rng.random()
                if r < 0.6:
                    k = "w%d-k%d" % (self.wid, self.rng.randrange(KEYS_PER_WRITER))
                    v = "w%d-v%d-%s" % (self.wid, seq, "x" * self.rng.randrange(300))
                    self.inflight = {k: v}
                    st, p = c.set(k, v)
                    if st != OK:
                        raise AssertionError("set answered %d %r" % (st, p))
                    self.state[k] = (v, token_of(p))
                elif r < 0.75:
                    k = "w%d-k%d" % (self.wid, self.rng.randrange(KEYS_PER_WRITER))
                    self.inflight = {k: None}
                    st, p = c.delete(k)
                    if st == OK:
                        self.state[k] = (None, token_of(p))
                    elif st != KEY_NOT_FOUND:
                        raise AssertionError("delete answered %d %r" % (st, p))
                else:
                    v = "w%d-batch%d" % (self.wid, seq)
                    keys = ["w%d-b%d" % (self.wid, i) for i in range(BATCH)]
                    self.inflight = {k: v for k in keys}
                    st, p = c.batch([("set", k, v) for k in keys])
                    if st != OK:
                        raise AssertionError("batch answered %d %r" % (st, p))
                    t = token_of(p)
                    for k in keys:
                        self.state[k] = (v, t)
                self.inflight = {}
                self.acked += 1
        except (ConnectionError, OSError):
            return            # the server was killed
        except AssertionError as e:
            self.error = str(e)


def verify(port, writers, states):
    c = Conn(port)
    for w in writers:
        st_map = states[w.wid]
        keys = ["w%d-k%d" % (w.wid, i) for i in range(KEYS_PER_WRITER)] + \
               ["w%d-b%d" % (w.wid, i) for i in range(BATCH)]
        # pipeline all gets
        c.send(b"".join(frame(OPS["GET"], db_field("default") + bytes_field(k)) for k in keys))
        got = {}
        for k in keys:
            st, p = c.read_response()
            if st == KEY_VALUE_TOKEN:
                got[k] = (p[8:].decode(), token_of(p))
            else:
                check(st == KEY_NOT_FOUND, "get %s answered %d" % (k, st))
                got[k] = (None, None)
        for k in keys:
            want = st_map.get(k, (None, None))
            have = got[k]
            ok = have == want or (want[0] is None and have[0] is None)
            if not ok and k in w.inflight:
                # the unacknowledged op may have landed: a delete leaves nothing, a set
                # leaves its value with a newer token
                if w.inflight[k] is None:
                    ok = have == (None, None)
                else:
                    ok = have[0] == w.inflight[k] and (want[1] is None or have[1] > want[1])
            check(ok, "key %s: acknowledged %r but found %r (in flight: %r)" % (k, want, have, w.inflight.get(k, "nothing")))
        batch_vals = {got["w%d-b%d" % (w.wid, i)] for i in range(BATCH)}
        check(len(batch_vals) == 1, "half-applied batch for writer %d: %r" % (w.wid, batch_vals))
        # what is there now is the truth the next round starts from
        for k in keys:
            st_map[k] = got[k] if got[k][0] is not None else (None, got[k][1])
    c.close()


def main():
    data = tempfile.mkdtemp(prefix="hanudb-kill-")
    states = {w: {} for w in range(WRITERS)}
    srv = Server(data, ["--file-size", "256K", "--compact-ratio", "0.3"])
    try:
        total = kill_rounds(srv, ROUNDS,
                            lambda port, rng: [Writer(w, port, states[w], rng.random()) for w in range(WRITERS)],
                            lambda: srv.port, lambda port, ws: verify(port, ws, states), 1000)
        print("kill test: %d SIGKILLs, %d acknowledged writes, all present" % (ROUNDS, total))
    finally:
        srv.kill()
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(data + ".bucket", ignore_errors=True)   # serve's default bucket, beside DATA


if __name__ == "__main__":
    main()
