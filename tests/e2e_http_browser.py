"""The documents API from a real browser: headless Chromium loads a page from
another origin (a small Python http.server) and checks, in the page itself,
what a web developer and an attacker can do. Two servers: A has no tokens (the
default, loopback), B needs a bearer token; both allow the page's origin.

The page, from an allowed origin:
- reads a document of B with a bearer token, reads its ETag, and PUTs it back
  with If-Match (a preflighted request); a stale If-Match gets 412;
- sends a no-cors text/plain POST and a no-cors _batch with a delete to A
  (requests a page may send without a preflight): neither changes anything;
- sends DELETE A/c/scratch/docs/.. (the browser makes it DELETE /c/scratch/):
  the collection stays.
A page from an origin not in --cors-origins cannot read a document of A.

The results are read from the page's DOM (chromium --dump-dom), not from the
server. Skips, saying so, only when Chromium is not installed
(scripts/install-deps.sh installs it)."""
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa
from hanukv import Server  # noqa

TOKEN = "tok-browser-1"

# Runs every step, then writes the results as JSON into #result: a step that
# throws (a fetch the browser blocked) records "blocked".
COMMON_JS = r"""
const q = new URLSearchParams(location.search);
const A = "http://127.0.0.1:" + q.get("a"), B = "http://127.0.0.1:" + q.get("b");
const out = {};
async function step(name, fn) {
  try { out[name] = await fn(); } catch (e) { out[name] = "blocked"; }
}
function done() { document.getElementById("result").textContent = "DONE " + JSON.stringify(out); }
"""

ALLOWED_PAGE = """<!doctype html><html><body><pre id="result">pending</pre><script>
""" + COMMON_JS + r"""
async function run() {
  const auth = {"Authorization": "Bearer %(token)s"};
  let etag = null;
  await step("get", async () => {
    const r = await fetch(B + "/c/users/docs/alice", {headers: auth});
    etag = r.headers.get("ETag");
    return {status: r.status, etag: etag, txn: r.headers.get("Hanu-Txn"), body: await r.json()};
  });
  await step("put", async () => {
    const r = await fetch(B + "/c/users/docs/alice", {method: "PUT", body: JSON.stringify({name: "Alice", v: 2}),
      headers: {...auth, "Content-Type": "application/json", "If-Match": etag,
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "X-Request-Id": "r1"}});
    return {status: r.status, body: await r.json()};
  });
  await step("stale_put", async () => {
    const r = await fetch(B + "/c/users/docs/alice", {method: "PUT", body: "{}",
      headers: {...auth, "Content-Type": "application/json", "If-Match": etag}});
    return {status: r.status};
  });
  await step("create", async () => {
    const r = await fetch(B + "/c/users/docs", {method: "POST", body: "{}",
      headers: {...auth, "Content-Type": "application/json"}});
    return {status: r.status, location: r.headers.get("Location"), body: await r.json()};
  });
  await step("nocors_post", async () => {
    const r = await fetch(A + "/c/victim/docs", {mode: "no-cors", method: "POST",
      headers: {"Content-Type": "text/plain"}, body: '{"planted":true}'});
    return r.type;
  });
  await step("nocors_batch", async () => {
    const r = await fetch(A + "/c/victim/_batch", {mode: "no-cors", method: "POST",
      headers: {"Content-Type": "text/plain"}, body: '{"ops":[{"op":"delete","id":"alice"}]}'});
    return r.type;
  });
  await step("victim", async () => {
    const c = await fetch(A + "/c/victim");
    const d = await fetch(A + "/c/victim/docs/alice");
    return {count: (await c.json()).count, alice: d.status};
  });
  await step("dotdot_url", async () => new URL(A + "/c/scratch/docs/..").pathname);
  await step("dotdot_delete", async () => (await fetch(A + "/c/scratch/docs/..", {method: "DELETE"})).status);
  await step("scratch", async () => {
    const r = await fetch(A + "/c/scratch");
    return {status: r.status, count: r.status == 200 ? (await r.json()).count : null};
  });
}
run().finally(done);
</script></body></html>
""" % {"token": TOKEN}

OTHER_PAGE = """<!doctype html><html><body><pre id="result">pending</pre><script>
""" + COMMON_JS + r"""
async function run() {
  await step("read_a", async () => "READ " + (await (await fetch(A + "/c/victim/docs/alice")).text()));
  await step("read_b", async () => "READ " + (await (await fetch(B + "/c/users/docs/alice",
    {headers: {"Authorization": "Bearer %(token)s"}})).text()));
  await step("nocors_read", async () => {
    const r = await fetch(A + "/c/victim/docs/alice", {mode: "no-cors"});
    return {type: r.type, body: await r.text()};
  });
}
run().finally(done);
</script></body></html>
""" % {"token": TOKEN}


class Pages:
    """Serves one directory over HTTP on a free port, in a thread."""

    def __init__(self, directory):
        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **k):
                super().__init__(*a, directory=directory, **k)

            def log_message(self, *a):
                pass
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def load(chromium, url, tmp):
    """Loads url in headless Chromium and returns the page's results."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=tmp)
    # --virtual-time-budget: the DOM is dumped once the page's fetches are done.
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--user-data-dir=" + profile, "--virtual-time-budget=20000", "--dump-dom", url],
                       capture_output=True, timeout=120)
    m = re.search(r'<pre id="result">(.*?)</pre>', r.stdout.decode(errors="replace"), re.S)
    check(m is not None, "no result in the page's DOM (exit %d): %r" % (r.returncode, r.stderr[-600:]))
    text = html.unescape(m.group(1))
    check(text.startswith("DONE "), "the page did not finish: %r" % text[:300])
    return json.loads(text[5:])


def main():
    chromium = find_chromium()
    if not chromium:
        print("SKIP e2e_http_browser: Chromium is not installed (scripts/install-deps.sh installs the "
              "Debian package chromium)")
        return
    tmp = tempfile.mkdtemp(prefix="hanudb-browser-")
    servers, pages = [], []
    try:
        for name, html_text in (("allowed", ALLOWED_PAGE), ("other", OTHER_PAGE)):
            d = os.path.join(tmp, name)
            os.mkdir(d)
            with open(os.path.join(d, "page.html"), "w") as f:
                f.write(html_text)
            pages.append(Pages(d))
        origin = "http://127.0.0.1:%d" % pages[0].port
        a = HttpServer(os.path.join(tmp, "a"), ["--cors-origins", origin])
        b = HttpServer(os.path.join(tmp, "b"), ["--cors-origins", origin, "--tokens", TOKEN + " rw *"])
        for s in (a, b):
            servers.append(s)
            s.start()
        ha, hb = Http(a.http_port), Http(b.http_port, token=TOKEN)
        check(ha.json("PUT", "/c/victim/docs/alice", {"name": "Alice"})[0] == 201, "seed victim")
        check(ha.json("PUT", "/c/scratch/docs/keep", {"v": 1})[0] == 201, "seed scratch")
        st, _, seeded = hb.json("PUT", "/c/users/docs/alice", {"name": "Alice", "v": 1})
        check(st == 201, "seed users")
        query = "?a=%d&b=%d" % (a.http_port, b.http_port)

        res = load(chromium, "http://127.0.0.1:%d/page.html%s" % (pages[0].port, query), tmp)
        print("page (allowed origin): %s" % json.dumps(res, sort_keys=True))
        g = res["get"]
        check(isinstance(g, dict) and g["status"] == 200 and g["etag"] == '"%d"' % seeded["txn"] and
              g["txn"] == str(seeded["txn"]), "the page reads the document and its ETag: %r" % g)
        p = res["put"]
        check(isinstance(p, dict) and p["status"] == 200 and p["body"]["txn"] > seeded["txn"],
              "the preflighted PUT with a bearer token and If-Match: %r" % p)
        check(res["stale_put"] == {"status": 412}, "a stale If-Match: %r" % res["stale_put"])
        cr = res["create"]
        check(isinstance(cr, dict) and cr["status"] == 201 and cr["location"] == "/c/users/docs/" + cr["body"]["_id"],
              "the page reads Location: %r" % cr)
        check(res["victim"] == {"count": 1, "alice": 200},
              "no-cors text/plain POST and _batch changed nothing: %r (post %r, batch %r)" %
              (res["victim"], res["nocors_post"], res["nocors_batch"]))
        check(res["dotdot_url"] == "/c/scratch/", "the browser collapses the dot segment: %r" % res["dotdot_url"])
        check(res["dotdot_delete"] != 200 and res["scratch"] == {"status": 200, "count": 1},
              "DELETE .../docs/.. dropped nothing: %r %r" % (res["dotdot_delete"], res["scratch"]))
        print("ok   preflighted PUT with token and If-Match, ETag and Location readable")
        print("ok   no-cors POST and _batch, DELETE docs/..: nothing changed")

        res = load(chromium, "http://127.0.0.1:%d/page.html%s" % (pages[1].port, query), tmp)
        print("page (other origin): %s" % json.dumps(res, sort_keys=True))
        check(res["read_a"] == "blocked" and res["read_b"] == "blocked",
              "another origin cannot read documents: %r" % res)
        check(res["nocors_read"] == {"type": "opaque", "body": ""}, "a no-cors read is opaque: %r" % res)
        print("ok   a page of another origin cannot read a document")

        # the server saw what the page said: nothing planted, nothing deleted (new
        # connections: h2o closed the idle ones while the browser ran)
        ha, hb = Http(a.http_port), Http(b.http_port, token=TOKEN)
        check(ha.json("GET", "/c/victim")[2]["count"] == 1 and ha.call("GET", "/c/scratch/docs/keep")[0] == 200,
              "server state unchanged")
        check(hb.json("GET", "/c/users/docs/alice")[2]["v"] == 2, "the page's PUT is stored")
    finally:
        for s in servers:
            s.kill()
        for p in pages:
            p.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
