/* The page's script, part 1 of 3 (ragsense.report._page joins row.js, summary.js and main.js, in
this order, in one strict-mode function; this comment is left out of the page): DOM helpers, number
formats, and the row view (question, answer with each scored word shaded by how much the context
raised its likelihood, documents with leave-one-out attribution bars and VERA's sentence decisions,
VERA's statements, scores, other fields, errors).

Texts are sliced by code point (Array.from), since the rows' offsets count code points as Python
does, not UTF-16 units. */
const $ = (id) => document.getElementById(id);
const META = JSON.parse($("ragsense-meta").textContent);
const RUNS = META.runs;
const DIFF = RUNS.length === 2;
let DATA = null;
let ENTRIES = [];
const SCALE = 3;  // nats of contrast drawn at full intensity

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "style") Object.assign(el.style, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) if (kid != null && kid !== false) el.append(kid);
  return el;
}

function svgEl(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) el.setAttribute(k, String(v));
  for (const kid of kids.flat(Infinity)) if (kid != null) el.append(kid);
  return el;
}

const fmt = (x, d) => (x == null || !Number.isFinite(Number(x)) ? "—" : Number(x).toFixed(d));
const fmtInt = (x) => (x == null ? "—" : Number(x).toLocaleString("en-US"));
const fmtSigned = (x) => (x == null ? "—" : (x > 0 ? "+" : "") + Number(x).toFixed(3));
const fmtP = (p) => (p < 0.001 ? "< 0.001" : p.toFixed(3));
const vclass = (v) => String(v).toLowerCase().replace(/[^a-z0-9_-]/g, "");

function fmtScore(x, name) {
  if (x == null) return "—";
  const s = META.scores.find((c) => c.name === name);
  return (s && s.lo < 0 && x >= 0 ? "+" : "") + Number(x).toFixed(3);
}

// A row's score i: the text Python wrote where three decimals would read as another band (view.sx,
// ragsense.consens.score_text), else the number formatted.
function viewScore(view, i, name) {
  if (!view) return "—";
  return view.sx && view.sx[0] === i ? view.sx[1] : fmtScore(view.s[i], name);
}

function fmtPpl(nll) {
  if (nll == null) return "—";
  const p = Math.exp(nll);
  if (!Number.isFinite(p)) return "∞";
  return p >= 1e5 ? p.toExponential(2) : Number(p.toPrecision(4)).toLocaleString("en-US");
}

function cutFlag(more) {
  return h("span", {class: "cut-flag",
    text: "… " + fmtInt(more) + " more characters; full text in the run store"});
}

function shortText(pair) {
  if (pair == null) return "";
  return pair[1] == null ? pair[0] : [pair[0], cutFlag(pair[1] - Array.from(pair[0]).length)];
}

function shade(c) {
  if (c == null) return null;
  const t = Math.min(1, Math.abs(c) / SCALE);
  return c >= 0 ? "hsl(142 62% " + (97 - 42 * t) + "%)" : "hsl(4 82% " + (97 - 36 * t) + "%)";
}

// Spans [{s, e, ...}] (sorted, code point offsets) over cp, each drawn by make(span, text).
function spanned(cp, spans, limit, make) {
  const out = [];
  const end = Math.min(cp.length, limit);
  let at = 0;
  for (const sp of spans) {
    if (sp.s >= end) break;
    if (sp.s < at) continue;
    if (sp.s > at) out.push(cp.slice(at, sp.s).join(""));
    const stop = Math.min(sp.e, end);
    out.push(make(sp, cp.slice(sp.s, stop).join("")));
    at = stop;
  }
  if (at < end) out.push(cp.slice(at, end).join(""));
  return out;
}

// ---------------------------------------------------------------------------------- tooltip
function showTip(target, nodes) {
  const tip = $("tip");
  tip.replaceChildren(...nodes);
  tip.hidden = false;
  const r = target.getBoundingClientRect();
  const w = tip.offsetWidth, ht = tip.offsetHeight;
  tip.style.left = Math.max(8, Math.min(r.left, innerWidth - w - 8)) + "px";
  tip.style.top = (r.bottom + ht + 8 < innerHeight ? r.bottom + 6 : r.top - ht - 6) + "px";
}
function hideTip() { $("tip").hidden = true; }

// ---------------------------------------------------------------------------------- words
function wordsOf(view) {
  const out = [], w = view.w || [], stated = new Set(view.ws || []);
  let pos = 0;
  for (let i = 0; i + 3 < w.length; i += 4) {
    const s = pos + w[i], e = s + w[i + 1];
    const scale = META.limits.word_scale;
    const nc = w[i + 2] == null ? null : w[i + 2] / scale, ne = w[i + 3] == null ? null : w[i + 3] / scale;
    out.push({s, e, nc, ne, c: nc == null || ne == null ? null : ne - nc, stated: stated.has(i / 4)});
    pos = e;
  }
  return out;
}

function wordTip(text, w) {
  const times = Number(Math.exp(Math.abs(w.c)).toPrecision(3)).toLocaleString("en-US");
  const ratio = w.c == null ? "" : " (×" + times + (w.c >= 0 ? " more likely)" : " less likely)");
  const change = w.c == null ? "contrast unknown" : Math.abs(w.c) < 0.0005 ? "the context did not change it"
    : (w.c > 0 ? "context raised it " : "context lowered it ") + fmtSigned(w.c) + " nats" + ratio;
  const source = w.stated
    ? [h("div", {class: "tip-row", text: "stated in the context: counts as supported"})] : [];
  return [h("b", {text}), h("div", {class: "tip-row", text: change}), ...source,
    h("div", {class: "tip-row", text: "with context:    NLL " + fmt(w.nc, 3) + " · ppl " + fmtPpl(w.nc)}),
    h("div", {class: "tip-row", text: "without context: NLL " + fmt(w.ne, 3) + " · ppl " + fmtPpl(w.ne)})];
}

function wordView(view) {
  const cp = Array.from(view.a || "");
  const nodes = spanned(cp, wordsOf(view), Infinity, (w, text) => {
    const span = h("span", {class: "w", tabindex: 0, "data-c": w.c == null ? "" : w.c.toFixed(3),
      "aria-label": text + (w.c == null ? "" : " " + fmtSigned(w.c) + " nats")}, text);
    // A word the context states is supported whatever its contrast: never drawn red.
    const bg = shade(w.stated ? Math.max(0, w.c == null ? 0 : w.c) : w.c);
    if (bg) span.style.background = bg;
    const show = () => showTip(span, wordTip(text, w));
    span.addEventListener("mouseenter", show);
    span.addEventListener("focus", show);
    span.addEventListener("mouseleave", hideTip);
    span.addEventListener("blur", hideTip);
    return span;
  });
  const box = h("div", {class: "answer text-block"}, nodes, view.an ? cutFlag(view.an - cp.length) : null);
  if (!cp.length) box.append(h("span", {class: "faint", text: "(no answer)"}));
  const notes = [];
  // The weakest words in the one order of the guard, the pytest plug-in and the CLI: words the context
  // does not state first, then by contrast.
  const words = wordsOf(view);
  const weakest = (view.ww || []).filter((k) => k < words.length).map((k) => {
    const w = words[k];
    return cp.slice(w.s, w.e).join("") + " " + (w.c == null ? "?" : fmtSigned(w.c)) + (w.stated ? " (stated)" : "");
  });
  // The binding check's findings: a stated word bound where the context prefers another.
  for (const reason of view.br || []) notes.push("Misbound: " + reason[0] + ".");
  if (weakest.length) notes.push("Weakest words, unstated first: " + weakest.join(", ") + ".");
  if (!view.w) notes.push("No word scores in this run (ConSens was not run on this row).");
  if (view.wn) notes.push(fmtInt(view.wn) + " scored words are not embedded (beyond the embedded text).");
  return h("div", null, box, notes.map((t) => h("p", {class: "muted", text: t})));
}

function wordLegend() {
  const grad = h("div", {class: "gradient"});
  grad.style.background = "linear-gradient(to right, " + [-SCALE, -SCALE / 2, 0, SCALE / 2, SCALE]
    .map(shade).join(", ") + ")";
  return h("div", {class: "word-legend", id: "word-legend"},
    h("span", {text: "context lowered the word's likelihood"}),
    h("div", null, grad, h("div", {class: "gradient-labels"},
      h("span", {text: "−" + SCALE}), h("span", {text: "0"}), h("span", {text: "+" + SCALE + " nats"}))),
    h("span", {text: "context raised it"}),
    h("span", null, h("span", {class: "w", text: "underlined"}), " words were scored (NLL without − " +
      "with the context); plain text (stop words, punctuation) was not. Hover a word for its NLL and " +
      "perplexity."));
}

// ---------------------------------------------------------------------------------- documents
function contextSpans(view) {
  const byDoc = {};
  const step = view?.ve && (view.ve.st || []).find((s) => s.k === "context");
  if (!step) return byDoc;
  for (const d of step.dc || []) {
    if (d[3] == null || d[4] == null || d[5] == null) continue;
    if (!byDoc[d[3]]) byDoc[d[3]] = [];
    byDoc[d[3]].push({s: d[4], e: d[5], keep: d[0], label: step.lb[d[1]], conf: d[2]});
  }
  for (const k of Object.keys(byDoc)) byDoc[k].sort((a, b) => a.s - b.s);
  return byDoc;
}

function attributionView(e) {
  const runs = RUNS.map((_, r) => [r, e.views[r]]).filter(([, v]) => v?.t?.length);
  if (!runs.length) {
    return e.views.some((v) => v?.t) ? h("p", {class: "muted",
      text: "Only one document: there is nothing to attribute."}) : null;
  }
  const n = Math.max(...runs.map(([, v]) => v.t.length));
  let max = 0.05, neg = false;
  for (const [, v] of runs) {
    for (const t of v.t) {
      if (t[1] == null) continue;
      max = Math.max(max, Math.abs(t[1]));
      neg ||= t[1] < 0;
    }
  }
  const grid = h("div", {class: "attr", id: "attribution"});
  for (let i = 0; i < n; i++) {
    for (const [r, v] of runs) {
      const t = v.t.find((x) => x[0] === i);
      const drop = t ? t[1] : null;
      const track = h("div", {class: "attr-track"});
      if (neg) track.append(h("div", {class: "attr-axis", style: {left: "50%"}}));
      if (drop != null) {
        const width = (Math.abs(drop) / max) * (neg ? 50 : 100);
        const left = neg ? (drop >= 0 ? 50 : 50 - width) : 0;
        track.append(h("div", {class: "attr-bar" + (r ? " b" : "") + (drop < 0 ? " neg" : ""),
          style: {left: left + "%", width: Math.max(0.5, width) + "%"},
          title: "without document [" + i + "]: ConSens (geometric) " + fmt(t[2], 3) + "; drop " +
            fmtSigned(drop) + (t[3] ? "; context cut to fit the model" : "")}));
      }
      grid.append(h("div", {class: "attr-label"}, "Document [" + i + "]" + (DIFF ? " · " + "AB"[r] : ""),
        v.tp === i ? h("span", {class: "star", title: "top document", text: " ★"}) : null),
        track, h("div", {class: "num", text: fmtSigned(drop)}));
    }
  }
  return h("div", null, h("p", {class: "muted", text: "Leave-one-out attribution: how much the ConSens " +
    "score (geometric mean) drops when the document is left out of the context; ★ marks the top document " +
    "(none when no removal lowers the score). Documents are numbered from 0, as in the CLI and top_document."}),
    grid);
}

const DOC_PREVIEW = 1500;

function docCard(i, docId, spans, tops) {
  const [text, full] = DATA.docs[docId];
  const cp = Array.from(text);
  const body = h("div", {class: "doc-body text-block"});
  const draw = (limit) => {
    const nodes = spanned(cp, spans || [], limit, (sp, t) => h("span", {class: sp.keep ? "kept" : null,
      title: "VERA: " + (sp.label || "?") + (sp.conf == null ? "" : " (" + fmt(sp.conf, 2) + ")")}, t));
    const more = limit < cp.length ? h("button", {class: "btn", onclick: () => draw(Infinity)},
      "Show all " + fmtInt(cp.length) + " characters") : null;
    const tail = [limit < cp.length ? "… " : "", more, full ? cutFlag(full - cp.length) : null];
    body.replaceChildren(...nodes, ...tail.filter((x) => x));
  };
  draw(DOC_PREVIEW);
  return h("div", {class: "doc"}, h("div", {class: "doc-head"}, h("b", {text: "Document [" + i + "]"}),
    h("span", {class: "muted", text: fmtInt(full || cp.length) + " characters"}),
    tops.map((r) => h("span", {class: "pill tag",
      text: "★ top document" + (DIFF ? " (" + "AB"[r] + ")" : "")})),
    spans?.length ? h("span", {class: "muted", text: "highlighted: sentences VERA kept"}) : null),
    body);
}

function documentsView(e) {
  const out = [];
  const seen = new Set();
  e.views.forEach((v, r) => {
    if (!v?.d) return;
    const key = v.d.join(",");
    if (seen.has(key)) return;
    seen.add(key);
    if (seen.size > 1) {
      out.push(h("div", {class: "run-label", text: "Documents of run " + "AB"[r] + " (they differ)"}));
    }
    const spans = contextSpans(e.views[RUNS.length - 1] || v);
    v.d.forEach((docId, i) => {
      out.push(docCard(i, docId, spans[i],
        e.views.map((w, k) => (w && w.tp === i ? k : null)).filter((k) => k != null)));
    });
  });
  return out.length ? out : [h("p", {class: "muted", text: "No documents."})];
}

// ---------------------------------------------------------------------------------- VERA
const STEP_TITLES = {
  context: "Context relevance", relevance: "Response relevance", adherence: "Response adherence",
};

const CODE_POINTS = new Map();

function docPoints(id) {
  if (!CODE_POINTS.has(id)) CODE_POINTS.set(id, Array.from(DATA.docs[id][0]));
  return CODE_POINTS.get(id);
}

function decisionText(d, step, view) {
  if (d[6]) return shortText(d[6]);
  if (d[4] == null || d[5] == null) return "";
  const id = step.k === "context" && view.d ? view.d[d[3]] : null;
  const cp = step.k === "context" ? (id == null ? [] : docPoints(id)) : Array.from(view.a || "");
  const text = cp.slice(d[4], d[5]).join("");
  if (d[5] <= cp.length) return text;
  return [text, h("span", {class: "faint",
    text: " (… beyond the embedded text; full text in the run store)"})];
}

function veraView(view) {
  const v = view.ve;
  if (!v) return null;
  const needed = !v.rt ? "not checked" : (v.rt[0] == null ? "—" : v.rt[0] ? "yes" : "no") +
    (v.rt[1] == null ? "" : " (confidence " + fmt(v.rt[1], 2) + ")");
  const parts = [kv([["judge", v.j || "—"], ["splitter", v.sp || "—"], ["retrieval needed", needed]])];
  for (const st of v.st || []) {
    const dc = st.dc || [];
    const kept = dc.filter((d) => d[0] === 1).length;
    const unit = st.k === "context" ? "sentences" : "statements";
    parts.push(h("h4", null, STEP_TITLES[st.k] || st.k, " ", h("span", {class: "muted",
      text: fmt(st.sc, 3) + " · " + kept + " of " + dc.length + " " + unit + " kept"})));
    if (st.om) {
      parts.push(h("p", {class: "muted", text: fmtInt(st.om) + " sentence decisions are not embedded " +
        "at this report's size; they are in the run store."}));
    }
    const adherence = st.k === "adherence";
    const head = ["#", st.k === "context" ? "sentence" : "statement", "label", "confidence"]
      .concat(adherence ? ["ConSens", "P(grounded)"] : [], ["kept"]);
    const rows = dc.map((d, i) => {
      const x = d[7] || {};
      return h("tr", null, h("td", {class: "num faint", text: String(i + 1)}),
        h("td", null, decisionText(d, st, view),
          st.k === "context" && d[3] != null ? h("span", {class: "faint",
            text: " (document [" + d[3] + "])"}) : null,
          x.co ? h("div", {class: "muted"}, "correction: ", shortText(x.co)) : null,
          x.r ? h("div", {class: "muted"}, "reason: ", shortText(x.r)) : null,
          x.f ? h("div", {class: "faint", text: "(part of a sentence split for length)"}) : null),
        h("td", null, d[1] == null ? "—" : h("span", {class: "v " + vclass(st.lb[d[1]]), text: st.lb[d[1]]})),
        h("td", {class: "num", text: fmt(d[2], 2)}),
        adherence ? [h("td", {class: "num", text: fmtSigned(x.cs)}),
          h("td", {class: "num", text: fmt(x.gp, 2)})] : null,
        h("td", {class: d[0] ? "better" : "worse", text: d[0] == null ? "—" : d[0] ? "✓" : "✗"}));
    });
    const table = h("div", {class: "scroll-x"}, h("table", {class: "decisions"},
      h("thead", null, h("tr", null, head.map((t) => h("th", {text: t})))), h("tbody", null, rows)));
    parts.push(dc.length > 8 ? h("details", null,
      h("summary", {text: "Show the " + dc.length + " decisions"}), table) : table);
    if (st.nt) parts.push(h("ul", null, st.nt.map((n) => h("li", {class: "muted"}, shortText(n)))));
  }
  if (v.oa) parts.push(h("p", null, "original answer: ", shortText(v.oa)));
  return h("div", null, parts);
}

// ---------------------------------------------------------------------------------- other parts
function kv(pairs) {
  return h("dl", {class: "kv"}, pairs.filter(([, v]) => v != null && v !== "").map(([k, v]) =>
    [h("dt", {text: k}), h("dd", null, v)]));
}

function consensView(view) {
  const c = view.c;
  if (!c) return null;
  const by = c.ba ? h("details", null, h("summary", {text: "ConSens under every aggregation"}),
    kv(Object.entries(c.ba).map(([k, x]) => [k, fmtSigned(x)]))) : null;
  // consens_raw is ln(P_empty / P_context) only under the perplexity means; its label says what it is.
  const raw = "raw score: " + (META.raw_meanings?.[c.g] || "the aggregation's value");
  const ratio = c.pc > 0 && c.pe > 0 ? Math.log(c.pe / c.pc) : null;
  return h("div", null, kv([[raw, c.r == null ? null : fmt(c.r, 3)],
    ["ln(P_empty / P_context)", ratio == null ? null : fmt(ratio, 3)],
    ["perplexity with context", c.pc == null ? null : fmt(c.pc, 2)],
    ["perplexity without context", c.pe == null ? null : fmt(c.pe, 2)],
    ["aggregation", c.g], ["fallback", c.fb], ["model", c.m],
    ["context cut to fit", c.tr ? "yes" + (c.td ? " (" + fmtInt(c.td) + " tokens dropped)" : "") : null],
    ["notes", c.n ? h("div", null, c.n.map((n) => h("div", null, shortText(n)))) : null]]), by);
}

function otherView(view) {
  if (!view.x?.length) return null;
  return kv(view.x.map(([k, v]) => [k, Array.isArray(v) ? shortText(v) : typeof v === "number" ? fmt(v, 4)
    : String(v)]));
}

function errorsView(view) {
  if (!view.e?.length) return null;
  return h("ul", {class: "errors"}, view.e.map(([m, f, msg]) => h("li", null,
    h("b", {text: (m || "row") + (f ? " · " + f : "") + ": "}), shortText(msg))));
}

function scoresView(e) {
  const head = DIFF ? ["", "A", "B", "B − A"] : ["", "value"];
  const rows = META.scores.map((s, i) => h("tr", null, h("td", null, h("code", {text: s.name})),
    e.views.map((v) => h("td", {class: "num", text: viewScore(v, i, s.name)})),
    DIFF ? h("td", {class: "num", text: fmtSigned(e.delta(i))}) : null));
  META.verdicts.forEach((name, i) => {
    rows.push(h("tr", null, h("td", null, h("code", {text: name})),
      e.views.map((v) => h("td", null, v && v.v[i] != null ?
        h("span", {class: "v " + vclass(v.v[i]), text: v.v[i]}) : "—")), DIFF ? h("td") : null));
  });
  return h("table", {class: "score-grid"},
    h("thead", null, h("tr", null, head.map((t, k) => h("th", {class: k ? "num" : null, text: t})))),
    h("tbody", null, rows));
}

// One section per run (side by side in a comparison), drawn by make(view); null when empty.
function perRun(e, make) {
  const parts = e.views.map((v, r) => [r, v ? make(v) : null]).filter(([, x]) => x);
  if (!parts.length) return null;
  if (!DIFF) return parts[0][1];
  return h("div", {class: "side"}, parts.map(([r, x]) => h("div", null,
    h("div", {class: "run-label",
      text: "AB"[r] + " · run " + RUNS[r].id + (RUNS[r].tag ? " (" + RUNS[r].tag + ")" : "")}),
    x)));
}

function section(title, content) {
  return content ? [h("h3", {text: title}), content] : null;
}

function detailBody(e) {
  const first = e.views.find((v) => v);
  return [
    section("Scores", scoresView(e)),
    section("Question", h("div", {class: "question text-block"}, first.q || "", first.qn ?
      cutFlag(first.qn - Array.from(first.q || "").length) : null)),
    section("Answer",
      h("div", {id: "word-view"}, wordLegend(), DIFF ? perRun(e, wordView) : wordView(first))),
    section("Attribution", attributionView(e)),
    section("Documents", h("div", null, documentsView(e))),
    section("VERA", perRun(e, veraView)),
    section("ConSens details", perRun(e, consensView)),
    section("Other fields", perRun(e, otherView)),
    section("Errors", perRun(e, errorsView)),
  ];
}

let CURRENT = null;

function step(delta) {
  const i = FILTERED.indexOf(CURRENT);
  if (i >= 0 && FILTERED[i + delta]) openRow(FILTERED[i + delta]);
}

async function openRow(e) {
  CURRENT = e;
  await loadDetails();
  if (CURRENT !== e) return;  // another row was asked for meanwhile
  const i = FILTERED.indexOf(e);
  const pill = e.views.map((v, r) => [r ? " → " : "", v && META.verdicts.length && v.v[0] != null ?
    h("span", {class: "v " + vclass(v.v[0]), text: v.v[0]}) : h("span", {class: "faint", text: "—"})]);
  const head = h("div", {class: "detail-head"},
    h("div", {class: "title"}, h("h1", null, "Row ", h("code", {text: e.key}), " ", pill),
      h("div", {class: "muted", text: "input position " + e.pos + (i >= 0 ? " · " + fmtInt(i + 1) + " of " +
        fmtInt(FILTERED.length) + " in the table" : "")})),
    h("button", {class: "btn", id: "row-prev", disabled: i <= 0, onclick: () => step(-1)}, "‹ Previous"),
    h("button", {class: "btn", id: "row-next", disabled: i < 0 || i >= FILTERED.length - 1,
      onclick: () => step(1)}, "Next ›"),
    h("button", {class: "btn", id: "row-close", onclick: closeRow, "aria-label": "close"}, "Close ✕"));
  const d = $("detail");
  d.replaceChildren(head, h("div", {class: "detail-body"}, detailBody(e)));
  d.hidden = false;
  $("backdrop").hidden = false;
  try { history.replaceState(null, "", "#row=" + encodeURIComponent(e.key)); } catch (err) { void err; }
  $("row-close").focus();
}

function closeRow() {
  $("detail").hidden = true;
  $("backdrop").hidden = true;
  hideTip();
  try { history.replaceState(null, "", location.pathname + location.search); } catch (err) { void err; }
  CURRENT = null;
}

$("backdrop").addEventListener("click", closeRow);
document.addEventListener("keydown", (ev) => {
  if (!CURRENT) return;
  if (ev.key === "Escape") closeRow();
  else if (ev.key === "ArrowRight" && ev.altKey) step(1);
  else if (ev.key === "ArrowLeft" && ev.altKey) step(-1);
});
