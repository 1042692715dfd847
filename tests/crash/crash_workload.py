"""crash_workload.py: drives a real `hanudb serve` under the crash_record.c
recorder and logs every request it sends and the answer it got, per connection,
for crash_check (docs/TESTING.md, "Crash states").

usage: crash_workload.py WORKDIR [--seed N] [--runs N] [--ops N]

WORKDIR gets data/ (the server's data directory), trace.N (the recorder's trace of
run N) and requests.log, one line per request in the order sent on its connection:

  run N serve|compact
  req RUN PORT KIND DUR STATUS TOKEN COUNT ITEM...

KIND is w for a write, r for anything else; DUR 0 (local) or 1 (none); ITEM is
s/KEY/VALUE or d/KEY (the write's effect when it succeeds), g/KEY for a read.
Keys and values are [A-Za-z0-9] so the format needs no escaping.
"""
import os
import random
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import hanukv as kv  # noqa: E402

OK, KVT, MISMATCH = kv.OK, kv.KEY_VALUE_TOKEN, kv.KEY_TOKEN_MISMATCH


class Workload:
    def __init__(self, work, seed, runs, ops):
        self.work = os.path.abspath(work)
        self.data = os.path.join(self.work, "data")
        self.rng = random.Random(seed)
        self.runs, self.ops = runs, ops
        self.log = open(os.path.join(self.work, "requests.log"), "w")
        self.known = {}        # key -> latest token the client saw
        self.run = 0
        self.seq = 0
        self.keys = ["k%02d" % i for i in range(24)]
        self.lib = os.environ.get("HANUDB_CRASH_LIB",
                                  os.path.join(os.environ.get("HANUDB_BUILD", os.path.join(kv.ROOT, "build")),
                                               "tests", "libcrash_record.so"))
        # The log alone: the checker models the data directory, not a bucket beside it.
        self.flags = ["--file-size", "64K", "--lazy-sync-ms", "60", "--compact-ratio", "0.3", "--no-bucket"]

    def env(self):
        e = dict(os.environ)
        e["LD_PRELOAD"] = self.lib
        e["HANUDB_CRASH_DIR"] = self.data
        e["HANUDB_CRASH_TRACE"] = os.path.join(self.work, "trace.%d" % self.run)
        return e

    def value(self):
        self.seq += 1
        n = self.rng.choice((8, 40, 200, 900, 2500))
        s = "v%d" % self.seq
        return (s + "x" * n)[:max(n, len(s))]

    def record(self, conn, kind, dur, status, token, items):
        self.log.write("req %d %d %s %d %d %d %d %s\n" % (self.run, conn.port, kind, dur, status, token,
                                                          len(items), " ".join(items)))

    def write_req(self, conn, op, payload, dur, items):
        """Sends without reading; returns what finish() needs."""
        conn.send(kv.frame(op, payload, dur))
        return ("w", dur, items, op)

    def finish(self, conn, pending):
        kind, dur, items, op = pending
        st, p = conn.read_response()
        token = struct.unpack("<Q", p[:8])[0] if st in (OK, KVT, MISMATCH) and len(p) >= 8 else 0
        if st == KVT:
            self.known[items[0][2:]] = token
        elif st == OK and kind == "w":
            for it in items:
                self.known[it.split("/")[1]] = token
        self.record(conn, kind, dur, st, token, items)
        return st

    def one(self, conn):
        r, keys = self.rng.random(), self.keys
        k = self.rng.choice(keys)
        dur = kv.NONE if self.rng.random() < 0.5 else kv.LOCAL
        db = kv.db_field("default")
        if r < 0.35:
            v = self.value()
            return [self.write_req(conn, kv.OPS["SET"], db + kv.bytes_field(k) + kv.bytes_field(v), dur,
                                   ["s/%s/%s" % (k, v)])]
        if r < 0.45:
            return [self.write_req(conn, kv.OPS["DELETE"], db + kv.bytes_field(k), dur, ["d/%s" % k])]
        if r < 0.58:
            items, eff = [], {}
            for kk in self.rng.sample(keys, self.rng.randint(2, 5)):
                if self.rng.random() < 0.25:
                    items.append(("del", kk))
                    eff[kk] = "d/%s" % kk
                else:
                    v = self.value()
                    items.append(("set", kk, v))
                    eff[kk] = "s/%s/%s" % (kk, v)
            return [self.write_req(conn, kv.OPS["WRITE_BATCH"], kv.batch_payload("default", items), dur,
                                   list(eff.values()))]
        if r < 0.68:
            tok = self.known.get(k, 1)
            if self.rng.random() < 0.2:
                tok = max(1, tok - 1)
            v = self.value()
            return [self.write_req(conn, kv.OPS["COMPARE_SET"],
                                   db + kv.bytes_field(k) + struct.pack("<Q", tok) + kv.bytes_field(v), dur,
                                   ["s/%s/%s" % (k, v)])]
        if r < 0.72:
            tok = self.known.get(k, 1)
            return [self.write_req(conn, kv.OPS["COMPARE_DELETE"], db + kv.bytes_field(k) + struct.pack("<Q", tok),
                                   dur, ["d/%s" % k])]
        if r < 0.85:
            conn.send(kv.frame(kv.OPS["GET"], db + kv.bytes_field(k)))
            return [("r", 0, ["g/%s" % k], kv.OPS["GET"])]
        # a pipelined burst of `none` sets: several answers in one loop iteration
        out = []
        for kk in self.rng.sample(keys, self.rng.randint(2, 6)):
            v = self.value()
            out.append(self.write_req(conn, kv.OPS["SET"], db + kv.bytes_field(kk) + kv.bytes_field(v), kv.NONE,
                                      ["s/%s/%s" % (kk, v)]))
        return out

    def serve_run(self, last):
        srv = kv.Server(self.data, extra=self.flags)
        self.log.write("run %d serve\n" % self.run)
        saved = os.environ.copy()
        os.environ.clear()
        os.environ.update(self.env())
        try:
            srv.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        conns = []
        for _ in range(2):
            c = kv.Conn(srv.port)
            c.port = c.sock.getsockname()[1]
            conns.append(c)
        for i in range(self.ops):
            c = self.rng.choice(conns)
            for p in self.one(c):
                self.finish(c, p)
            if i % 50 == 0:
                time.sleep(self.rng.choice((0.0, 0.02, 0.1)))   # lets lazy syncs and compaction run
        # End with a local write so that a SIGKILL loses nothing the page cache holds.
        c = conns[0]
        v = self.value()
        k = self.rng.choice(self.keys)
        self.finish(c, self.write_req(c, kv.OPS["SET"], kv.db_field("default") + kv.bytes_field(k) + kv.bytes_field(v),
                                      kv.LOCAL, ["s/%s/%s" % (k, v)]))
        for c in conns:
            c.close()
        if not last and self.rng.random() < 0.5:
            srv.kill(signal.SIGKILL)
        else:
            srv.stop()

    def compact_run(self):
        self.log.write("run %d compact\n" % self.run)
        subprocess.run([kv.BIN, "compact", "--data", self.data, "--file-size", "64K"], env=self.env(),
                       check=True, stdout=subprocess.DEVNULL)

    def go(self):
        for r in range(self.runs):
            self.serve_run(r == self.runs - 1)
            self.run += 1
            self.log.flush()
            if r == self.runs // 2:
                self.compact_run()
                self.run += 1
        self.log.close()


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    work, seed, runs, ops = args[0], 1, 4, 600
    i = 1
    while i < len(args):
        if args[i] == "--seed": seed = int(args[i + 1])
        elif args[i] == "--runs": runs = int(args[i + 1])
        elif args[i] == "--ops": ops = int(args[i + 1])
        else:
            print("unknown argument " + args[i], file=sys.stderr)
            return 2
        i += 2
    os.makedirs(work, exist_ok=True)
    Workload(work, seed, runs, ops).go()
    return 0


if __name__ == "__main__":
    sys.exit(main())
