/* HanuDB web console: plain JavaScript over the documents API (docs/API.md).
   Every request goes to this page's own origin with the user's bearer token
   (asked once, kept in sessionStorage); the Content-Security-Policy the server
   sends allows nothing else. Data is put into the page as text, never as
   markup. Views: collections, documents (paging, view, edit with If-Match),
   query (_find, _search, _aggs), live (/metrics and /_status), bucket. */
"use strict";

const TOKEN_KEY = "hanudb-token";
const PAGE_SIZE = 20;
const LIVE_POINTS = 60;
const LIVE_EVERY_MS = 2000;
const main = document.getElementById("main");
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let liveTimer = null;

/* ---- small helpers ---- */

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function notice(text, isError) {
  const n = document.getElementById("notice");
  n.textContent = text || "";
  n.className = isError ? "error" : "";
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

function num(n) { return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"); }

function ago(ms) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  const when = new Date(ms).toISOString().replace(".000Z", "Z");
  return when + " (" + (s < 120 ? s + " s" : s < 7200 ? Math.round(s / 60) + " min" : Math.round(s / 3600) + " h") + " ago)";
}

function duration(ms) {
  if (ms === null || ms === undefined) return "-";
  if (ms >= 86400000 && ms % 3600000 === 0) return ms / 3600000 + " h";
  if (ms >= 60000) return Math.round(ms / 60000) + " min";
  return ms / 1000 + " s";
}

function enc(s) { return encodeURIComponent(s); }

function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
}

/* ---- the API ---- */

class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    super(e ? e.code + ": " + e.message : "HTTP " + status);
    this.status = status;
    this.body = body;
  }
}

/* One request; answers {status, headers, body (parsed JSON or null), text}. A 401
   asks for the token; other statuses are the caller's to judge. */
async function call(method, path, body, headers) {
  const h = Object.assign({}, headers || {});
  if (token) h["Authorization"] = "Bearer " + token;
  if (body !== undefined) h["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers: h, body: body === undefined ? undefined : body,
                                cache: "no-store", credentials: "omit" });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (r.status === 401) {
    askToken(token ? "The token was refused: enter another." : "This server needs a bearer token.");
    throw new ApiError(401, json);
  }
  return { status: r.status, headers: r.headers, body: json, text };
}

async function getJson(path) {
  const r = await call("GET", path);
  if (r.status !== 200) throw new ApiError(r.status, r.body);
  return r.body;
}

function askToken(why) {
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-forget").hidden = true;
  notice(why, true);
  document.getElementById("token-input").focus();
}

document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = document.getElementById("token-input").value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  document.getElementById("token-input").value = "";
  ev.target.hidden = true;
  document.getElementById("token-forget").hidden = false;
  notice("");
  route();
});
document.getElementById("token-forget").addEventListener("click", () => {
  token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("token-forget").hidden = true;
  route();
});

/* ---- views ---- */

function show(title, ...content) {
  main.replaceChildren(el("h2", { text: title }), ...content.flat(Infinity).filter((c) => c !== null && c !== undefined));
  document.title = title + " - HanuDB console";
}

async function viewCollections() {
  const list = (await getJson("/c")).collections;
  const rows = list.map((c) => el("tr", {},
    el("td", {}, el("a", { href: "#/c/" + enc(c.name), text: c.name })),
    el("td", { class: "num", text: num(c.count) }),
    el("td", { class: "num", text: bytes(c.bytes) })));
  const total = list.reduce((a, c) => [a[0] + c.count, a[1] + c.bytes], [0, 0]);
  show("Collections",
    list.length ? el("table", { id: "collections" },
      el("caption", { class: "visually-hidden", text: "Collections, their document counts and sizes" }),
      el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Name" }),
        el("th", { scope: "col", class: "num", text: "Documents" }), el("th", { scope: "col", class: "num", text: "Size" }))),
      el("tbody", {}, rows),
      el("tfoot", {}, el("tr", {}, el("th", { scope: "row", text: list.length + " collections" }),
        el("td", { class: "num", text: num(total[0]) }), el("td", { class: "num", text: bytes(total[1]) }))))
      : el("p", { class: "meta", text: "No collections yet (or none this token may see)." }));
}

/* The listing of a collection by id, a page at a time: the cursors of the pages
   seen so far make "Previous" work without an offset. */
async function viewBrowse(col, cursors) {
  const after = cursors[cursors.length - 1];
  const page = await getJson("/c/" + enc(col) + "/docs?limit=" + PAGE_SIZE + (after ? "&after=" + enc(after) : ""));
  const info = await getJson("/c/" + enc(col));
  const rows = page.docs.map((d) => el("tr", {},
    el("td", {}, el("a", { href: "#/c/" + enc(col) + "/doc/" + enc(d._id), text: d._id })),
    el("td", { class: "num", text: d.txn }),
    el("td", { class: "preview", text: JSON.stringify(d.doc) })));
  const first = (cursors.length - 1) * PAGE_SIZE + 1;
  show("Documents of " + col,
    el("p", { class: "meta" }, num(info.count) + " documents, " + bytes(info.bytes) + ". ",
      page.docs.length ? "Showing " + first + "-" + (first + page.docs.length - 1) + " by id." : "No documents here."),
    el("table", { id: "docs" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "_id" }), el("th", { scope: "col", class: "num", text: "txn" }),
        el("th", { scope: "col", text: "Document" }))),
      el("tbody", {}, rows)),
    el("div", { class: "row" },
      el("button", { type: "button", disabled: cursors.length === 1, onclick: () => viewBrowse(col, [null]).catch(failed) }, "First page"),
      el("button", { type: "button", disabled: cursors.length === 1,
        onclick: () => viewBrowse(col, cursors.slice(0, -1)).catch(failed) }, "Previous page"),
      el("button", { type: "button", id: "next-page", disabled: !page.next,
        onclick: () => viewBrowse(col, cursors.concat([page.next])).catch(failed) }, "Next page"),
      el("a", { href: "#/query/" + enc(col) }, "Query this collection")));
}

async function fetchDoc(col, id) {
  const r = await call("GET", "/c/" + enc(col) + "/docs/" + enc(id));
  if (r.status !== 200) throw new ApiError(r.status, r.body);
  return { text: r.text, etag: r.headers.get("ETag"), txn: r.headers.get("Hanu-Txn") };
}

async function viewDoc(col, id, message) {
  const d = await fetchDoc(col, id);
  const path = "/c/" + enc(col) + "/docs/" + enc(id);
  const editor = el("textarea", { id: "doc-editor", class: "doc", spellcheck: "false", "aria-label": "Document JSON" });
  editor.value = pretty(d.text);
  const result = el("div", { id: "save-result", role: "status", "aria-live": "polite" });
  const editArea = el("div", { hidden: true }, el("div", { class: "field" }, editor),
    el("div", { class: "row" },
      el("button", { type: "button", class: "primary", id: "save-doc", onclick: () => save({ "If-Match": d.etag }) },
        "Save (PUT with If-Match: " + d.etag + ")"),
      el("button", { type: "button", onclick: () => viewDoc(col, id).catch(failed) }, "Cancel")),
    result);
  const view = el("pre", { id: "doc-json", tabindex: "0", text: pretty(d.text) });

  async function save(conditions) {
    let body;
    try { body = JSON.stringify(JSON.parse(editor.value)); } catch (e) {
      result.replaceChildren(el("p", { class: "err", text: "Not JSON: " + e.message + ". Nothing was sent." }));
      return;
    }
    const r = await call("PUT", path, body, conditions);
    if (r.status === 200 || r.status === 201) {
      viewDoc(col, id, "Saved at txn " + r.body.txn + ".").catch(failed);
    } else if (r.status === 412) {
      await conflict(body);
    } else {
      result.replaceChildren(el("p", { class: "err", text: "Not saved: " + new ApiError(r.status, r.body).message }));
    }
  }

  /* 412: someone wrote the document since it was loaded (or deleted it). Shows both
     versions; keeping ours is a PUT conditioned on the version now current. */
  async function conflict(mine) {
    let cur = null;
    try { cur = await fetchDoc(col, id); } catch (e) { if (!(e instanceof ApiError && e.status === 404)) throw e; }
    const box = el("section", { class: "conflict", id: "conflict", "aria-labelledby": "conflict-title" },
      el("h3", { id: "conflict-title", text: "Conflict: 412 Precondition Failed" }),
      el("p", {}, cur ? "The document changed since you loaded it (you edited " + d.etag + ", it is now " + cur.etag +
        "). Nothing was written." : "The document was deleted since you loaded it. Nothing was written."),
      el("div", { class: "two" },
        el("div", {}, el("h4", { text: "Your edit" }), el("pre", { id: "conflict-mine", text: pretty(mine) })),
        el("div", {}, el("h4", { text: cur ? "Current (txn " + cur.txn + ")" : "Current: deleted" }),
          el("pre", { id: "conflict-theirs", text: cur ? pretty(cur.text) : "(none)" }))),
      el("div", { class: "row" },
        cur ? el("button", { type: "button", class: "primary", id: "keep-mine", onclick: () => save({ "If-Match": cur.etag }) },
          "Keep mine (overwrite " + cur.etag + ")")
          : el("button", { type: "button", class: "primary", id: "keep-mine", onclick: () => save({ "If-None-Match": "*" }) },
            "Write mine again (create, If-None-Match: *)"),
        el("button", { type: "button", id: "take-theirs", onclick: () => viewDoc(col, id, "Took the current version.").catch(failed) },
          "Discard mine, reload")));
    result.replaceChildren(box);
    box.querySelector("button").focus();
  }

  show("Document " + id,
    el("p", { class: "meta" }, el("a", { href: "#/c/" + enc(col) }, col), " / ", id),
    message ? el("p", { class: "ok", role: "status", text: message }) : null,
    el("dl", { class: "facts" }, el("dt", { text: "ETag" }), el("dd", {}, el("span", { class: "badge", id: "doc-etag", text: d.etag })),
      el("dt", { text: "txn" }), el("dd", { id: "doc-txn", text: d.txn }), el("dt", { text: "Size" }), el("dd", { text: bytes(d.text.length) })),
    view,
    el("div", { class: "row" }, el("button", { type: "button", id: "edit-doc",
      onclick: (ev) => { view.hidden = true; ev.target.hidden = true; editArea.hidden = false; editor.focus(); } }, "Edit")),
    editArea);
}

/* ---- query ---- */

const QUERY_MODES = {
  find: { route: "_find", fields: [["filter", "{}"], ["sort", ""], ["fields", ""], ["limit", "20"]] },
  search: { route: "_search", fields: [["q", ""], ["filter", ""], ["fields", ""], ["limit", "20"]] },
  aggs: { route: "_aggs", fields: [["aggs", '{"by": {"terms": {"field": "", "size": 10}}}'], ["filter", ""]] },
};

function curlLine(path, body) {
  const quote = (s) => "'" + s.replace(/'/g, "'\\''") + "'";
  return "curl -X POST " + quote(location.origin + path) + " -H 'Content-Type: application/json'" +
    (token ? " -H \"Authorization: Bearer $HANUDB_TOKEN\"" : "") + " -d " + quote(body);
}

async function viewQuery(preset) {
  const cols = (await getJson("/c")).collections.map((c) => c.name);
  const colSel = el("select", { id: "q-collection" }, cols.map((n) => el("option", { value: n, text: n })));
  if (preset && cols.includes(preset)) colSel.value = preset;
  const modeSel = el("select", { id: "q-mode" }, Object.keys(QUERY_MODES).map((m) =>
    el("option", { value: m, text: QUERY_MODES[m].route })));
  const inputs = el("div", { id: "q-inputs" });
  const out = el("div", { id: "q-output" });
  let boxes = {};
  function build() {
    boxes = {};
    inputs.replaceChildren(...QUERY_MODES[modeSel.value].fields.map(([name, init]) => {
      const id = "q-" + name;
      const box = name === "q" || name === "limit" ? el("input", { id, type: "text", value: init })
        : el("textarea", { id, spellcheck: "false", rows: name === "aggs" ? 3 : 1 });
      if (box.tagName === "TEXTAREA") box.value = init;
      boxes[name] = box;
      const hint = { filter: "JSON, e.g. {\"age\": {\"$gte\": 30}}", sort: "JSON, e.g. {\"age\": -1} or a list",
        fields: "JSON list of paths, e.g. [\"name\", \"age\"]", q: "words, \"a phrase\", +must, -not",
        aggs: "JSON: named terms, histogram or stats", limit: "1-1000" }[name];
      return el("div", { class: "field" }, el("label", { for: id, text: name }), box,
        el("small", { class: "meta", text: hint }));
    }));
  }
  modeSel.addEventListener("change", build);
  build();

  async function run(ev) {
    ev.preventDefault();
    const mode = modeSel.value, req = {};
    for (const [name, box] of Object.entries(boxes)) {
      const v = box.value.trim();
      if (!v) continue;
      if (name === "q") { req.q = v; continue; }
      try { req[name] = JSON.parse(v); } catch (e) {
        out.replaceChildren(el("p", { class: "err", text: name + ": not JSON (" + e.message + "). Nothing was sent." }));
        return;
      }
    }
    const path = "/c/" + enc(colSel.value) + "/" + QUERY_MODES[mode].route;
    const body = JSON.stringify(req);
    const t0 = performance.now();
    const r = await call("POST", path, body);
    const ms = performance.now() - t0;
    const line = curlLine(path, body);
    const curl = el("div", { class: "curl" }, el("code", { id: "q-curl", tabindex: "0", text: line }),
      el("button", { type: "button", onclick: (e) => copy(line, e.target) }, "Copy"));
    if (r.status !== 200) {
      out.replaceChildren(curl, el("p", { class: "err", id: "q-error", text: r.status + " " + new ApiError(r.status, r.body).message }));
      return;
    }
    const a = r.body;
    const summary = mode === "aggs" ? num(a.count) + " documents aggregated"
      : a.hits.length + " shown of " + num(a.count) + (a.count_relation === "gte" ? "+" : "") + " matching";
    out.replaceChildren(curl,
      el("p", { class: "meta", id: "q-summary" }, summary + ", index at txn " + a.index_txn + ", " + ms.toFixed(0) + " ms."),
      mode === "aggs" ? aggCharts(a.aggs) : hitsTable(a.hits, mode === "search", colSel.value),
      el("details", {}, el("summary", { text: "JSON answer" }), el("pre", { id: "q-json", text: JSON.stringify(a, null, 2) })));
  }

  show("Query",
    el("form", { id: "q-form", onsubmit: (ev) => run(ev).catch(failed) },
      el("div", { class: "row" }, el("label", { for: "q-collection", text: "Collection" }), colSel,
        el("label", { for: "q-mode", text: "Route" }), modeSel),
      inputs,
      el("button", { type: "submit", class: "primary", id: "q-run" }, "Run")),
    out);
}

function copy(text, button) {
  const done = () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = "Copy"; }, 1500); };
  if (navigator.clipboard) navigator.clipboard.writeText(text).then(done, () => notice("Copy failed: select the line.", true));
}

/* Hits as a table: _id, txn, score, then the documents' top-level members (the
   first 8 seen), each cell the member's JSON. */
function hitsTable(hits, scored, col) {
  const cols = [];
  for (const h of hits) for (const k of Object.keys(h.doc || {})) if (k !== "_id" && !cols.includes(k) && cols.length < 8) cols.push(k);
  const cell = (v) => v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v);
  return el("table", { id: "q-table" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "_id" }), el("th", { scope: "col", class: "num", text: "txn" }),
      scored ? el("th", { scope: "col", class: "num", text: "score" }) : null,
      cols.map((c) => el("th", { scope: "col", text: c })))),
    el("tbody", {}, hits.map((h) => el("tr", {},
      el("td", {}, el("a", { href: "#/c/" + enc(col) + "/doc/" + enc(h._id), text: h._id })),
      el("td", { class: "num", text: h.txn }),
      scored ? el("td", { class: "num", text: h.score.toFixed(3) }) : null,
      cols.map((c) => el("td", { class: "preview", text: cell(h.doc[c]) }))))));
}

/* ---- charts (inline SVG) ---- */

/* Each aggregation: buckets as bars (terms: one bar a term, by count; histogram:
   columns by key), stats as a list. */
function aggCharts(aggs) {
  return el("div", { class: "grid", id: "q-aggs" }, Object.entries(aggs).map(([name, a]) => {
    if (a.buckets) return el("figure", {}, el("figcaption", {}, el("strong", { text: name }),
      a.other ? el("span", { text: "other: " + a.other }) : null), barChart(a.buckets, name));
    return el("figure", {}, el("figcaption", {}, el("strong", { text: name })),
      el("dl", { class: "facts" }, Object.entries(a).map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v === null ? "null" : num(v) })])));
  }));
}

function barChart(buckets, name) {
  const w = 320, rowH = 18, labelW = 110, max = Math.max(1, ...buckets.map((b) => b.count));
  const h = Math.max(rowH, buckets.length * rowH);
  const s = svg("svg", { class: "bars", viewBox: "0 0 " + w + " " + h, role: "img",
    "aria-label": name + ": " + buckets.map((b) => b.key + " " + b.count).join(", ") });
  buckets.forEach((b, i) => {
    const y = i * rowH, bw = Math.max(1, (w - labelW - 40) * b.count / max);
    s.append(svg("text", { x: labelW - 4, y: y + 13, "text-anchor": "end" }, String(b.key).slice(0, 16)),
      svg("rect", { x: labelW, y: y + 3, width: bw.toFixed(1), height: rowH - 6 }, svg("title", {}, b.key + ": " + b.count)),
      svg("text", { x: labelW + bw + 4, y: y + 13 }, String(b.count)));
  });
  return s;
}

/* A small time series: the last LIVE_POINTS samples, null where unknown. */
function plot(label, values, format) {
  const w = 240, h = 64, known = values.filter((v) => v !== null && isFinite(v));
  const max = Math.max(1e-9, ...known), last = known.length ? known[known.length - 1] : null;
  const pts = [];
  values.forEach((v, i) => {
    if (v === null || !isFinite(v)) return;
    pts.push((i * w / (LIVE_POINTS - 1)).toFixed(1) + "," + (h - 2 - (h - 4) * v / max).toFixed(1));
  });
  return el("figure", {}, el("figcaption", {}, el("strong", { text: label }),
    el("span", { text: last === null ? "-" : format(last) + " (max " + format(Math.max(...known)) + ")" })),
    svg("svg", { class: "plot", viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none", role: "img",
      "aria-label": label + ": " + (last === null ? "no data" : format(last)) },
      svg("line", { class: "axis", x1: 0, y1: h - 1, x2: w, y2: h - 1 }), svg("polyline", { points: pts.join(" ") }),
      ...(pts.length ? [svg("circle", { cx: pts[pts.length - 1].split(",")[0], cy: pts[pts.length - 1].split(",")[1], r: 2 })] : [])));
}

/* ---- live: /metrics and /_status every 2 s ---- */

function parseMetrics(text) {
  const m = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const r = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!r) continue;
    const labels = {};
    if (r[2]) for (const p of r[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    m.push({ name: r[1], labels, value: Number(r[3]) });
  }
  return m;
}

const READ_ROUTES = ["doc_get", "doc_list", "find", "search", "aggs", "collection", "collections"];
const live = { samples: [] };

function sampleOf(metrics, status) {
  const sum = (name, pred) => metrics.filter((x) => x.name === name && (!pred || pred(x.labels))).reduce((a, x) => a + x.value, 0);
  const le = {};
  for (const x of metrics) if (x.name === "hanudb_http_request_duration_seconds_bucket" &&
    !["status", "metrics", "preflight"].includes(x.labels.route)) le[x.labels.le] = (le[x.labels.le] || 0) + x.value;
  return { t: performance.now(), status, txn: status.txn,
    reads: sum("hanudb_http_requests_total", (l) => READ_ROUTES.includes(l.route)),
    le, bucketReq: sum("hanudb_bucket_requests_total"),
    bucketBytes: status.bucket ? status.bucket.bytes_up : null };
}

/* p99 of the requests between two samples, from the histogram's buckets. */
function p99(prev, cur) {
  const bounds = Object.keys(cur.le).map((k) => [k === "+Inf" ? Infinity : Number(k), cur.le[k] - (prev.le[k] || 0)]).sort((a, b) => a[0] - b[0]);
  const total = bounds.length ? bounds[bounds.length - 1][1] : 0;
  if (!total) return null;
  for (const [b, n] of bounds) if (n >= total * 0.99) return isFinite(b) ? b * 1000 : null;
  return null;
}

async function liveTick() {
  const [mr, status] = await Promise.all([call("GET", "/metrics"), getJson("/_status")]);
  if (mr.status !== 200) throw new ApiError(mr.status, mr.body);
  const s = sampleOf(parseMetrics(mr.text), status);
  live.samples.push(s);
  if (live.samples.length > LIVE_POINTS + 1) live.samples.shift();
  drawLive();
}

function drawLive() {
  const S = live.samples, series = (f) => {
    const out = [];
    for (let i = 1; i < S.length; i++) out.push(f(S[i - 1], S[i], (S[i].t - S[i - 1].t) / 1000));
    while (out.length < LIVE_POINTS) out.unshift(null);
    return out;
  };
  const rate = (key) => series((a, b, dt) => b[key] === null || a[key] === null || b[key] < a[key] ? null : (b[key] - a[key]) / dt);
  const gauge = (f) => series((a, b) => { const v = f(b.status); return v === undefined ? null : v; });
  const st = S.length ? S[S.length - 1].status : {};
  const per = (v) => v.toFixed(v < 10 ? 1 : 0) + "/s";
  const n = (v) => num(Math.round(v));
  const plots = [
    plot("writes/s (txns)", series((a, b, dt) => b.txn < a.txn || b.txn - a.txn > 1e9 ? null : (b.txn - a.txn) / dt), per),
    plot("reads/s (HTTP)", rate("reads"), per),
    plot("p99 latency", series((a, b) => p99(a, b)), (v) => v.toFixed(v < 10 ? 2 : 0) + " ms"),
    plot("memory (RSS)", gauge((x) => x.process && x.process.rss_bytes), bytes),
    plot("index lag (txns)", gauge((x) => x.index && x.index.lag_txns), n),
    plot("index segments", gauge((x) => x.index && x.index.segments), n),
    plot("bucket requests/s", rate("bucketReq"), per),
    plot("bucket bytes/s up", rate("bucketBytes"), (v) => bytes(Math.round(v)) + "/s"),
    plot("follower lag (txns)", gauge((x) => x.follower ? x.follower.lag_txns : undefined), n),
  ];
  const facts = el("dl", { class: "facts", id: "live-role" },
    el("dt", { text: "role" }), el("dd", { text: st.role || "-" }),
    el("dt", { text: "txn" }), el("dd", { text: num(st.txn) }),
    el("dt", { text: "durable txn" }), el("dd", { text: num(st.durable_txn) }),
    el("dt", { text: "uptime" }), el("dd", { text: duration((st.uptime_s || 0) * 1000) }),
    st.lease ? [el("dt", { text: "lease" }), el("dd", { class: "mono", text: JSON.stringify(st.lease) })] : null);
  const box = document.getElementById("live");
  if (box) box.replaceChildren(facts, el("div", { class: "grid" }, plots));
}

async function viewLive() {
  show("Live", el("p", { class: "meta", text: "From /metrics and /_status every " + LIVE_EVERY_MS / 1000 +
    " s; the last " + LIVE_POINTS + " samples." }), el("div", { id: "live" }));
  drawLive();
  await liveTick();
  liveTimer = setInterval(() => liveTick().catch(failed), LIVE_EVERY_MS);
}

/* ---- bucket: what /_status says of it ---- */

const AUDIT_POLL_MS = 500;

function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.filter((p) => p).map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
}

/* The audit's state (bucket.audit of /_status) into box, with its button. */
function renderAudit(box, a) {
  a = a || { state: "never" };
  const running = a.state === "running", p = a.problem;
  const seg = running && a.segments_total ? num(a.segments) + " of " + num(a.segments_total) : num(a.segments);
  box.replaceChildren(
    el("p", {}, "Last audit: ", el("strong", { id: "audit-state", class: a.state === "ok" ? "ok" : a.state === "failed" ? "err" : null,
      text: a.state })),
    a.state === "never" ? null : facts([["started", ago(a.started_ms)], running ? null : ["finished", ago(a.finished_ms)],
      ["segments checked", seg], ["records", running ? "-" : num(a.records)], ["manifests", num(a.manifests)],
      ["snapshot files", running ? "-" : num(a.files)], ["bytes read", bytes(a.bytes)]]),
    p ? el("p", { class: "err" }, "First problem: ", el("code", { text: p.object || "(the bucket)" }), " " + p.reason) : null,
    el("div", { class: "row" },
      el("button", { type: "button", id: "audit-now", disabled: running, onclick: () => auditNow(box).catch(failed) }, "Audit now"),
      el("span", { class: "meta", text: "reads every segment and snapshot manifest of the bucket and checks each hash and link" })));
}

/* Polls /_status while the audit runs and this view shows it. */
async function followAudit(box, a) {
  while (a.state === "running" && box.isConnected) {
    await new Promise((res) => setTimeout(res, AUDIT_POLL_MS));
    if (!box.isConnected) return;
    a = ((await getJson("/_status")).bucket || {}).audit || a;
    renderAudit(box, a);
  }
}

async function auditNow(box) {
  const r = await call("POST", "/_admin/audit");
  const already = r.status === 409 && r.body && r.body.error && r.body.error.code === "audit_running";
  if (r.status !== 202 && !already) throw new ApiError(r.status, r.body);
  const a = r.status === 202 ? r.body : { state: "running" };
  renderAudit(box, a);
  await followAudit(box, a);
}

async function viewBucket() {
  const st = await getJson("/_status");
  const b = st.bucket;
  if (!b) {
    show("Bucket", el("p", { class: "meta", text: "This server runs without a bucket (--no-bucket)." }));
    return;
  }
  const audit = el("div", { id: "audit" });
  renderAudit(audit, b.audit);
  if (b.segment === undefined) {   /* a follower: it seals nothing, it reads the leader's chain */
    show("Bucket", el("p", { class: "meta", text: "This server follows the chain another server seals." }),
      el("h3", { text: "Audit" }), audit);
  } else {
    const sn = b.snapshot || {};
    show("Bucket",
      el("h3", { text: "Chain" }),
      facts([["last segment", num(b.segment)], ["sealed txn", num(b.sealed_txn)], ["segments put", num(b.segments_put)],
        ["segment bytes put", bytes(b.bytes_put)], ["last upload", ago(b.last_upload_ms)], ["failed puts", num(b.failed_puts)],
        ["retries", num(b.retries)], ["sealer", b.sealer_ok ? "ok" : "FAILED"],
        ["requests", "class A " + num(b.class_a) + ", class B " + num(b.class_b)], ["bytes uploaded", bytes(b.bytes_up)]]),
      el("h3", { text: "Snapshots and retention" }),
      facts([["snapshots taken", num(sn.snapshots)], ["last snapshot", sn.last_txn ? "txn " + num(sn.last_txn) + ", " + ago(sn.last_ms) : "none"],
        ["failures", num(sn.failures)], ["policy", "every " + num(sn.every_segments) + " segments, at most one per " + duration(sn.interval_ms)],
        ["retention window", sn.retain_ms === undefined ? "-" : duration(sn.retain_ms)],
        ["restores reach back to", sn.oldest_txn ? "txn " + num(sn.oldest_txn) + ", " + ago(sn.oldest_ms) : "-"]]),
      b.exports ? [el("h3", { text: "Exports" }), facts([["running", num(b.exports.running)], ["documents", num(b.exports.documents)],
        ["bytes", bytes(b.exports.bytes)]])] : null,
      b.twin ? [el("h3", { text: "Twin buckets" }), el("pre", { text: JSON.stringify(b.twin, null, 2) })] : null,
      el("h3", { text: "Audit" }), audit);
  }
  followAudit(audit, b.audit || { state: "never" }).catch(failed);   /* one started elsewhere: its end shows too */
}

/* ---- routing: #/collections, #/c/NAME, #/c/NAME/doc/ID, #/query[/NAME], #/live, #/bucket ---- */

function failed(e) {
  if (e instanceof ApiError && e.status === 401) return;   /* the token form is showing */
  notice(e.message || String(e), true);
}

async function route() {
  if (liveTimer) { clearInterval(liveTimer); liveTimer = null; live.samples = []; }
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const view = parts[0] || "collections";
  for (const a of document.querySelectorAll("nav a"))
    if ((a.dataset.view === view) || (view === "c" && a.dataset.view === "collections")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  document.getElementById("token-forget").hidden = !token;
  notice("");
  try {
    if (view === "c" && parts[1] && parts[2] === "doc" && parts.length > 3) await viewDoc(parts[1], parts.slice(3).join("/"));
    else if (view === "c" && parts[1]) await viewBrowse(parts[1], [null]);
    else if (view === "query") await viewQuery(parts[1]);
    else if (view === "live") await viewLive();
    else if (view === "bucket") await viewBucket();
    else await viewCollections();
    main.focus({ preventScroll: true });
  } catch (e) { failed(e); }
}

window.addEventListener("hashchange", route);
route();
