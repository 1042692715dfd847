"""Snapshots through a real server (docs/BUCKET.md, "Snapshots"): documents and
keys written, `POST /_admin/snapshot` puts the files and a manifest in a file://
bucket; a second snapshot after more writes uploads exactly the files the first
did not name; the files of a manifest, fetched by this test's own reader of the
format and verified by SHA-256, make a data directory that a second server opens
with every document, key and query result equal; after four snapshots retention
(--retain 2s, the second snapshot older than that) keeps the newest three manifests, exactly the files they name and the segments
from the oldest one's replay sequence on; `hanudb audit` passes, then names a
flipped byte and a missing file object; `--snapshot-segments N` takes one on its
own; without --bucket the route answers 409."""
import hashlib
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import Conn, BIN, OK, KEY_VALUE_TOKEN, check  # noqa
from hanuhttp import HttpServer, Http, error_code


def port_in_range():
    """A free port of this test's range (21000-21999)."""
    for _ in range(200):
        p = random.randint(21000, 21999)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port in 21000-21999")


def server(data, extra=()):
    srv = HttpServer(data, list(extra), http_port=port_in_range())
    srv.port = port_in_range()
    while srv.port == srv.http_port:
        srv.port = port_in_range()
    srv.log_path = os.path.join(tempfile.gettempdir(), "hanudb-e2e-%d-%d.log" % (os.getpid(), srv.port))
    return srv


def read_manifest(path):
    """docs/FORMATS.md, "Manifest": the header, the entries, the trailer checked."""
    with open(path, "rb") as f:
        b = f.read()
    check(b[:4] == b"HMAN" and b[4] == 1, "manifest magic and version")
    check(hashlib.sha256(b[:-32]).digest() == b[-32:], "manifest trailer")
    txn, index_txn, replay = struct.unpack_from("<QQQ", b, 8)
    created, fmt, count, total = struct.unpack_from("<QIIQ", b, 64)
    files, off = [], 96
    for _ in range(count):
        (pl,) = struct.unpack_from("<H", b, off)
        p = b[off + 2:off + 2 + pl].decode()
        (size,) = struct.unpack_from("<Q", b, off + 2 + pl)
        sha = b[off + 10 + pl:off + 42 + pl].hex()
        files.append((p, size, sha))
        off += 42 + pl
    check(off == len(b) - 32 and sum(f[1] for f in files) == total, "manifest entries")
    return {"txn": txn, "index_txn": index_txn, "replay": replay, "files": files, "prev_hash": b[32:64]}


def manifests(bdir):
    d = os.path.join(bdir, "manifests")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def fetch_copy(bdir, m, dest):
    """The files of manifest m into dest, each checked against its size and SHA-256."""
    for p, size, sha in m["files"]:
        with open(os.path.join(bdir, "files", sha), "rb") as f:
            data = f.read()
        check(len(data) == size and hashlib.sha256(data).hexdigest() == sha, "file object of %s" % p)
        os.makedirs(os.path.dirname(os.path.join(dest, p)), exist_ok=True)
        with open(os.path.join(dest, p), "wb") as f:
            f.write(data)


def status(h):
    st, _, body = h.json("GET", "/_status")
    check(st == 200, "status %d" % st)
    return body


def snapshot(h):
    st, _, body = h.json("POST", "/_admin/snapshot")
    check(st == 200, "snapshot: %d %r" % (st, body))
    return body


def write_docs(h, docs, ids, round_):
    for i in ids:
        d = {"n": i, "round": round_, "text": "word%d common text %s" % (i % 7, "x" * (i % 50))}
        st, _, body = h.json("PUT", "/c/users/docs/u%d" % i, d)
        check(st in (200, 201), "put u%d: %d %r" % (i, st, body))
        docs["u%d" % i] = d


def write_keys(c, keys, ids, round_):
    for i in ids:
        k, v = "k%d" % i, ("r%d-%d-" % (round_, i)) + "v" * (i % 90)
        st, p = c.set(k, v)
        check(st == OK, "set %s: %d" % (k, st))
        keys[k] = v.encode()


def same_contents(srv, docs, keys):
    h, c = Http(srv.http_port), Conn(srv.port)
    for i, d in docs.items():
        st, _, body = h.json("GET", "/c/users/docs/%s" % i)
        check(st == 200, "copy: GET %s: %d" % (i, st))
        body.pop("_id", None)
        check(body == d, "copy: %s = %r, wanted %r" % (i, body, d))
    for k, v in keys.items():
        st, _, value = c.get(k)
        check(st == KEY_VALUE_TOKEN and value == v, "copy: key %s: %d %r" % (k, st, value[:40]))
    st, _, body = h.json("POST", "/c/users/_find", {"filter": {"round": 2}, "limit": 1000})
    check(st == 200, "copy: _find %d %r" % (st, body))
    want = sorted(i for i, d in docs.items() if d["round"] == 2)
    check(sorted(x["_id"] for x in body["hits"]) == want, "copy: _find round 2: %d docs, wanted %d"
          % (len(body["hits"]), len(want)))


def audit(url):
    r = subprocess.run([BIN, "audit", "--bucket", url], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def snapshots_upload_what_changed(tmp):
    bdir = os.path.join(tmp, "bucket")
    url = "file://" + bdir
    srv = server(os.path.join(tmp, "data"), ["--bucket", url, "--seal-interval-ms", "50",
                                              "--snapshot-segments", "0", "--file-size", "64K", "--retain", "2s"])
    srv.start()
    docs, keys = {}, {}
    try:
        h, c = Http(srv.http_port), Conn(srv.port)
        write_docs(h, docs, range(300), 1)
        write_keys(c, keys, range(300), 1)
        for i in range(0, 300, 10):   # some deletes, both faces
            st, _, _ = h.json("DELETE", "/c/users/docs/u%d" % i)
            check(st in (200, 204), "delete u%d: %d" % (i, st))
            del docs["u%d" % i]
            st, _ = c.delete("k%d" % i)
            check(st == OK, "delete k%d" % i)
            del keys["k%d" % i]
        before = status(h)
        s1 = snapshot(h)
        check(s1["txn"] == before["txn"], "the snapshot covers every write: %d, last txn %d" % (s1["txn"], before["txn"]))
        # At least a log file, an index segment and the index's commit (merges decide how
        # many segments there are).
        check(s1["files"] >= 3 and s1["files_uploaded"] == s1["files"] and s1["bytes_uploaded"] == s1["bytes"],
              "first snapshot uploads every file: %r" % s1)
        check(manifests(bdir) == [s1["manifest"].split("/")[1]], "one manifest: %r" % manifests(bdir))
        m1 = read_manifest(os.path.join(bdir, s1["manifest"]))
        check(m1["txn"] == s1["txn"] and len(m1["files"]) == s1["files"] and m1["index_txn"] >= s1["txn"],
              "manifest says what the answer says")
        check(any(p.startswith("index/") for p, _, _ in m1["files"]) and
              any(p.startswith("log/") for p, _, _ in m1["files"]), "log and index files in the manifest")

        # More writes, a second snapshot: only the files the first did not name go up.
        write_docs(h, docs, range(0, 300, 3), 2)
        write_keys(c, keys, range(0, 300, 5), 2)
        log_between = status(h)["log_bytes_written"] - before["log_bytes_written"]
        s2 = snapshot(h)
        m2 = read_manifest(os.path.join(bdir, s2["manifest"]))
        old = set(f[2] for f in m1["files"])
        new = [f for f in m2["files"] if f[2] not in old]
        check(s2["files_uploaded"] == len(new) and s2["bytes_uploaded"] == sum(f[1] for f in new),
              "second snapshot uploads exactly the new files: %r, new %d" % (s2, len(new)))
        check(0 < s2["files_uploaded"] < s2["files"], "second snapshot is partial: %r" % s2)
        print("     first snapshot: %d files, %d bytes in %d ms (pin %d ms); second: %d of %d files, "
              "%d of %d bytes for %d log bytes written between" % (
                  s1["files"], s1["bytes"], s1["ms"], s1["pin_ms"], s2["files_uploaded"], s2["files"],
                  s2["bytes_uploaded"], s2["bytes"], log_between))

        # The second manifest's files make a data directory a server opens with everything equal.
        copy = os.path.join(tmp, "copy")
        fetch_copy(bdir, m2, copy)
        other = server(copy)
        other.start()
        try:
            same_contents(other, docs, keys)
        finally:
            other.stop()

        # Retention (--retain 2s): two more, the first once the second is older than the
        # window; the first manifest, its files no kept one names and the segments before
        # the oldest kept replay sequence go. The second stays: the window's start needs it.
        time.sleep(2.2)
        write_docs(h, docs, range(1, 300, 4), 3)
        s3 = snapshot(h)
        write_keys(c, keys, range(1, 300, 7), 3)
        s4 = snapshot(h)
        check(s3["deleted_manifests"] == 1 and s4["deleted_manifests"] == 0, "one manifest deleted: %r %r" % (s3, s4))
        kept = [s2["manifest"], s3["manifest"], s4["manifest"]]
        check(manifests(bdir) == [k.split("/")[1] for k in kept], "three newest kept: %r" % manifests(bdir))
        ms = [read_manifest(os.path.join(bdir, k)) for k in kept]
        named = set(f[2] for m in ms for f in m["files"])
        check(set(os.listdir(os.path.join(bdir, "files"))) == named, "files/ holds exactly what is named")
        segs = sorted(int(s) for s in os.listdir(os.path.join(bdir, "segments")) if s.isdigit())
        check(segs and segs[0] == ms[0]["replay"] and segs == list(range(segs[0], segs[-1] + 1)),
              "segments from the oldest kept replay sequence %d on: %r..%r" % (ms[0]["replay"], segs[:1], segs[-1:]))
        st = status(h)["bucket"]["snapshot"]
        check(st["snapshots"] == 4 and st["failures"] == 0 and st["last_txn"] == s4["txn"], "status: %r" % st)
        # Each snapshot's rotation took the loop some time (one fdatasync), shown as measured.
        check(0 < st["loop_us_last"] <= st["loop_us_max"] < 60000000, "loop time of the rotation: %r" % st)
    finally:
        srv.stop()
    return bdir, url, s4


def audit_names_damage(bdir, url, s4):
    code, out = audit(url)
    check(code == 0 and "manifests ok: 3 manifests" in out, "audit passes: %d %s" % (code, out))
    m = read_manifest(os.path.join(bdir, s4["manifest"]))
    p, size, sha = max(m["files"], key=lambda f: f[1])
    obj = os.path.join(bdir, "files", sha)
    with open(obj, "r+b") as f:
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 1]))
    code, out = audit(url)
    check(code == 1 and ("files/" + sha) in out and p in out and "SHA-256" in out,
          "audit names the flipped byte: %d %s" % (code, out))
    os.unlink(obj)
    code, out = audit(url)
    check(code == 1 and ("files/" + sha) in out and "missing" in out, "audit names the missing file: %d %s" % (code, out))


def policy_takes_its_own(tmp):
    bdir = os.path.join(tmp, "bucket-policy")
    srv = server(os.path.join(tmp, "data-policy"), ["--bucket", "file://" + bdir, "--seal-interval-ms", "20",
                                                    "--snapshot-segments", "3", "--snapshot-interval", "0"])
    srv.start()
    try:
        h = Http(srv.http_port)
        docs = {}
        deadline = time.time() + 20
        n = 0
        while status(h)["bucket"]["snapshot"]["snapshots"] == 0 and time.time() < deadline:
            write_docs(h, docs, range(n, n + 20), 1)
            n += 20
            time.sleep(0.05)
        check(status(h)["bucket"]["snapshot"]["snapshots"] >= 1, "a snapshot after 3 segments")
        check(len(manifests(bdir)) >= 1, "its manifest is in the bucket")
    finally:
        srv.stop()
    plain = server(os.path.join(tmp, "data-plain"), ["--no-bucket"])
    plain.start()
    try:
        st, _, body = Http(plain.http_port).json("POST", "/_admin/snapshot")
        check(st == 409 and error_code(body) == "no_bucket", "no bucket: %d %r" % (st, body))
    finally:
        plain.stop()


def snapshot_without_index(tmp):
    """serve --bucket --no-index: a snapshot has no index to wait for or copy (it
    crashed the server with SIGSEGV); a restore of it serves the data, and a
    server with an index on the restored directory builds its own."""
    bdir = os.path.join(tmp, "bucket-noindex")
    srv = server(os.path.join(tmp, "data-noindex"), ["--bucket", "file://" + bdir, "--no-index"])
    srv.start()
    docs, keys = {}, {}
    try:
        h, c = Http(srv.http_port), Conn(srv.port)
        write_docs(h, docs, range(30), 2)
        write_keys(c, keys, range(30), 2)
        snap = snapshot(h)
        check(srv.proc.poll() is None, "the server is alive after the snapshot")
        check(snap.get("txn", 0) > 0, "the snapshot's txn: %r" % snap)
        m = read_manifest(os.path.join(bdir, "manifests", manifests(bdir)[-1]))
        check(m["files"] and not any(p.startswith("index/") for p, _, _ in m["files"]),
              "no index files in the manifest: %r" % [p for p, _, _ in m["files"]])
        check(srv.stop() == 0, "clean stop")
    finally:
        if srv.proc:
            srv.kill()
    to = os.path.join(tmp, "restored-noindex")
    r = subprocess.run([BIN, "restore", "--bucket", "file://" + bdir, "--to", to], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, "restore: %s %s" % (r.stdout, r.stderr))
    copy = server(to, ["--no-bucket"])
    copy.start()
    try:
        h = Http(copy.http_port)
        deadline = time.time() + 20
        while status(h)["index"]["index_txn"] < snap["txn"]:   # the new index catches up
            check(time.time() < deadline, "the restored node's index: %r" % status(h)["index"])
            time.sleep(0.05)
        same_contents(copy, docs, keys)
    finally:
        copy.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-snapshot-")
    try:
        bdir, url, s4 = snapshots_upload_what_changed(tmp)
        print("ok   snapshots upload what changed; a fetched copy serves everything; retention")
        audit_names_damage(bdir, url, s4)
        print("ok   audit checks every manifest and names the damaged and the missing file")
        policy_takes_its_own(tmp)
        print("ok   --snapshot-segments takes one on its own; 409 without a bucket")
        snapshot_without_index(tmp)
        print("ok   --no-index: a snapshot without index files; its restore builds an index of its own")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
