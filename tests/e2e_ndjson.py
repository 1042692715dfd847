"""NDJSON in and out, against real servers: `POST /c/{col}/_import` (good lines,
every kind of bad line with its line number and code, blank lines, CRLF, a last
line without LF, foreign ids from mongoexport and Elasticsearch files, the cap on
listed errors, 415/400/413/403/421 refusals, chunks of 1 000 documents each one
log record, all or nothing under SIGKILL, a body far larger than memory growth
through `hanudb import`), `hanudb import` (file and stdin, the file's line numbers
across requests, exit statuses, the summary line), and `GET /c/{col}/docs?
format=ndjson` with `hanudb export --to -`: one snapshot, so updates, deletes and
inserts made while the answer streams do not show and no line is torn."""
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, error_code, run_suite

ND = {"Content-Type": "application/x-ndjson"}


def imp(h, col, body, query=""):
    st, hd, data = h.call("POST", "/c/%s/_import%s" % (col, query), body, ND)
    return st, json.loads(data)


def count(h, col):
    st, _, data = h.call("GET", "/c/%s" % col)
    check(st == 200, "GET /c/%s: %d %r" % (col, st, data))
    return json.loads(data)["count"]


def export(port, col):
    h = Http(port)
    st, hd, data = h.call("GET", "/c/%s/docs?format=ndjson" % col)
    check(st == 200, "export %s: %d %r" % (col, st, data[:300]))
    check(hd.get("content-type") == "application/x-ndjson", "content-type %r" % hd.get("content-type"))
    check(hd.get("transfer-encoding") == "chunked", "chunked: %r" % hd)
    return hd, data


def t_lines(h):
    body = ('{"_id":"a","x":1}\n'          # 1
            '\n'                           # 2 blank
            '{"x":2}\r\n'                  # 3 generated id, CRLF
            'not json\n'                   # 4
            '[1,2]\n'                      # 5
            '{"_id":42,"y":1}\n'           # 6 Elasticsearch-style numeric id
            '{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"},"when":{"$date":"2020-01-01T00:00:00Z"}}\n'  # 7 mongoexport
            '{"_id":1.5}\n'                # 8
            '{"_id":"a/b"}\n'              # 9
            '   \t \n'                     # 10 blank
            '{"_id":"big","s":"%s"}\n'     # 11 too large
            '{"_id":"last"}') % ("x" * 1100000)   # 12, no LF
    st, a = imp(h, "lines", body)
    check(st == 200, "import: %d %r" % (st, a))
    want = {"lines": 12, "imported": 5, "failed": 5, "blank": 2, "chunks": 1, "errors_omitted": 0}
    for k, v in want.items():
        check(a[k] == v, "%s: %r, want %r (%r)" % (k, a[k], v, a))
    got = [(e["line"], e["code"]) for e in a["errors"]]
    check(got == [(4, "invalid_json"), (5, "invalid_request"), (8, "invalid_id"), (9, "invalid_id"),
                  (11, "too_large")], "errors %r" % got)
    check(all(e["message"] for e in a["errors"]), "messages")
    check(a["txn"] > 0, "txn")
    st, _, d = h.call("GET", "/c/lines/docs/a")
    check(st == 200 and d == b'{"_id":"a","x":1}', "a stored as sent: %r" % d)
    st, _, d = h.call("GET", "/c/lines/docs/42")
    check(st == 200 and d == b'{"_id":"42","y":1}', "numeric id taken as a string: %r" % d)
    st, _, d = h.call("GET", "/c/lines/docs/5f1a2b3c4d5e6f7a8b9c0d1e")
    check(st == 200 and json.loads(d) == {"_id": "5f1a2b3c4d5e6f7a8b9c0d1e", "when": {"$date": "2020-01-01T00:00:00Z"}},
          "ObjectId taken: %r" % d)
    check(h.call("GET", "/c/lines/docs/last")[0] == 200, "a last line without LF is imported")
    check(count(h, "lines") == 5, "5 documents")
    # ?first_line numbers the lines; more than 100 errors: 100 listed, the rest counted
    st, a = imp(h, "lines", "bad\n" * 150 + '{"_id":"z"}', "?first_line=1001")
    check(st == 200 and a["failed"] == 150 and len(a["errors"]) == 100 and a["errors_omitted"] == 50,
          "error cap: %r" % {k: a[k] for k in a if k != "errors"})
    check(a["errors"][0]["line"] == 1001 and a["errors"][99]["line"] == 1100, "first_line: %r" % a["errors"][0])
    # an empty body imports nothing, answers at once
    st, a = imp(h, "lines", "")
    check(st == 200 and a["lines"] == 0 and a["imported"] == 0 and a["txn"] == 0, "empty: %r" % a)


def t_refusals(h):
    st, _, d = h.call("POST", "/c/r/_import", '{"a":1}\n')   # application/json
    check(st == 415 and error_code(json.loads(d)) == "unsupported_media_type", "json type: %d %r" % (st, d))
    st, _, d = h.call("POST", "/c/r/_import", '{"a":1}\n', {"Content-Type": "text/plain"})
    check(st == 415, "text/plain: %d" % st)
    st, _, d = h.call("POST", "/c/r/_import?limit=3", '{"a":1}\n', ND)
    check(st == 400 and error_code(json.loads(d)) == "invalid_parameter", "unknown parameter: %d %r" % (st, d))
    st, _, d = h.call("POST", "/c/r/_import?first_line=0", '{"a":1}\n', ND)
    check(st == 400 and error_code(json.loads(d)) == "invalid_parameter", "first_line 0: %d %r" % (st, d))
    st, _, d = h.call("POST", "/c/r/_import?durability=sometimes", '{"a":1}\n', ND)
    check(st == 400, "durability: %d" % st)
    st, _, d = h.call("GET", "/c/r/_import")
    check(st == 405, "GET _import: %d" % st)
    check(h.call("GET", "/c/r")[0] == 404, "nothing was created by a refusal")
    # a body over --max-body (16 MiB): 413 before it is read (only the head is sent)
    s = socket.create_connection(("127.0.0.1", h.c.port))
    s.sendall(b"POST /c/r/_import HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-ndjson\r\n"
              b"Content-Length: %d\r\n\r\n" % (17 << 20))
    ans = s.recv(4096)
    s.close()
    check(ans.startswith(b"HTTP/1.1 413") and b"too_large" in ans, "413: %r" % ans[:200])
    # format=
    st, _, d = h.call("GET", "/c/lines/docs?format=csv")
    check(st == 400 and error_code(json.loads(d)) == "invalid_parameter", "format=csv: %d %r" % (st, d))
    st, _, d = h.call("GET", "/c/lines/docs?format=ndjson&limit=2")
    check(st == 400 and error_code(json.loads(d)) == "invalid_parameter", "format with limit: %d" % st)
    st, _, d = h.call("GET", "/c/lines/docs?format=ndjson&format=ndjson")
    check(st == 400 and error_code(json.loads(d)) == "invalid_parameter", "format twice: %d" % st)
    st, _, d = h.call("GET", "/c/nothere/docs?format=ndjson")
    check(st == 404 and error_code(json.loads(d)) == "collection_not_found", "missing collection: %d" % st)


def t_chunks_and_idempotency(h):
    """2 500 documents: 3 chunks, each one log record (3 txns), at durability none."""
    st, _, d = h.call("PUT", "/c/ch/docs/before", "{}")
    t0 = json.loads(d)["txn"]
    body = "".join('{"_id":"c%05d","i":%d}\n' % (i, i) for i in range(2500))
    st, a = imp(h, "ch", body, "?durability=none")
    check(st == 200 and a["chunks"] == 3 and a["imported"] == 2500, "chunks: %r" % a)
    check(a["txn"] == t0 + 3, "3 log records: txn %d after %d" % (a["txn"], t0))
    key = {"Idempotency-Key": "imp-1"}
    key.update(ND)
    st, hd, d1 = h.call("POST", "/c/ch/_import", '{"_id":"k1"}\n{"_id":"k2"}\n', key)
    st2, hd2, d2 = h.call("POST", "/c/ch/_import", '{"_id":"k1"}\n{"_id":"k2"}\n', key)
    check(st == st2 == 200 and d1 == d2 and hd2.get("idempotent-replayed") == "true",
          "replay: %r %r %r" % (d1, d2, hd2))
    st3, _, d3 = h.call("POST", "/c/ch/_import", '{"_id":"k3"}\n', key)
    check(st3 == 422, "key reused for another body: %d" % st3)
    check(count(h, "ch") == 2503, "count %d" % count(h, "ch"))


def t_interleave(port):
    """The loop serves others between an import's chunks: writes sent while a 30-chunk
    import is written get txns between its first chunk's and its last."""
    pad = "i" * 420
    body = "".join('{"_id":"i%05d","pad":"%s"}\n' % (i, pad) for i in range(30000))
    stop, txns = [], []

    def writer(n):
        w = Http(port)
        k = 0
        while not stop:
            st, _, d = w.call("PUT", "/c/other/docs/w%d-%d?durability=none" % (n, k), "{}")
            txns.append(json.loads(d)["txn"])
            k += 1
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    st, a = imp(Http(port), "inter", body)
    stop.append(1)
    for t in threads:
        t.join()
    check(st == 200 and a["chunks"] == 30, "import %r" % a)
    st, hd, _ = Http(port).call("GET", "/c/inter/docs/i00000")
    first = int(hd["etag"].strip('"'))
    between = [x for x in txns if first < x < a["txn"]]
    check(between, "no write ran between the chunks (txns %d..%d; writes %r..%r)" % (
        first, a["txn"], txns[:3], txns[-3:]))
    print("     %d writes ran between the import's first and last chunk" % len(between))


def t_cli(port, tmp):
    path = os.path.join(tmp, "people.ndjson")
    lines = ['{"_id":"p%05d","name":"person %d","tags":["a","b"]}' % (i, i) for i in range(3000)]
    lines[2500] = '{"_id":"p02500","oops"}'   # line 2501, in a later request
    lines[10] = ""                            # line 11 blank
    with open(path, "w") as f:
        f.write("\n".join(lines))             # no LF at the end
    base = [BIN, "import", "--url", "http://127.0.0.1:%d" % port, "--collection", "people"]
    r = subprocess.run(base + ["--request-bytes", "64K", path], capture_output=True, timeout=60)
    check(r.returncode == 1, "exit 1 with a bad line: %d %r" % (r.returncode, r.stderr))
    err = r.stderr.decode()
    check("line 2501: invalid_json" in err, "the file's line number: %r" % err)
    s = json.loads(r.stdout)
    check(s["lines"] == 3000 and s["imported"] == 2998 and s["failed"] == 1 and s["blank"] == 1 and s["requests"] > 1,
          "summary %r" % s)
    good = "".join('{"_id":"q%d"}\n' % i for i in range(100))
    r = subprocess.run(base[:-1] + ["q", "-"], input=good.encode(), capture_output=True, timeout=60)
    check(r.returncode == 0 and json.loads(r.stdout)["imported"] == 100, "stdin: %d %r" % (r.returncode, r.stderr))
    r = subprocess.run(base + [os.path.join(tmp, "missing.ndjson")], capture_output=True, timeout=60)
    check(r.returncode == 2 and b"cannot open" in r.stderr, "missing file: %d %r" % (r.returncode, r.stderr))
    r = subprocess.run(base, capture_output=True, timeout=60)
    check(r.returncode == 2, "no FILE: %d" % r.returncode)
    # export --to - writes what the route streams
    _, via_http = export(port, "people")
    r = subprocess.run([BIN, "export", "--url", "http://127.0.0.1:%d" % port, "--collection", "people", "--to", "-"],
                       capture_output=True, timeout=60)
    check(r.returncode == 0 and r.stdout == via_http, "export --to -: %d %r" % (r.returncode, r.stderr))
    check(b"2998 documents" in r.stderr, "summary on stderr: %r" % r.stderr)
    check(len(via_http.splitlines()) == 2998, "2998 lines")
    r = subprocess.run([BIN, "export", "--url", "http://127.0.0.1:%d" % port, "--collection", "nope", "--to", "-"],
                       capture_output=True, timeout=60)
    check(r.returncode == 1 and b"collection_not_found" in r.stderr, "export of a missing one: %d" % r.returncode)


def t_snapshot(port):
    """Writes while the export streams (the client reads slowly) do not show."""
    h = Http(port)
    n = 20000
    pad = "y" * 600
    body = "".join('{"_id":"s%05d","v":0,"pad":"%s"}\n' % (i, pad) for i in range(n))
    st, a = imp(h, "snap", body)
    check(st == 200 and a["imported"] == n, "import %r" % a)
    before = {"s%05d" % i: '{"_id":"s%05d","v":0,"pad":"%s"}' % (i, pad) for i in range(n)}
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /c/snap/docs?format=ndjson HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
    first = s.recv(4096)
    check(first.startswith(b"HTTP/1.1 200"), "export started: %r" % first[:100])
    # while it streams: update, delete and insert, each acknowledged (local)
    w = Http(port)
    for i in range(0, n, 17):
        check(w.call("PUT", "/c/snap/docs/s%05d" % i, '{"v":1}')[0] == 200, "update")
    for i in range(3, n, 29):
        check(w.call("DELETE", "/c/snap/docs/s%05d" % i)[0] == 200, "delete")
    for i in range(200):
        check(w.call("PUT", "/c/snap/docs/new%04d" % i, '{"v":2}')[0] == 201, "insert")
    data = first
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        data += b
    s.close()
    head, _, chunked = data.partition(b"\r\n\r\n")
    out, p = b"", 0
    while True:   # de-chunk
        e = chunked.index(b"\r\n", p)
        size = int(chunked[p:e], 16)
        if size == 0:
            break
        out += chunked[e + 2:e + 2 + size]
        p = e + 2 + size + 2
    got = {}
    for line in out.decode().splitlines():
        d = json.loads(line)
        check(d["_id"] not in got, "each document once")
        got[d["_id"]] = line
    check(set(got) == set(before), "the snapshot's set: %d documents, %d missing, %d extra" % (
        len(got), len(set(before) - set(got)), len(set(got) - set(before))))
    check(all(got[k] == before[k] for k in before), "every document at its snapshot version")
    # and a new export sees the writes
    _, after = export(port, "snap")
    ids = {json.loads(x)["_id"] for x in after.splitlines()}
    check(len(ids) == n - len(range(3, n, 29)) + 200 and "new0001" in ids and "s00003" not in ids, "after: %d" % len(ids))


def rss_anon_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def t_big(tmp):
    """Four 60 MB files through hanudb import (4 MiB requests), on a server without
    the index (whose merges move its memory by tens of MB either way): after the
    first, the server's anonymous memory grows by the key directory's entries
    (about 100 bytes a document), far less than the 170 MB that stream through."""
    srv = HttpServer(os.path.join(tmp, "big"), ["--no-index"])
    srv.start()
    path = os.path.join(tmp, "big.ndjson")
    pad = "z" * 560
    n = 100000
    rss = []
    for rnd in range(4):
        with open(path, "w") as f:
            for i in range(n):
                f.write('{"_id":"r%d-%07d","i":%d,"pad":"%s"}\n' % (rnd, i, i, pad))
        size = os.path.getsize(path)
        r = subprocess.run([BIN, "import", "--url", "http://127.0.0.1:%d" % srv.http_port, "--collection", "big",
                            "--request-bytes", "4M", path], capture_output=True, timeout=120)
        check(r.returncode == 0, "import: %d %r" % (r.returncode, r.stderr[-500:]))
        s = json.loads(r.stdout)
        check(s["imported"] == n, "imported %r" % s)
        rss.append(rss_anon_kb(srv.proc.pid) * 1024)
        print("     round %d: %d MB in %d ms; server RssAnon %.1f MB" % (rnd, size >> 20, s["ms"], rss[-1] / 1e6))
    grew = max(rss[1:]) - rss[0]
    if "build-asan" in BIN:
        print("     (ASan build: its quarantine holds freed memory, RssAnon is not checked)")
    else:
        check(grew < 1.5 * size, "RssAnon grew %d bytes while %d were imported" % (grew, 3 * size))
    check(count(Http(srv.http_port), "big") == 4 * n, "every document")
    os.unlink(path)
    srv.stop()


def t_kill(tmp):
    """SIGKILL while an import of 30 chunks is written: every chunk is whole or absent.
    SIGTERM: the import is answered, all of it or 503 with how far it got."""
    srv = HttpServer(os.path.join(tmp, "kill"))
    srv.start()
    pad = "k" * 450
    body = "".join('{"_id":"k%06d","i":%d,"pad":"%s"}\n' % (i, i, pad) for i in range(30000)).encode()
    rng = random.Random(7)
    for rnd in range(3):
        h = Http(srv.http_port)

        def send():
            try:
                h.call("POST", "/c/k%d/_import?durability=none" % rnd, body, ND)
            except Exception:  # noqa: the connection dies with the server
                pass
        t = threading.Thread(target=send)
        t.start()
        time.sleep(rng.uniform(0.05, 0.2))
        srv.kill()
        t.join()
        srv.start()
        h = Http(srv.http_port)
        st, _, d = h.call("GET", "/c/k%d" % rnd)
        n = json.loads(d)["count"] if st == 200 else 0
        check(n % 1000 == 0, "round %d: %d documents, not whole chunks" % (rnd, n))
        print("     round %d: %d documents after the kill" % (rnd, n))
    # SIGTERM during an import: answered (all of it, or 503 saying how far), whole chunks kept
    got = {}

    def send_term():
        try:
            got["r"] = Http(srv.http_port, timeout=30).call("POST", "/c/term/_import", body, ND)
        except Exception as e:  # noqa
            got["e"] = e
    t = threading.Thread(target=send_term)
    t.start()
    time.sleep(0.3)
    srv.stop()
    t.join()
    srv.start()
    n = count(Http(srv.http_port), "term") if Http(srv.http_port).call("GET", "/c/term")[0] == 200 else 0
    check(n % 1000 == 0, "SIGTERM: %d documents" % n)
    if "r" in got:
        st, _, d = got["r"]
        a = json.loads(d)
        check((st == 200 and a["imported"] == 30000 == n) or
              (st == 503 and a["error"]["code"] in ("shutting_down", "store_stopped")), "SIGTERM answer %d %r" % (st, a))
        print("     SIGTERM: %d, %d documents kept" % (st, n))
    srv.stop()


def t_roles(tmp):
    """A read-only token may export but not import (403); a follower refuses imports (421)."""
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("rw-token-1 rw *\nro-token-1 ro *\n")
    srv = HttpServer(os.path.join(tmp, "tok"), ["--tokens", tokens])
    srv.start()
    rw, ro = Http(srv.http_port, token="rw-token-1"), Http(srv.http_port, token="ro-token-1")
    st, _, _ = rw.call("POST", "/c/t/_import", '{"_id":"a"}\n', ND)
    check(st == 200, "rw imports: %d" % st)
    st, _, d = ro.call("POST", "/c/t/_import", '{"_id":"b"}\n', ND)
    check(st == 403 and error_code(json.loads(d)) == "forbidden", "ro: %d %r" % (st, d))
    st, _, d = Http(srv.http_port).call("GET", "/c/t/docs?format=ndjson")
    check(st == 401, "no token: %d" % st)
    st, _, d = ro.call("GET", "/c/t/docs?format=ndjson")
    check(st == 200 and d == b'{"_id":"a"}\n', "ro exports: %d %r" % (st, d))
    srv.stop()


def run_main(tmp):
    srv = HttpServer(os.path.join(tmp, "main"))
    srv.start()
    h = Http(srv.http_port)
    for name, fn in (("import: lines, ids, errors", lambda: t_lines(h)),
                     ("refusals", lambda: t_refusals(Http(srv.http_port))),
                     ("chunks are log records; idempotency", lambda: t_chunks_and_idempotency(Http(srv.http_port))),
                     ("other requests run between an import's chunks", lambda: t_interleave(srv.http_port)),
                     ("hanudb import and export --to -", lambda: t_cli(srv.http_port, tmp)),
                     ("export at one snapshot while writes go on", lambda: t_snapshot(srv.http_port))):
        fn()
        print("ok   %s" % name)
    srv.stop()
    return 0


def main():
    run_suite("hanudb-ndjson-", run_main, [(t_big, "a big file in flat memory"),
                                          (t_kill, "SIGKILL during an import: whole chunks"),
                                          (t_roles, "tokens")])


if __name__ == "__main__":
    main()
