"""The web console (/_console/, src/console, console/) in a real browser.

Over plain HTTP: the files are served with their Content-Type, a strong ETag
(304 on If-None-Match), Cache-Control and a Content-Security-Policy that allows
this origin only; /_console redirects to /_console/; an unknown file is 404 and
a POST 405, with the API's JSON error body; the files need no token (they hold
no data) while the API still does; no file names an http(s) URL other than the
SVG namespace; a server started with --no-console answers 404 there.

In headless Chromium driven over the DevTools protocol (--remote-debugging-pipe,
Python stdlib only), against a server with tokens and 30 documents: the console
asks for the token, lists the collection with its count, pages through the
documents by the listing's cursor, runs a _find (filter, sort, fields) and a
_search (q, fields) and checks the rendered rows against the expected ids, draws
an aggregation as SVG bars, edits a document (PUT with If-Match: saved), then
edits one that another client changed meanwhile: the 412 shows as a conflict
with both versions and nothing is written, and "keep mine" writes it over the
new version; one deleted meanwhile shows as deleted, and "write mine again"
creates it (If-None-Match: *). The live and bucket views render from /metrics and /_status; the
bucket view's "Audit now" runs POST /_admin/audit and shows its end ("ok"). Every
request the page made went to the server's own origin (recorded by the
protocol's Network domain). Screenshots go to BUILD/console-screenshots/.

Skips, saying so, only when Chromium is not installed (scripts/install-deps.sh
installs it)."""
import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import HttpServer, Http, error_code, find_chromium  # noqa
from hanukv import check  # noqa

TOKEN = "tok-console-1"
CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Accra"]
BUILD = os.environ.get("BUILD", "build")


class Browser:
    """Headless Chromium over the DevTools protocol on a pipe (fd 3 to the browser,
    fd 4 from it; messages are JSON ended by a NUL byte), one page attached."""

    def __init__(self, chromium, tmp):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # The browser reads its commands on fd 3 and writes on fd 4.
        def child_fds():   # via fds above 4, so that neither dup2 overwrites the other's source
            a, b = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--disable-extensions", "--user-data-dir=" + os.path.join(tmp, "profile"),
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, pass_fds=(3, 4))
        os.close(to_r)
        os.close(from_w)
        self.next_id = 0
        self.lock = threading.Lock()
        self.replies = {}
        self.cond = threading.Condition(self.lock)
        self.requests = []    # (method, url) of every request the page sent
        self.responses = []   # (status, url)
        threading.Thread(target=self.reader, daemon=True).start()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page.enable", "Network.enable", "Runtime.enable"):
            self.send(domain, session=True)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1200, "height": 860, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def reader(self):
        buf = b""
        while True:
            chunk = os.read(self.from_r, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self.cond:
                    if "id" in msg:
                        self.replies[msg["id"]] = msg
                        self.cond.notify_all()
                    elif msg.get("method") == "Network.requestWillBeSent":
                        r = msg["params"]["request"]
                        self.requests.append((r["method"], r["url"]))
                    elif msg.get("method") == "Network.responseReceived":
                        r = msg["params"]["response"]
                        self.responses.append((r["status"], r["url"]))

    def send(self, method, params=None, session=False, timeout=20):
        with self.cond:
            self.next_id += 1
            mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        with self.cond:
            while mid not in self.replies:
                left = deadline - time.time()
                check(left > 0, "no answer from the browser to %s" % method)
                self.cond.wait(left)
            reply = self.replies.pop(mid)
        check("error" not in reply, "%s: %r" % (method, reply.get("error")))
        return reply["result"]

    def js(self, expr):
        """The value of expr (awaited when a promise) in the page."""
        r = self.send("Runtime.evaluate", {"expression": expr, "awaitPromise": True, "returnByValue": True},
                      session=True)
        check("exceptionDetails" not in r, "page script %r: %r" % (expr[:80], r.get("exceptionDetails")))
        return r["result"].get("value")

    def wait(self, expr, what, timeout=10):
        deadline = time.time() + timeout
        while True:
            v = self.js("(() => { try { return !!(%s); } catch (e) { return false; } })()" % expr)   # not loaded yet
            if v:
                return v
            if time.time() > deadline:
                notice = self.js("document.getElementById('notice') && document.getElementById('notice').textContent")
                check(False, "waited %ds for %s (notice: %r)" % (timeout, what, notice))
            time.sleep(0.05)

    def go(self, url):
        self.send("Page.navigate", {"url": url}, session=True)

    def screenshot(self, path):
        # Every view is checked for values rendered as "[object ...]" or "undefined" before its picture.
        text = self.js("document.getElementById('main').textContent")
        check(not re.search(r"\[object |undefined|NaN", text), "%s: a value not rendered: %r" % (path, text[:2000]))
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except AssertionError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_w)


def set_value(sel, value):
    return "(() => { const e = document.querySelector(%s); e.value = %s; e.dispatchEvent(new Event('change')); " \
           "return true; })()" % (json.dumps(sel), json.dumps(value))


def doc_shown(doc_id):
    """The document view of doc_id is on the page (not the previous document's view)."""
    return "JSON.parse(document.getElementById('doc-json').textContent)._id === %s" % json.dumps(doc_id)


def rows(table_sel, col=0):
    return "Array.from(document.querySelectorAll('%s tbody tr')).map(r => r.cells[%d].textContent)" % (table_sel, col)


def check_http(srv, tmp):
    """The files over plain HTTP, without a browser."""
    h = Http(srv.http_port)   # no token: the console's files are public
    st, hd, body = h.call("GET", "/_console/")
    check(st == 200 and hd["content-type"] == "text/html; charset=utf-8" and b"console.js" in body,
          "GET /_console/: %d %r" % (st, hd))
    csp = hd.get("content-security-policy", "")
    for part in ("default-src 'none'", "script-src 'self'", "connect-src 'self'", "style-src 'self'",
                 "frame-ancestors 'none'"):
        check(part in csp, "CSP has %r: %r" % (part, csp))
    check(hd.get("x-content-type-options") == "nosniff" and hd.get("cache-control") == "no-cache",
          "nosniff, no-cache: %r" % hd)
    etag = hd.get("etag", "")
    check(re.fullmatch(r'"[0-9a-f]{20}"', etag), "a strong ETag: %r" % etag)
    st, hd2, body2 = h.call("GET", "/_console/", headers={"If-None-Match": 'W/"x", ' + etag})
    check(st == 304 and body2 == b"" and hd2.get("etag") == etag, "If-None-Match: %d %r" % (st, hd2))
    st, _, _ = h.call("HEAD", "/_console/console.js")
    check(st == 200, "HEAD: %d" % st)
    bundle = b""
    for name, ctype in (("console.js", "text/javascript; charset=utf-8"), ("console.css", "text/css; charset=utf-8"),
                        ("index.html", "text/html; charset=utf-8")):
        st, hd, body = h.call("GET", "/_console/" + name)
        check(st == 200 and hd["content-type"] == ctype and int(hd["content-length"]) == len(body) > 0,
              "%s: %d %r" % (name, st, hd))
        with open(os.path.join(os.path.dirname(__file__), "..", "console", name), "rb") as f:
            check(f.read() == body, "%s is served byte for byte" % name)
        bundle += body
    urls = set(re.findall(rb"https?://[^\s\"'<>)]*", bundle))
    check(urls == {b"http://www.w3.org/2000/svg"}, "no file names a URL but the SVG namespace: %r" % urls)
    st, hd, _ = h.call("GET", "/_console?x=1")
    check(st == 308 and hd.get("location") == "/_console/", "/_console redirects: %d %r" % (st, hd))
    st, _, body = h.call("GET", "/_console/nope.js")
    check(st == 404 and error_code(json.loads(body)) == "not_found", "unknown file: %d %r" % (st, body))
    st, _, body = h.call("GET", "/_console/../c")
    check(st == 404, "no path outside the table: %d %r" % (st, body))
    st, hd, body = h.call("POST", "/_console/", body={})
    check(st == 405 and hd.get("allow") == "GET, HEAD" and error_code(json.loads(body)) == "method_not_allowed",
          "POST: %d %r" % (st, body))
    st, _, _ = h.call("GET", "/c")
    check(st == 401, "the API still needs the token: %d" % st)
    st, _, text = Http(srv.http_port, token=TOKEN).call("GET", "/metrics")
    counted = dict(re.findall(r'hanudb_http_requests_total\{route="other",status="(\d+)"\} (\d+)', text.decode()))
    check(counted.get("200") == "5" and counted.get("304") == "1", "counted under route other: %r" % counted)
    st, _, _ = h.call("GET", "/_consoleX/")
    check(st == 404, "a longer first segment is not the console: %d" % st)
    h.close()
    off = HttpServer(os.path.join(tmp, "off"), ["--no-bucket", "--no-console"])
    off.start()
    try:
        st, _, body = Http(off.http_port).call("GET", "/_console/")
        check(st == 404 and error_code(json.loads(body)) == "not_found", "--no-console: %d %r" % (st, body))
    finally:
        off.stop()


def main():
    chromium = find_chromium()
    tmp = tempfile.mkdtemp(prefix="hanudb-console-")
    shots = os.path.join(BUILD, "console-screenshots")
    os.makedirs(shots, exist_ok=True)
    srv = HttpServer(os.path.join(tmp, "data"), ["--tokens", TOKEN + " rw *", "--seal-interval-ms", "200"])
    srv.start()
    browser = None
    try:
        check_http(srv, tmp)
        if not chromium:
            print("SKIP e2e_console (browser part): Chromium is not installed (scripts/install-deps.sh installs the "
                  "Debian package chromium)")
            return
        api = Http(srv.http_port, token=TOKEN)
        docs = {}
        for i in range(30):
            d = {"name": "User %02d" % i, "age": 20 + (i * 7) % 41, "city": CITIES[i % 5],
                 "bio": "lives in %s and likes %s" % (CITIES[i % 5], "chess" if i % 3 == 0 else "tea")}
            docs["u%02d" % i] = d
        st, _, _ = api.json("POST", "/c/users/_batch", {"ops": [{"op": "put", "id": k, "doc": v} for k, v in docs.items()]})
        check(st == 200, "seed: %d" % st)
        base = "http://127.0.0.1:%d" % srv.http_port
        browser = b = Browser(chromium, tmp)

        # The token, asked once.
        b.go(base + "/_console/")
        b.wait("!document.getElementById('token-form').hidden", "the token form")
        b.js(set_value("#token-input", TOKEN) + " && document.getElementById('token-form').requestSubmit()")
        b.wait("document.querySelector('#collections tbody tr')", "the collections table")
        check(b.js("sessionStorage.getItem('hanudb-token')") == TOKEN, "the token is kept in sessionStorage")
        got = b.js("Array.from(document.querySelectorAll('#collections tbody tr')).map(r => "
                   "Array.from(r.cells).map(c => c.textContent))")
        check(got == [["users", "30", got[0][2]]] and got[0][2].endswith("KiB"), "collections: %r" % got)
        b.screenshot(os.path.join(shots, "collections.png"))

        # Paging by the listing's cursor.
        b.go(base + "/_console/#/c/users")
        b.wait("document.querySelectorAll('#docs tbody tr').length == 20", "the first page")
        check(b.js(rows("#docs")) == sorted(docs)[:20], "page 1 by id")
        b.js("document.getElementById('next-page').click()")
        b.wait("document.querySelectorAll('#docs tbody tr').length == 10", "the second page")
        check(b.js(rows("#docs")) == sorted(docs)[20:], "page 2 by id")
        check(b.js("document.getElementById('next-page').disabled"), "no page after the last")
        b.screenshot(os.path.join(shots, "documents.png"))

        # _find: filter, sort, fields.
        b.go(base + "/_console/#/query/users")
        b.wait("document.getElementById('q-filter')", "the query form")
        b.js(set_value("#q-filter", '{"age": {"$gte": 40}}'))
        b.js(set_value("#q-sort", '[{"age": -1}, {"_id": 1}]'))
        b.js(set_value("#q-fields", '["name", "age"]'))
        b.js("document.getElementById('q-form').requestSubmit()")
        b.wait("document.querySelector('#q-table tbody tr')", "find results")
        want = [k for k, v in sorted(docs.items(), key=lambda kv: (-kv[1]["age"], kv[0])) if v["age"] >= 40][:20]
        check(b.js(rows("#q-table")) == want, "find rows: %r, want %r" % (b.js(rows("#q-table")), want))
        heads = b.js("Array.from(document.querySelectorAll('#q-table thead th')).map(c => c.textContent)")
        check(heads == ["_id", "txn", "name", "age"], "projected columns: %r" % heads)
        ages = b.js(rows("#q-table", 3))
        check(ages == [str(docs[k]["age"]) for k in want], "ages rendered: %r" % ages)
        curl = b.js("document.getElementById('q-curl').textContent")
        check(curl.startswith("curl -X POST '%s/c/users/_find'" % base) and
              '"filter":{"age":{"$gte":40}}' in curl and "$HANUDB_TOKEN" in curl and TOKEN not in curl,
              "curl line: %r" % curl)
        b.screenshot(os.path.join(shots, "find.png"))

        # _search: q and fields.
        b.js(set_value("#q-mode", "search"))
        b.js(set_value("#q-q", "oslo chess"))
        b.js(set_value("#q-fields", '["bio"]'))
        b.js("document.getElementById('q-form').requestSubmit()")
        b.wait("document.querySelector('#q-table thead th:nth-child(3)') && "
               "document.querySelector('#q-table thead th:nth-child(3)').textContent == 'score'", "search results")
        got = b.js(rows("#q-table"))
        want = sorted(k for k, v in docs.items() if "Oslo" in v["bio"] or "chess" in v["bio"])
        check(sorted(got) == want, "search rows: %r, want %r" % (got, want))
        both = [k for k in want if "Oslo" in docs[k]["bio"] and "chess" in docs[k]["bio"]]
        check(set(got[:len(both)]) == set(both), "both words rank first: %r %r" % (got, both))
        check("_search" in b.js("document.getElementById('q-curl').textContent"), "curl names _search")

        # _aggs as bars.
        b.js(set_value("#q-mode", "aggs"))
        b.js(set_value("#q-aggs", '{"cities": {"terms": {"field": "city"}}, "ages": {"histogram": {"field": "age", "interval": 10}}}'))
        b.js("document.getElementById('q-form').requestSubmit()")
        b.wait("document.querySelector('#q-aggs svg')", "aggregation charts")
        bars = b.js("Array.from(document.querySelectorAll('#q-aggs figure')).map(f => f.querySelectorAll('rect').length)")
        hist = len({(v["age"] // 10) * 10 for v in docs.values()})
        check(bars == [len(CITIES), hist], "bars per aggregation: %r (want %d, %d)" % (bars, len(CITIES), hist))
        b.screenshot(os.path.join(shots, "aggs.png"))

        # Edit with If-Match: saved.
        st, hd, _ = api.call("GET", "/c/users/docs/u05")
        old_etag = hd["etag"]
        b.go(base + "/_console/#/c/users/doc/u05")
        b.wait(doc_shown("u05"), "the document view of u05")
        check(b.js("document.getElementById('doc-etag').textContent") == old_etag, "ETag shown")
        check(b.js("document.getElementById('doc-txn').textContent") == hd["hanu-txn"], "txn shown")
        check(json.loads(b.js("document.getElementById('doc-json').textContent")) == dict(_id="u05", **docs["u05"]),
              "the JSON view")
        b.js("document.getElementById('edit-doc').click()")
        mine = dict(_id="u05", **dict(docs["u05"], age=99))
        b.js(set_value("#doc-editor", json.dumps(mine)))
        b.js("document.getElementById('save-doc').click()")
        b.wait("document.querySelector('main p.ok') && /Saved at txn/.test(document.querySelector('main p.ok').textContent)",
               "saved")
        st, hd, body = api.json("GET", "/c/users/docs/u05")
        check(body == mine and hd["etag"] != old_etag, "the edit is stored: %r" % body)

        # A conflict: another client writes between load and save.
        b.go(base + "/_console/#/c/users/doc/u06")
        b.wait(doc_shown("u06"), "the document view of u06")
        loaded = b.js("document.getElementById('doc-etag').textContent")
        theirs = dict(_id="u06", **dict(docs["u06"], city="Quito"))
        st, _, w = api.json("PUT", "/c/users/docs/u06", theirs)
        check(st == 200, "the other client's write")
        b.js("document.getElementById('edit-doc').click()")
        mine = dict(_id="u06", **dict(docs["u06"], name="Mine"))
        b.js(set_value("#doc-editor", json.dumps(mine)))
        b.js("document.getElementById('save-doc').click()")
        b.wait("document.getElementById('conflict')", "the conflict")
        shown = json.loads(b.js("document.getElementById('conflict-theirs').textContent"))
        check(shown == theirs, "the conflict shows the current version: %r" % shown)
        check(json.loads(b.js("document.getElementById('conflict-mine').textContent")) == mine, "and the edit")
        st, _, body = api.json("GET", "/c/users/docs/u06")
        check(body == theirs, "nothing written on 412: %r" % body)
        b.screenshot(os.path.join(shots, "conflict.png"))
        b.js("document.getElementById('keep-mine').click()")
        b.wait("document.querySelector('main p.ok')", "kept mine")
        st, hd, body = api.json("GET", "/c/users/docs/u06")
        check(body == mine and hd["etag"] not in (loaded, '"%d"' % w["txn"]), "mine over theirs: %r" % body)
        puts = [s for s, u in b.responses if u.endswith("/c/users/docs/u06")]
        check(puts.count(412) == 1, "one 412 for u06 seen by the browser: %r" % puts)

        # A conflict with a delete: "write mine again" creates it (If-None-Match: *).
        b.go(base + "/_console/#/c/users/doc/u07")
        b.wait(doc_shown("u07"), "the document view of u07")
        check(api.json("DELETE", "/c/users/docs/u07")[0] == 200, "the other client's delete")
        b.js("document.getElementById('edit-doc').click()")
        mine = dict(_id="u07", **dict(docs["u07"], name="Back"))
        b.js(set_value("#doc-editor", json.dumps(mine)))
        b.js("document.getElementById('save-doc').click()")
        b.wait("document.getElementById('conflict')", "the conflict with a delete")
        check(b.js("document.getElementById('conflict-theirs').textContent") == "(none)", "shown as deleted")
        check(api.call("GET", "/c/users/docs/u07")[0] == 404, "nothing written on 412")
        b.js("document.getElementById('keep-mine').click()")
        b.wait("document.querySelector('main p.ok')", "written again")
        check(api.json("GET", "/c/users/docs/u07")[2] == mine, "u07 is mine")

        # Live and bucket views.
        b.go(base + "/_console/#/live")
        b.wait("document.querySelectorAll('#live figure').length == 9 && "
               "/leader/.test(document.getElementById('live-role').textContent)", "the live view")
        for i in range(3):   # a few writes, so that the plots move
            api.json("PUT", "/c/users/docs/live%d" % i, {"i": i})
            time.sleep(0.7)
        b.wait("document.querySelectorAll('#live polyline')[0].getAttribute('points').split(' ').length >= 2",
               "two samples plotted", timeout=8)
        writes = b.js("document.querySelector('#live figure figcaption span').textContent")
        check(re.search(r"\(max (0\.[1-9]|[1-9])", writes), "writes/s moved: %r" % writes)
        b.screenshot(os.path.join(shots, "live.png"))
        b.go(base + "/_console/#/bucket")
        b.wait("/last segment/.test(document.getElementById('main').textContent)", "the bucket view")
        text = b.js("document.getElementById('main').textContent")
        check("retention window24 h" in text and "sealerok" in text and re.search(r"last segment[1-9]", text),
              "the bucket's facts: %r" % text)
        check(b.js("document.getElementById('audit-state').textContent") == "never", "no audit yet")
        b.js("document.getElementById('audit-now').click()")
        b.wait("document.getElementById('audit-state').textContent == 'ok'", "the audit's end", timeout=20)
        text = b.js("document.getElementById('audit').textContent")
        st, _, status = api.json("GET", "/_status")
        a = status["bucket"]["audit"]
        check(a["state"] == "ok" and a["segments"] >= 1 and ("segments checked" + str(a["segments"])) in text,
              "the audit shown: %r, /_status %r" % (text, a))
        b.screenshot(os.path.join(shots, "bucket.png"))

        # Every request went to the server itself.
        others = [u for _, u in b.requests if not u.startswith(base + "/") and u != "about:blank"]
        check(not others, "requests elsewhere: %r" % others)
        check(len(b.requests) > 20, "requests recorded: %d" % len(b.requests))
        print("e2e_console: %d requests, all to %s; screenshots in %s" % (len(b.requests), base, shots))
    finally:
        if browser:
            browser.close()
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
    print("e2e_console: OK")
