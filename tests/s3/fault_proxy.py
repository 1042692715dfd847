"""fault_proxy.py: a small HTTP proxy in front of the S3 emulator (s3rver) for the
fault-injection run (tests/e2e_lease_faults.py).

    python3 tests/s3/fault_proxy.py --upstream 127.0.0.1:PORT [--port 0] [--seed N]

prints `fault proxy listening on 127.0.0.1:PORT` and forwards every request unchanged
(the Host header too, so the client's SigV4 signature still verifies upstream).

Conditional puts. s3rver ignores If-None-Match and If-Match (docs/BUCKET.md), so in mode
`honour` (the default) the proxy implements them itself: every PUT, POST and DELETE is
serialised under one lock (exclusive of reads too: s3rver writes its files in place, so a read
during a write may see a torn or missing object, which S3 never shows); a request carrying If-None-Match: * is answered 412
PreconditionFailed when a HEAD of the key (signed by the proxy with the emulator's
credentials) finds it, and one carrying If-Match: "ETAG" is answered 404 NoSuchKey when the
key is absent and 412 when its ETag differs; otherwise it is forwarded. A multipart upload's
completing POST is checked the same way. In mode `ignore` the proxy drops those headers
when the client did not sign them (and forwards them, to be ignored by s3rver, when it did):
a store that ignores conditional puts, which the fencing probe must refuse.

Faults, each drawn per request from a generator seeded with --seed:
  fail   answer 503 SlowDown without forwarding (the request did not act);
  lost   forward, then close the connection without answering (acted, answer lost);
  reset  forward, then send the status line, the headers and half of the body and reset
         the connection (RST): a torn answer.

Control: GET /__proxy__?mode=honour|ignore&fail=R&lost=R&reset=R sets any of those and
answers the counters as JSON (also without parameters)."""
import argparse
import datetime
import hashlib
import hmac
import http.client
import http.server
import json
import random
import socket
import struct
import sys
import threading
import urllib.parse

HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te", "upgrade"}


class RWLock:
    """Shared for reads, exclusive for writes, a waiting writer first: s3rver writes an
    object's file in place, so a get during a put of the same key can see it torn or
    missing (seen: a lease object read as `unexpected end of input`), which S3 never shows."""

    def __init__(self):
        self.c = threading.Condition()
        self.readers = 0
        self.writer = False
        self.waiting = 0

    def acquire(self, write):
        with self.c:
            if write:
                self.waiting += 1
                while self.writer or self.readers:
                    self.c.wait()
                self.waiting -= 1
                self.writer = True
            else:
                while self.writer or self.waiting:
                    self.c.wait()
                self.readers += 1

    def release(self, write):
        with self.c:
            if write:
                self.writer = False
            else:
                self.readers -= 1
            self.c.notify_all()


class State:
    def __init__(self, upstream, seed, access_key, secret_key, region):
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.rng_lock = threading.Lock()
        self.lock = RWLock()
        self.mode = "honour"
        self.rates = {"fail": 0.0, "lost": 0.0, "reset": 0.0}
        self.counts = {"requests": 0, "fail": 0, "lost": 0, "reset": 0, "refused_412": 0, "refused_404": 0,
                       "stripped": 0}
        self.ak, self.sk, self.region = access_key, secret_key, region

    def draw(self):
        """The fault for one request: None, 'fail', 'lost' or 'reset'."""
        with self.rng_lock:
            self.counts["requests"] += 1
            x = self.rng.random()
            acc = 0.0
            for k in ("fail", "lost", "reset"):
                acc += self.rates[k]
                if x < acc:
                    self.counts[k] += 1
                    return k
        return None

    def count(self, k):
        with self.rng_lock:
            self.counts[k] += 1

    def head(self, path):
        """HEAD of an object upstream, signed with SigV4: (status, etag or None)."""
        now = datetime.datetime.now(datetime.timezone.utc)
        amz = now.strftime("%Y%m%dT%H%M%SZ")
        day = now.strftime("%Y%m%d")
        host = self.upstream
        payload = hashlib.sha256(b"").hexdigest()
        signed = "host;x-amz-content-sha256;x-amz-date"
        canon = "\n".join(["HEAD", path, "", "host:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n" % (host, payload, amz),
                           signed, payload])
        scope = "%s/%s/s3/aws4_request" % (day, self.region)
        sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canon.encode()).hexdigest()])
        k = ("AWS4" + self.sk).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        c = http.client.HTTPConnection(host, timeout=30)
        try:
            c.request("HEAD", path, headers={
                "Host": host, "x-amz-date": amz, "x-amz-content-sha256": payload,
                "Authorization": "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
                                 % (self.ak, scope, signed, sig)})
            r = c.getresponse()
            r.read()
            return r.status, (r.getheader("ETag") or "").strip('"') or None
        finally:
            c.close()


def s3_error(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>'
            % (code, message)).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None  # set by serve()

    def log_message(self, *a):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _answer(self, status, headers, body, head=False):
        self.send_response_only(status)
        for k, v in headers:
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        if head:
            cl = [v for k, v in headers if k.lower() == "content-length"]
            self.send_header("Content-Length", cl[0] if cl else "0")
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)
        self.wfile.flush()

    def _forward(self, body, drop=()):
        st = self.state
        c = http.client.HTTPConnection(st.upstream, timeout=60)
        try:
            c.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in self.headers.items():
                if k.lower() in HOP or k.lower() in drop or k.lower() == "content-length":
                    continue
                c.putheader(k, v)
            if body or self.command in ("PUT", "POST"):
                c.putheader("Content-Length", str(len(body)))
            c.endheaders(body if body else None)
            r = c.getresponse()
            data = r.read()
            return r.status, r.getheaders(), data
        finally:
            c.close()

    def _control(self):
        st = self.state
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        with st.rng_lock:
            if "mode" in q:
                st.mode = q["mode"][0]
            for k in ("fail", "lost", "reset"):
                if k in q:
                    st.rates[k] = float(q[k][0])
            if "seed" in q:
                st.rng.seed(int(q["seed"][0]))
            body = json.dumps({"mode": st.mode, "rates": st.rates, "counts": st.counts}).encode()
        self._answer(200, [("Content-Type", "application/json")], body)

    def _handle(self):
        st = self.state
        if self.path.startswith("/__proxy__"):
            self._body()
            return self._control()
        body = self._body()
        fault = st.draw()
        if fault == "fail":
            return self._answer(503, [("Content-Type", "application/xml")], s3_error("SlowDown", "fault proxy: slow down"))
        method = self.command
        inm = self.headers.get("If-None-Match")
        im = self.headers.get("If-Match")
        conditional = inm is not None or im is not None
        writes = method in ("PUT", "POST", "DELETE")
        drop = ()
        if conditional and st.mode == "ignore":
            auth = self.headers.get("Authorization", "").lower()
            signed = auth.split("signedheaders=")[1].split(",")[0].split(";") if "signedheaders=" in auth else []
            drop = tuple(h for h in ("if-none-match", "if-match") if h not in signed)
            if drop:
                st.count("stripped")
        st.lock.acquire(writes)
        try:
            if conditional and st.mode == "honour" and method in ("PUT", "POST"):
                path = urllib.parse.urlsplit(self.path).path
                hs, etag = st.head(path)
                if inm is not None and inm.strip() == "*" and hs == 200:
                    st.count("refused_412")
                    return self._answer(412, [("Content-Type", "application/xml")],
                                        s3_error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold"))
                if im is not None:
                    if hs == 404:
                        st.count("refused_404")
                        return self._answer(404, [("Content-Type", "application/xml")],
                                            s3_error("NoSuchKey", "The specified key does not exist."))
                    if etag != im.strip().strip('"'):
                        st.count("refused_412")
                        return self._answer(412, [("Content-Type", "application/xml")],
                                            s3_error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold"))
            status, headers, data = self._forward(body, drop)
        finally:
            st.lock.release(writes)
        if fault == "lost":
            self.close_connection = True
            return
        if fault == "reset":
            self.send_response_only(status)
            for k, v in headers:
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(max(len(data), 2)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        self._answer(status, headers, data, head=(method == "HEAD"))

    def do_GET(self):
        self._handle()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET


def serve(upstream, port=0, seed=1, access_key="S3RVER", secret_key="S3RVER", region="us-east-1"):
    """Starts the proxy in a thread of this process; returns the server (server_address)."""
    Handler.state = State(upstream, seed, access_key, secret_key, region)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", default="honour")
    a = ap.parse_args()
    s = serve(a.upstream, a.port, a.seed)
    Handler.state.mode = a.mode
    print("fault proxy listening on 127.0.0.1:%d" % s.server_address[1], flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        sys.exit(0)
