"""HTTP kill test: a real server under concurrent document writes (single PUTs,
DELETEs and atomic batches at durability local, over 6 keep-alive connections)
is killed with SIGKILL at random moments, 20 times. After each restart every
acknowledged document is present and byte-identical (its ETag is the txn the
write answered), or, for the one request in flight on a connection, the newer
version may have landed; no batch is half-applied."""
import http.client
import json
import os
import random
import shutil
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import HttpServer, check  # noqa
from hanukv import kill_rounds  # noqa

WRITERS = 6
JSON = {"Content-Type": "application/json"}   # the server reads only JSON bodies
DOCS = 30
BATCH = 5
ROUNDS = 20


class Writer(threading.Thread):
    def __init__(self, wid, port, state, seed):
        super().__init__(daemon=True)
        self.wid, self.port, self.state = wid, port, state   # id -> (bytes or None, txn)
        self.rng = random.Random(seed)
        self.inflight = {}
        self.acked = 0
        self.error = None

    def run(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        seq = 0
        try:
            while True:
                seq += 1
                r = self.rng.random()
                if r < 0.6:
                    i = "w%d-d%d" % (self.wid, self.rng.randrange(DOCS))
                    body = ('{"w":%d,"seq":%d,"pad":"%s"}' % (self.wid, seq, "p" * self.rng.randrange(200))).encode()
                    self.inflight = {i: b'{"_id":"%s",' % i.encode() + body[1:]}
                    c.request("PUT", "/c/kill/docs/" + i, body=body, headers=JSON)
                    resp = c.getresponse()
                    out = json.loads(resp.read())
                    if resp.status not in (200, 201):
                        raise AssertionError("put answered %d %r" % (resp.status, out))
                    self.state[i] = (self.inflight[i], out["txn"])
                elif r < 0.7:
                    i = "w%d-d%d" % (self.wid, self.rng.randrange(DOCS))
                    self.inflight = {i: None}
                    c.request("DELETE", "/c/kill/docs/" + i)
                    resp = c.getresponse()
                    out = json.loads(resp.read())
                    if resp.status == 200:
                        self.state[i] = (None, out["txn"])
                    elif resp.status != 404:
                        raise AssertionError("delete answered %d %r" % (resp.status, out))
                else:
                    ids = ["w%d-b%d" % (self.wid, k) for k in range(BATCH)]
                    docs = {i: '{"batch":%d,"of":"%s"}' % (seq, i) for i in ids}
                    self.inflight = {i: b'{"_id":"%s",' % i.encode() + docs[i].encode()[1:] for i in ids}
                    body = '{"ops":[%s]}' % ",".join('{"op":"put","id":"%s","doc":%s}' % (i, docs[i]) for i in ids)
                    c.request("POST", "/c/kill/_batch", body=body, headers=JSON)
                    resp = c.getresponse()
                    out = json.loads(resp.read())
                    if resp.status != 200:
                        raise AssertionError("batch answered %d %r" % (resp.status, out))
                    for i in ids:
                        self.state[i] = (self.inflight[i], out["txn"])
                self.inflight = {}
                self.acked += 1
        except (ConnectionError, OSError, http.client.HTTPException):
            return
        except AssertionError as e:
            self.error = str(e)


def fetch(c, i):
    c.request("GET", "/c/kill/docs/" + i)
    r = c.getresponse()
    body = r.read()
    if r.status == 404:
        return (None, None)
    check(r.status == 200, "get %s answered %d" % (i, r.status))
    return (body, int(r.getheader("ETag").strip('"')))


def verify(port, writers, states):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for w in writers:
        st = states[w.wid]
        ids = ["w%d-d%d" % (w.wid, k) for k in range(DOCS)] + ["w%d-b%d" % (w.wid, k) for k in range(BATCH)]
        got = {i: fetch(c, i) for i in ids}
        for i in ids:
            want = st.get(i, (None, None))
            have = got[i]
            ok = have == want or (want[0] is None and have[0] is None)
            if not ok and i in w.inflight:
                if w.inflight[i] is None:
                    ok = have == (None, None)
                else:
                    ok = have[0] == w.inflight[i] and (want[1] is None or have[1] > want[1])
            check(ok, "doc %s: acknowledged %r, found %r" % (i, want, have))
        batch = {got["w%d-b%d" % (w.wid, k)][1] for k in range(BATCH)}
        check(len(batch) == 1, "half-applied batch for writer %d: txns %r" % (w.wid, batch))
        for i in ids:
            st[i] = got[i]
    c.close()


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-httpkill-")
    states = {w: {} for w in range(WRITERS)}
    srv = HttpServer(os.path.join(tmp, "data"), ["--file-size", "256K", "--compact-ratio", "0.3"])
    try:
        total = kill_rounds(srv, ROUNDS,
                            lambda port, rng: [Writer(w, port, states[w], rng.random()) for w in range(WRITERS)],
                            lambda: srv.http_port, lambda port, ws: verify(port, ws, states), 500,
                            pause=(0.2, 0.8))
        print("http kill test: %d SIGKILLs, %d acknowledged writes, all present and byte-identical" % (ROUNDS, total))
    finally:
        srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
