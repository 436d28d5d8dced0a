/* The page's script, part 3 of 3: loading the data, the rows table (filters, sorting, pages) and
the start.

Every text from the rows reaches the page through textContent, append or setAttribute on elements
the script creates (never innerHTML), so a <script> in an answer is shown as text. The table draws
one page of rows at a time (50 by default), so 10,000 rows stay fast. */
// ---------------------------------------------------------------------------------- loading
async function loadBlob(id) {
  const el = $(id);
  if (!el) return null;
  const text = el.textContent.trim();
  if (el.getAttribute("data-encoding") === "json") return JSON.parse(text);
  if (typeof DecompressionStream !== "function") {
    throw new Error("this browser cannot decompress the embedded data (no DecompressionStream)");
  }
  const bin = atob(text);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

// Context decisions give start as the gap from the previous end in the same document, end as a length.
function decodeContext(dc) {
  const previous = new Map();
  return dc.map((d) => {
    const x = d.slice();
    if (x[4] != null && x[5] != null) {
      x[4] += previous.get(x[3]) || 0;
      x[5] += x[4];
      previous.set(x[3], x[5]);
    }
    return x;
  });
}

// The table needs only the rows; documents and VERA's context decisions are decoded after it is drawn
// (a row view waits for them).
let DETAILS = null;

function loadDetails() {
  const blobs = () => Promise.all([loadBlob("ragsense-docs"), loadBlob("ragsense-ctx")]);
  DETAILS = DETAILS || blobs().then(([docs, ctx]) => {
    DATA.docs = docs;
    DATA.rows.forEach((entry, i) => {
      entry.slice(1).forEach((v, r) => {
        const st = v?.ve && (v.ve.st || []).find((s) => s.k === "context");
        if (!st) return;
        if (ctx) st.dc = decodeContext(ctx[i][r] || []);
        else st.om = st.n || 0;
      });
    });
  });
  return DETAILS;
}

// ---------------------------------------------------------------------------------- table
const STATE = {sort: null, dir: 1, page: 0, size: 50, score: "", min: "", max: "", verdict: "", errors: "",
  change: "", text: ""};
let FILTERED = [];

function sortValue(e, key) {
  if (key === "pos") return e.pos;
  if (key === "id") return e.key;
  if (key === "q") return e.q;
  if (key === "err") return e.errors;
  if (key === "ul") return e.label;
  const m = /^([sv])(\d+)([abd]?)$/.exec(key);
  if (!m) return null;
  const i = +m[2];
  if (m[1] === "v") return e.verdict(i);
  if (m[3] === "a") return e.val(0, i);
  if (m[3] === "b") return e.val(1, i);
  return DIFF ? e.delta(i) : e.val(0, i);
}

function defaultSort() {
  const i = Math.max(0, META.scores.findIndex((s) => s.name === "consens"));
  return META.scores.length ? "s" + i : "pos";
}

function applyFilters() {
  const si = STATE.score === "" ? -1 : +STATE.score;
  const lo = STATE.min === "" ? -Infinity : +STATE.min, hi = STATE.max === "" ? Infinity : +STATE.max;
  const needle = STATE.text.trim().toLowerCase();
  const [vIndex, vValue] = STATE.verdict ? JSON.parse(STATE.verdict) : [null, null];
  FILTERED = ENTRIES.filter((e) => {
    if (si >= 0) {
      const x = DIFF && STATE.scoreOf === "d" ? e.delta(si)
        : e.val(DIFF && STATE.scoreOf === "a" ? 0 : RUNS.length - 1, si);
      if (x == null || x < lo || x > hi) return false;
    }
    if (vIndex != null && e.verdict(vIndex) !== vValue) return false;
    // Refusals are listed apart (renderRefusals), unless the verdict filter asks for them.
    if (e.refusal && vValue !== "refusal") return false;
    if (STATE.errors === "with" && !e.errors) return false;
    if (STATE.errors === "without" && e.errors) return false;
    if (STATE.change && !e.change(STATE.change)) return false;
    if (needle && !e.haystack().includes(needle)) return false;
    return true;
  });
  const key = STATE.sort || defaultSort();
  const dir = STATE.dir;
  FILTERED.sort((a, b) => {
    const x = sortValue(a, key), y = sortValue(b, key);
    if (x == null || y == null) return x == null ? (y == null ? a.pos - b.pos : 1) : -1;
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.pos - b.pos;
  });
}

function header() {
  const cols = [["pos", "#", "num"], ["id", "id", ""], ["q", "question", ""]];
  META.scores.forEach((s, i) => { cols.push(["s" + i, (DIFF ? "Δ " : "") + s.name, "num"]); });
  META.verdicts.forEach((v, i) => { cols.push(["v" + i, v, ""]); });
  if (labelled()) cols.push(["ul", "label", ""]);
  cols.push(["err", "errors", "num"]);
  const key = STATE.sort || defaultSort();
  const tr = h("tr", null, cols.map(([k, label, cls]) => h("th", {class: cls || null, "data-sort": k,
    scope: "col", tabindex: 0, title: "sort by " + label,
    "aria-sort": k === key ? (STATE.dir > 0 ? "ascending" : "descending") : null,
    onclick: () => sortBy(k), onkeydown: (ev) => { if (ev.key === "Enter") sortBy(k); }}, label)));
  $("rows-table").tHead.replaceChildren(tr);
}

function sortBy(key) {
  const current = STATE.sort || defaultSort();
  STATE.dir = current === key ? -STATE.dir : 1;
  STATE.sort = key;
  const choice = $("f-sort");
  choice.value = key + (STATE.dir > 0 ? "+" : "-");
  if (choice.selectedIndex < 0) choice.value = "";  // an order the list does not name
  STATE.page = 0;
  refresh();
}

function scoreCell(e, i) {
  const name = META.scores[i].name;
  if (!DIFF) return h("td", {class: "num", text: viewScore(e.views[0], i, name)});
  const d = e.delta(i);
  return h("td", {class: "num"}, viewScore(e.views[0], i, name) + " → " + viewScore(e.views[1], i, name),
    h("span", {class: "delta " + (d == null || Math.abs(d) < 1e-9 ? "faint" : d > 0 ? "better" : "worse"),
      text: d == null ? "" : fmtSigned(d)}));
}

function verdictCell(e, i) {
  const vs = RUNS.map((_, r) => (e.views[r] ? e.views[r].v[i] : null));
  return h("td", null, vs.map((v, r) => [r ? " → " : "", v == null ? h("span", {class: "faint", text: "—"})
    : h("span", {class: "v " + vclass(v), text: v})]));
}

// The user's own label (label or expected), beside the verdicts, when any row carries one.
let LABELLED = null;
function labelled() {
  if (LABELLED === null) LABELLED = ENTRIES.some((e) => e.label != null);
  return LABELLED;
}

function labelCell(e) {
  return h("td", null, e.label == null ? h("span", {class: "faint", text: "—"})
    : h("span", {class: "v " + vclass(e.label), text: e.label}));
}

function renderTable() {
  const start = STATE.page * STATE.size;
  const page = FILTERED.slice(start, start + STATE.size);
  const body = page.map((e) => h("tr", {tabindex: 0, "data-key": e.key,
    onclick: () => openRow(e), onkeydown: (ev) => { if (ev.key === "Enter") openRow(e); }},
    h("td", {class: "num faint", text: String(e.pos)}),
    h("td", null, h("code", {text: e.key})),
    h("td", {class: "q"}, h("span", {class: "clip", text: e.q})),
    META.scores.map((_, i) => scoreCell(e, i)),
    META.verdicts.map((_, i) => verdictCell(e, i)),
    labelled() ? labelCell(e) : null,
    h("td", {class: "num" + (e.errors ? " err-count" : " faint"), text: String(e.errors)})));
  $("rows-table").tBodies[0].replaceChildren(...body);
  const n = FILTERED.length, pages = Math.max(1, Math.ceil(n / STATE.size));
  const apart = ENTRIES.filter((e) => e.refusal).length;
  $("count").textContent = n ? "Showing " + fmtInt(start + 1) + "–" + fmtInt(start + page.length) +
    " of " + fmtInt(n) + " rows" + (n < ENTRIES.length ? " matching the filters (" + fmtInt(ENTRIES.length) +
    " in all)" : "") + (apart ? "; " + fmtInt(apart) + " refusal(s) listed apart, below" : "")
    : "No row matches the filters.";
  $("pager").replaceChildren(
    h("button", {class: "btn", id: "prev-page", disabled: STATE.page === 0,
      onclick: () => { STATE.page--; renderTable(); }}, "‹ Previous"),
    h("span", {class: "muted", text: "Page " + fmtInt(STATE.page + 1) + " of " + fmtInt(pages)}),
    h("button", {class: "btn", id: "next-page", disabled: STATE.page >= pages - 1,
      onclick: () => { STATE.page++; renderTable(); }}, "Next ›"),
    h("span", {class: "spacer"}),
    h("label", {class: "muted"}, "Rows per page ", select("f-size", [25, 50, 100, 200].map((x) => [x, x]),
      STATE.size, (v) => { STATE.size = +v; STATE.page = 0; renderTable(); })));
}

// Refusals: answers that decline to answer. Their score says nothing about grounding, so they are
// not ranked among the worst rows; they are listed here (docs/metrics.md, "Refusals").
function renderRefusals() {
  const list = ENTRIES.filter((e) => e.refusal);
  const section = $("refusals");
  section.hidden = !list.length;
  if (!list.length) return;
  const rows = list.map((e) => {
    const v = e.views[e.views.length - 1];
    return h("tr", {tabindex: 0, "data-key": e.key, onclick: () => openRow(e),
      onkeydown: (ev) => { if (ev.key === "Enter") openRow(e); }},
    h("td", {class: "num faint", text: String(e.pos)}), h("td", null, h("code", {text: e.key})),
    h("td", {class: "q"}, h("span", {class: "clip", text: e.q})),
    h("td", {class: "q"}, h("span", {class: "clip", text: v?.a || ""})));
  });
  section.replaceChildren(h("h2", {text: "Refusals (" + fmtInt(list.length) + ")"}),
    h("p", {class: "muted", text: "Answers that decline to answer from the context: counted in the " +
      "verdict shares, left out of the score means and of the table above."}),
    h("div", {class: "table-wrap"}, h("table", {id: "refusals-table"},
      h("thead", null, h("tr", null, ["#", "id", "question", "answer"].map((t) => h("th", {text: t})))),
      h("tbody", null, rows))));
}

function refresh() {
  applyFilters();
  header();
  const pages = Math.max(1, Math.ceil(FILTERED.length / STATE.size));
  STATE.page = Math.min(STATE.page, pages - 1);
  renderTable();
}

function select(id, options, value, onchange) {
  const el = h("select", {id, onchange: (ev) => onchange(ev.target.value)},
    options.map(([v, label]) => h("option", {value: String(v), text: String(label)})));
  el.value = String(value);
  return el;
}

function renderFilters() {
  const scoreOptions = [["", "any score"]];
  META.scores.forEach((s, i) => {
    if (DIFF) {
      scoreOptions.push([i + ":d", "Δ " + s.name], [i + ":a", s.name + " (A)"], [i + ":b", s.name + " (B)"]);
    }
    else scoreOptions.push([i + ":", s.name]);
  });
  const verdictOptions = [["", "any"]];
  META.verdicts.forEach((v, i) => {
    const seen = new Set();
    for (const e of ENTRIES) { const x = e.verdict(i); if (x != null) seen.add(x); }
    for (const x of [...seen].sort()) verdictOptions.push([JSON.stringify([i, x]),
      (META.verdicts.length > 1 ? v + ": " : "") + x]);
  });
  const sortOptions = [["", "by a column header"], ["pos+", "input order"], ["id+", "id"]];
  META.scores.forEach((s, i) => {
    if (DIFF) sortOptions.push(["s" + i + "+", "Δ " + s.name + ", worst first"],
      ["s" + i + "a+", s.name + " (A), lowest first"], ["s" + i + "b+", s.name + " (B), lowest first"]);
    else {
      sortOptions.push(["s" + i + "+", s.name + ", lowest first"],
        ["s" + i + "-", s.name + ", highest first"]);
    }
  });
  sortOptions.push(["err-", "most errors first"]);
  const search = h("input", {type: "search", id: "f-text", placeholder: "id, question or answer"});
  let timer = 0;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { STATE.text = search.value; STATE.page = 0; refresh(); }, 120);
  });
  const num = (id, key, placeholder) => {
    const el = h("input", {type: "number", id, step: "any", placeholder});
    el.addEventListener("input", () => { STATE[key] = el.value; STATE.page = 0; refresh(); });
    return el;
  };
  const controls = [
    h("label", null, "Search", search),
    h("label", null, "Score", select("f-score", scoreOptions, "", (v) => {
      const [i, of] = v.split(":");
      STATE.score = i; STATE.scoreOf = of; STATE.page = 0; refresh();
    })),
    h("label", null, "from", num("f-min", "min", "min")),
    h("label", null, "to", num("f-max", "max", "max")),
  ];
  if (META.verdicts.length) controls.push(h("label", null, "Verdict" + (DIFF ? " (B)" : ""),
    select("f-verdict", verdictOptions, "", (v) => { STATE.verdict = v; STATE.page = 0; refresh(); })));
  controls.push(h("label", null, "Errors", select("f-errors",
    [["", "any"], ["with", "with errors"], ["without", "without errors"]], "",
    (v) => { STATE.errors = v; STATE.page = 0; refresh(); })));
  if (DIFF) controls.push(h("label", null, "Change", select("f-change", [["", "any"],
    ["worse", "got worse (first score)"], ["better", "got better (first score)"],
    ["verdict", "verdict changed"], ["a", "only in A"], ["b", "only in B"]], "",
    (v) => { STATE.change = v; STATE.page = 0; refresh(); })));
  controls.push(h("label", null, "Sort", select("f-sort", sortOptions, defaultSort() + "+", (v) => {
    if (!v) return;
    STATE.sort = v.slice(0, -1); STATE.dir = v.endsWith("-") ? -1 : 1; STATE.page = 0; refresh();
  })));
  controls.push(h("button", {class: "btn", id: "f-reset", onclick: resetFilters}, "Reset"));
  $("filters").replaceChildren(...controls);
}

function resetFilters() {
  Object.assign(STATE, {sort: null, dir: 1, page: 0, score: "", scoreOf: "", min: "", max: "", verdict: "",
    errors: "", change: "", text: ""});
  renderFilters();
  refresh();
  renderRefusals();
}

function filterTo(si, lo, hi, r) {
  const of = DIFF ? "ab"[r] : "";
  // Widen to 4 decimals outwards: rounding to nearest could cut a row at the bin's edge out of its
  // own bin, and a one-row bin would then show no row at all.
  Object.assign(STATE, {score: String(si), scoreOf: of, min: String(Math.floor(lo * 1e4) / 1e4),
    max: String(Math.ceil(hi * 1e4) / 1e4), page: 0});
  $("f-score").value = si + ":" + of;
  $("f-min").value = STATE.min;
  $("f-max").value = STATE.max;
  refresh();
  $("rows").scrollIntoView({behavior: "smooth", block: "start"});
}

function renderPolicy() {
  const l = META.limits;
  const docs = l.document_cap ? fmtInt(l.document_cap) + " characters" : "0 characters (left out)";
  const parts = [h("p", null, "Generated by ragsense " + META.version + ". What this page embeds " +
    "follows the size policy (docs/report.md): each distinct document once (" + fmtInt(l.n_documents) +
    "), the longest texts cut first — documents at " + docs + ", answers at " + fmtInt(l.answer_cap) +
    ", questions at " +
    fmtInt(l.question_cap) + ", notes, errors and other fields at " + fmtInt(l.text_max) + ".")];
  if (l.lean) {
    parts.push(h("p", {text: "To fit the page, word log-likelihoods are embedded in hundredths of a nat " +
      "and ConSens's scores under every aggregation are left out."}));
  }
  const cut = [[l.documents_cut, "documents"], [l.answers_cut, "answers"], [l.questions_cut, "questions"],
    [l.texts_cut, "other texts"], [l.words_left_out, "scored words"],
    [l.decisions_left_out, "VERA per-sentence context decisions"]].filter(([n]) => n);
  parts.push(h("p", null, cut.length ? "Cut or left out here: " + cut.map(([n, w]) => fmtInt(n) + " " + w)
    .join(", ") + ". The run store keeps the full rows." : "Nothing was cut: every text is embedded whole."));
  if (l.over) {
    parts.push(h("p", {class: "worse", text: "The page is over its size target of " +
      fmtInt(l.max_bytes) + " bytes even with everything above cut."}));
  }
  $("policy").replaceChildren(...parts);
}

// ---------------------------------------------------------------------------------- entries
function makeEntries(data) {
  return data.rows.map((raw, idx) => {
    const views = raw.slice(1);
    const first = views.find((v) => v);
    const e = {key: raw[0], views, idx, pos: first.p == null ? idx : first.p, q: first.q || "",
      errors: views.reduce((n, v) => n + (v?.e ? v.e.length : 0), 0), label: first.ul ?? null};
    e.val = (r, i) => (views[r] ? views[r].s[i] : null);
    e.delta = (i) => {
      const a = e.val(0, i), b = e.val(1, i);
      return a == null || b == null ? null : b - a;
    };
    e.verdict = (i) => { const v = views[views.length - 1]; return v ? v.v[i] : null; };
    e.refusal = Boolean(views[views.length - 1]?.rf);  // marked by the one refusal rule (Python side)
    let hay = null;
    e.haystack = () => (hay = hay || (e.key + "\n" + e.q + "\n" + views.map((v) => (v ? v.a || "" : ""))
      .join("\n")).toLowerCase());
    e.change = (what) => {
      if (what === "a") return !views[1];
      if (what === "b") return !views[0];
      if (what === "verdict") {
        return META.verdicts.some((_, i) => views[0] && views[1] && views[0].v[i] !== views[1].v[i]);
      }
      const d = META.scores.length ? e.delta(0) : null;
      return d != null && (what === "worse" ? d < -1e-9 : d > 1e-9);
    };
    return e;
  });
}

async function main() {
  $("top-title").textContent = DIFF ? "report · run " + META.runs[0].id + " vs " + META.runs[1].id
    : "report · run " + META.runs[0].id + (META.runs[0].tag ? " (" + META.runs[0].tag + ")" : "");
  banners();
  renderSummary();
  DATA = {rows: await loadBlob("ragsense-rows"), docs: null};
  ENTRIES = makeEntries(DATA);
  renderHistograms();
  renderFilters();
  refresh();
  renderRefusals();
  renderPolicy();
  window.__ragsense = {ready: performance.now(), rows: ENTRIES.length};
  document.documentElement.setAttribute("data-ready", "1");
  await loadDetails();
  window.__ragsense.details = performance.now();
  const hash = decodeURIComponent(location.hash.slice(1));
  if (hash.startsWith("row=")) {
    const e = ENTRIES.find((x) => x.key === hash.slice(4));
    if (e) openRow(e);
  }
}

main().catch((err) => {
  console.error("ragsense report:", err);
  $("summary").append(h("div", {class: "banner bad", text: "The report could not be drawn: " + err.message}));
});
