"""hanuhttp.py: helpers for the documents API end-to-end tests: a real
`hanudb serve` with its HTTP port, and a small keep-alive JSON client."""
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import Server, free_port, check  # noqa


class HttpServer(Server):
    def __init__(self, data_dir, extra=(), http_port=None):
        self.http_port = http_port or free_port()
        super().__init__(data_dir, ["--http-addr", "127.0.0.1:%d" % self.http_port] + list(extra))

    def start(self, expect_ok=True, timeout=15.0):
        ok = super().start(expect_ok, timeout)
        if ok:
            import time
            # A TLS port is asked in TLS: a plain request there never succeeds, and waited out the deadline.
            tls = "--tls-cert" in self.extra
            deadline = time.time() + timeout
            while time.time() < deadline:
                try:
                    Http(self.http_port, tls=tls).call("GET", "/_health")
                    break
                except OSError:
                    time.sleep(0.02)
        return ok


class Http:
    def __init__(self, port, token=None, timeout=15, tls=False):
        if tls:
            import ssl
            ctx = ssl._create_unverified_context()
            self.c = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=ctx)
        else:
            self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.token = token

    def call(self, method, path, body=None, headers=None):
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        # The server reads a body only when it says it is JSON (415 otherwise).
        if body is not None and not any(k.lower() == "content-type" for k in h):
            h["Content-Type"] = "application/json"
        self.c.request(method, path, body=body, headers=h)
        r = self.c.getresponse()
        data = r.read()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data

    def json(self, method, path, body=None, headers=None):
        st, h, data = self.call(method, path, body, headers)
        try:
            return st, h, json.loads(data) if data else None
        except ValueError:
            raise AssertionError("not JSON: %r" % data)

    def close(self):
        self.c.close()


def find_chromium():
    """The headless browser of the browser tests (Debian's chromium), or None."""
    import shutil
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def error_code(body):
    check(isinstance(body, dict) and "error" in body and "code" in body["error"] and
          body["error"].get("message"), "error body shape: %r" % body)
    return body["error"]["code"]


def start_with_fsync_hold(data_dir, hold, trigger=None):
    """An HttpServer whose fdatasync and fsync wait while the file hold exists
    (tests/fault_fsync.c, LD_PRELOAD): answers that wait for a sync stay held;
    and fail with EIO while the file trigger exists."""
    build = os.environ.get("HANUDB_BUILD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    saved = dict(os.environ)
    os.environ["LD_PRELOAD"] = os.path.join(build, "tests", "libfault_fsync.so")
    os.environ["HANUDB_FAULT_FSYNC_HOLD"] = hold
    if trigger:
        os.environ["HANUDB_FAULT_FSYNC_TRIGGER"] = trigger
    # Under ASan (make asan) the preloaded library comes before ASan's runtime, which
    # is harmless here: it only wraps fsync.
    os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    try:
        srv = HttpServer(data_dir)
        srv.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return srv


def run_cases(srv, cases):
    """Runs each case(h, srv) on one server, printing ok/FAIL; returns the failures."""
    h = Http(srv.http_port)
    failures = 0
    for t in cases:
        try:
            t(h, srv)
            print("ok   %s" % t.__name__)
        except Exception as e:  # noqa
            failures += 1
            print("FAIL %s: %s" % (t.__name__, e))
            h = Http(srv.http_port)
    return failures


def run_suite(prefix, run_main, runs):
    """A test file's main: run_main(tmp) returns its failures, then each (fn, message)
    of runs; every server started is killed at the end, even when a check fails."""
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix=prefix)
    started = []
    real_start = Server.start

    def tracked_start(self, *a, **k):
        started.append(self)
        return real_start(self, *a, **k)
    Server.start = tracked_start
    failures = 0
    try:
        failures = run_main(tmp)
        for fn, message in runs:
            fn(tmp)
            print("ok   %s" % message)
    finally:
        for srv in started:
            srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        sys.exit(1)
