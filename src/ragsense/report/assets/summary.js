/* The page's script, part 2 of 3 (after row.js, whose helpers it uses): the summary (each run's
identity, settings, means with intervals, verdict counts; a comparison's paired differences) and a
histogram of each score, ConSens's with its verdict bands. Inline SVG drawn with createElementNS;
clicking a bar filters the table to it. */
// ---------------------------------------------------------------------------------- summary
function statusPill(run) {
  return h("span", {class: "pill " + run.status, text: run.status});
}

function runFacts(run) {
  const when = (t) => (t ? t.replace("T", " ").replace("Z", " UTC") : "—");
  const tiles = [
    ["rows", fmtInt(run.n_rows) + (run.n_resumed ? " (" + fmtInt(run.n_resumed) + " resumed)" : "")],
    ["rows with errors", fmtInt(run.rows_with_errors), run.rows_with_errors ? "err-count" : null],
    ["duration", run.seconds == null ? "—" : fmt(run.seconds, 1) + " s"],
    ["created", when(run.created)],
    ["finished", when(run.finished)],
    ["ragsense", run.version],
  ];
  const facts = [
    ["dataset", run.dataset || "—"],
    ["input hash", run.input_hash ? h("code", {text: run.input_hash}) : "— (run not finished)"],
    ["command", run.command ? h("code", {text: run.command}) : "—"],
  ];
  return [h("div", {class: "tiles"}, tiles.map(([k, v, cls]) => h("div", {class: "tile"},
    h("div", {class: "tile-k", text: k}), h("div", {class: "tile-v " + (cls || ""), text: v})))),
  h("dl", {class: "facts"}, facts.map(([k, v]) => [h("dt", {text: k}), h("dd", null, v)]))];
}

function verdictChips(counts) {
  const keys = Object.keys(counts || {});
  if (!keys.length) return h("span", {class: "faint", text: "—"});
  return h("div", {class: "verdicts"},
    keys.map((k) => h("span", {class: "v " + vclass(k), text: k + " " + fmtInt(counts[k])})));
}

function metricsTable(run) {
  const body = [];
  for (const m of run.metrics) {
    const s = run.summary[m.name] || {n: 0, errors: 0, scores: {}, verdicts: {}};
    const scores = m.scores.length ? m.scores : [null];
    scores.forEach((score, i) => {
      const sc = score && s.scores[score];
      body.push(h("tr", null,
        h("td", {text: i ? "" : m.name}),
        h("td", null, score ? h("code", {text: score}) : h("span", {class: "faint", text: "—"})),
        h("td", {class: "num", text: i ? "" : fmtInt(s.n)}),
        h("td", {class: "num", text: sc ? fmtScore(sc.mean, score) : "—",
          title: s.refusals ? fmtInt(s.refusals) + " refusal(s) left out of the mean" : null}),
        h("td", {class: "num ci", text: sc ? "[" + fmtScore(sc.ci95[0], score) + ", " +
          fmtScore(sc.ci95[1], score) + "]" : "—"}),
        h("td", null, i ? "" : [verdictChips(s.verdicts), s.refusals ? h("div", {class: "muted",
          text: "refusals left out of the means"}) : null]),
        h("td", {class: "num" + (s.errors ? " err-count" : ""), text: i ? "" : fmtInt(s.errors)})));
    });
  }
  return h("table", {class: "metrics-table"},
    h("thead", null, h("tr", null, ["metric", "score", "n", "mean", "95% interval", "verdicts", "errors"]
      .map((t, i) => h("th", {class: i >= 2 && i !== 5 ? "num" : null, text: t})))),
    h("tbody", null, body));
}

function settingsBlock(run) {
  const items = [];
  for (const m of run.metrics) {
    for (const [k, v] of Object.entries(m.settings || {})) {
      items.push(h("dt", {text: m.name + " · " + k}),
        h("dd", {text: typeof v === "string" ? v : JSON.stringify(v)}));
    }
    for (const [k, v] of Object.entries(m.models || {})) {
      items.push(h("dt", {text: m.name + " · model " + k}), h("dd", {text: String(v)}));
    }
  }
  const models = run.metrics.flatMap((m) => Object.values(m.models || {}).map(String));
  return h("details", {class: "settings"},
    h("summary", {text: "Settings and models (" + [...new Set(models)].join(", ") + ")"}),
    h("dl", {class: "settings-grid"}, items));
}

function runCard(run, letter) {
  return h("div", null,
    h("div", {class: "run-title"},
      letter ? h("span", {class: "run-letter " + letter.toLowerCase(), text: letter}) : null,
      h("h1", null, "Run ", h("code", {text: run.id})),
      run.tag ? h("span", {class: "pill tag", text: run.tag}) : null, statusPill(run)),
    runFacts(run),
    h("h3", {text: run.summary_source === "rows" ? "Summary (computed from the stored rows)" : "Summary"}),
    h("div", {class: "scroll-x"}, metricsTable(run)), settingsBlock(run));
}

function banners() {
  const out = [];
  META.runs.forEach((run, i) => {
    const who = DIFF ? "Run " + "AB"[i] + " (" + run.id + ")" : "This run";
    if (run.status !== "complete") {
      const what = run.status === "running" ? "was still running when this report was made"
        : "is incomplete";
      out.push(h("div", {class: "banner bad"}, h("strong", {text: who + " " + what + ". "}),
        (run.note ? "Reason: " + run.note + ". " : "") + "The report shows the " +
        fmtInt(run.n_rows_embedded) + " rows that finished; its summary is computed from them."));
    }
  });
  if (DIFF && META.runs[0].input_hash && META.runs[1].input_hash &&
      META.runs[0].input_hash !== META.runs[1].input_hash) {
    out.push(h("div", {class: "banner warn"}, h("strong", {text: "Different inputs. "}),
      "The two runs read different input rows (their input hashes differ); they are compared on the " +
      fmtInt(META.comparison.n_shared) + " rows they share by id."));
  }
  if (DIFF && META.bands_note) {
    out.push(h("div", {class: "banner warn"}, h("strong", {text: "Different verdict bands. "}),
      "Note: " + META.bands_note + "."));
  }
  if (META.limits.level > 0 && META.limits.over) {
    out.push(h("div", {class: "banner warn"}, "This report is larger than its size target even with " +
      "every text cut; see the note at the bottom of the page."));
  }
  $("banners").replaceChildren(...out);
}

function comparisonTable() {
  const c = META.comparison;
  const head = ["score", "n", "mean A", "mean B", "B − A", "95% interval", "p (Wilcoxon)",
    "better", "worse", "same"];
  const body = c.scores.map((s) => {
    const cls = s.difference == null || (s.ci95 && s.ci95[0] <= 0 && s.ci95[1] >= 0) ? ""
      : s.difference > 0 ? "better" : "worse";
    return h("tr", null, h("td", null, h("code", {text: s.score})),
      h("td", {class: "num", text: fmtInt(s.n)}),
      h("td", {class: "num", text: fmtScore(s.mean_a, s.score)}),
      h("td", {class: "num", text: fmtScore(s.mean_b, s.score)}),
      h("td", {class: "num " + cls, text: fmtSigned(s.difference)}),
      h("td", {class: "num ci", text: s.ci95 ? "[" + fmtSigned(s.ci95[0]) + ", " + fmtSigned(s.ci95[1]) + "]"
        : "—"}),
      h("td", {class: "num", text: s.p == null ? "—" : fmtP(s.p)}),
      h("td", {class: "num better", text: fmtInt(s.better)}),
      h("td", {class: "num worse", text: fmtInt(s.worse)}),
      h("td", {class: "num", text: fmtInt(s.same)}));
  });
  const verdicts = c.verdicts.map((v) => h("p", null, h("code", {text: v.field}), ": A ",
    verdictChips(v.a), " → B ", verdictChips(v.b), " · " + fmtInt(v.n_changed) + " rows changed"));
  const worst = Object.entries(c.worst).filter(([, list]) => list.length).map(([score, list]) =>
    h("div", {class: "worst"}, h("span", {class: "muted", text: "Worse most in " + score + ":"}),
      list.slice(0, 8).map(([key, a, b]) => h("button", {type: "button", title: "open this row",
        onclick: () => { const e = ENTRIES.find((x) => x.key === key); if (e) openRow(e); }},
      key + " (" + fmtScore(a, score) + " → " + fmtScore(b, score) + ")"))));
  return h("div", null,
    h("div", {class: "run-title"}, h("h1", {text: "Comparison"}),
      h("span", {class: "run-letter", text: "A"}), h("code", {text: RUNS[0].id}),
      RUNS[0].tag ? h("span", {class: "pill tag", text: RUNS[0].tag}) : null, h("span", {text: "→"}),
      h("span", {class: "run-letter b", text: "B"}), h("code", {text: RUNS[1].id}),
      RUNS[1].tag ? h("span", {class: "pill tag", text: RUNS[1].tag}) : null),
    h("h2", {text: "B − A on the " + fmtInt(c.n_shared) + " rows both runs have (A: " + fmtInt(c.n_a) +
      " rows, B: " + fmtInt(c.n_b) + ")"}),
    h("div", {class: "table-wrap"}, h("table", {class: "metrics-table"},
      h("thead", null, h("tr", null, head.map((t, i) => h("th", {class: i ? "num" : null, text: t})))),
      h("tbody", null, body))),
    verdicts, worst,
    h("p", {class: "muted", text: "Paired by row id: mean difference B − A, 95% paired bootstrap " +
      "interval (2,000 draws), Wilcoxon signed-rank p; a row is better or worse when its score moved."}));
}

function renderSummary() {
  const sec = $("summary");
  if (!DIFF) {
    sec.replaceChildren(runCard(META.runs[0], null));
    return;
  }
  sec.replaceChildren(comparisonTable());
  sec.after(h("section", {class: "card"}, runCard(META.runs[0], "A")),
    h("section", {class: "card"}, runCard(META.runs[1], "B")));
}

// ---------------------------------------------------------------------------------- histograms
const BINS = 24;
const HW = 320, HH = 150, PAD_L = 30, PAD_R = 14, PAD_B = 22, PAD_T = 8;

function histogram(score, si) {
  const lo = score.lo, hi = score.hi > score.lo ? score.hi : score.lo + 1;
  const width = (hi - lo) / BINS;
  const series = RUNS.map((_, r) => {
    const counts = new Array(BINS).fill(0);
    let n = 0, sum = 0;
    for (const e of ENTRIES) {
      const x = e.views[r] ? e.views[r].s[si] : null;
      if (x == null) continue;
      n++; sum += x;
      counts[Math.max(0, Math.min(BINS - 1, Math.floor((x - lo) / width)))]++;
    }
    // The mean line and its n are the run summary's (refusals and errors left out, the one rule of the
    // summary table), not this drawing's: the bars count every scored row, refusals included.
    const stat = META.runs[r].summary?.[score.metric]?.scores?.[score.name];
    return stat ? {counts, n: stat.n, mean: stat.mean} : {counts, n, mean: n ? sum / n : null};
  });
  const top = Math.max(1, ...series.flatMap((s) => s.counts));
  const X = (x) => PAD_L + ((x - lo) / (hi - lo)) * (HW - PAD_L - PAD_R);
  const Y = (c) => HH - PAD_B - (c / top) * (HH - PAD_B - PAD_T);
  const svg = svgEl("svg", {viewBox: "0 0 " + HW + " " + HH, role: "img",
    "aria-label": "histogram of " + score.name});
  const bands = score.name === "consens" ? META.runs[RUNS.length - 1].bands : null;
  const legend = [];
  if (bands) {
    const cut = [[lo, bands.ungrounded_below, "#fbe4e2", "ungrounded"],
      [bands.ungrounded_below, bands.grounded_at, "#fcefd6", "unsure"],
      [bands.grounded_at, hi, "#e1f3e6", "grounded"]];
    for (const [a, b, color, name] of cut) {
      const x0 = X(Math.max(lo, a)), x1 = X(Math.min(hi, b));
      if (x1 > x0) svg.append(svgEl("rect", {x: x0, y: PAD_T, width: x1 - x0, height: HH - PAD_B - PAD_T,
        fill: color}));
      legend.push(h("span", null, h("span", {class: "swatch", style: {background: color,
        border: "1px solid #d5d9df"}}), name));
    }
    for (const t of [bands.ungrounded_below, bands.grounded_at]) {
      if (t > lo && t < hi) svg.append(svgEl("line", {x1: X(t), x2: X(t), y1: PAD_T, y2: HH - PAD_B,
        stroke: "#8a909c", "stroke-dasharray": "3 3"}));
    }
    const origin = bands.origin && bands.origin !== "default" ? " (" + bands.origin + ")" : " (default)";
    // The edges as Python wrote them (every digit they have): the same text as the terminal's.
    legend.push(h("span", {text: "bands of " + bands.aggregation + origin + (DIFF ? " (run B)" : "") +
      ": " + bands.text}));
  }
  series.forEach((s, r) => {
    const last = r === RUNS.length - 1;
    s.counts.forEach((c, b) => {
      if (!c) return;
      const a = lo + b * width;
      const rect = svgEl("rect", {class: "bar", x: X(a) + 0.5, width: Math.max(1, X(a + width) - X(a) - 1),
        y: Y(c), height: HH - PAD_B - Y(c), fill: last ? (DIFF ? "#7a3fc4" : "#2456c7") : "none",
        "fill-opacity": last && DIFF ? 0.55 : 0.85, stroke: last ? "none" : "#2456c7", "stroke-width": 1.2});
      rect.append(svgEl("title", null, (DIFF ? "AB"[r] + ": " : "") + "[" + fmt(a, 3) + ", " +
        fmt(a + width, 3) + "): " + fmtInt(c) + " rows — click to filter"));
      rect.addEventListener("click", () => filterTo(si, a, a + width, r));
      svg.append(rect);
    });
    if (s.mean != null) {
      svg.append(svgEl("line", {x1: X(s.mean), x2: X(s.mean), y1: PAD_T, y2: HH - PAD_B,
        stroke: last ? "#11151c" : "#2456c7", "stroke-width": 1.2, "stroke-dasharray": "5 3"},
      svgEl("title", null, (DIFF ? "AB"[r] + " " : "") + "mean " + fmt(s.mean, 3))));
    }
  });
  svg.append(svgEl("line", {x1: PAD_L, x2: HW - PAD_R, y1: HH - PAD_B, y2: HH - PAD_B, stroke: "#9aa1ad"}));
  for (const x of [lo, (lo + hi) / 2, hi]) {
    svg.append(svgEl("text", {x: X(x), y: HH - 6, "text-anchor": "middle", "font-size": 10,
      fill: "#5b6270"}, fmt(x, 2)));
  }
  svg.append(svgEl("text", {x: PAD_L - 4, y: PAD_T + 8, "text-anchor": "end", "font-size": 10,
    fill: "#5b6270"}, fmtInt(top)));
  if (DIFF) {
    legend.unshift(h("span", null, h("span", {class: "swatch", style: {border: "1.5px solid #2456c7"}}), "A"),
      h("span", null, h("span", {class: "swatch", style: {background: "#7a3fc4"}}), "B"));
  }
  legend.push(h("span", {text: "╌ mean"}));
  const means = series.map((s, r) => (DIFF ? "AB"[r] + " " : "") + "mean " + fmtScore(s.mean, score.name) +
    " · n " + fmtInt(s.n)).join(" · ") + (META.runs.some((run) => run.summary?.[score.metric]?.refusals) ?
    " (refusals left out, as in the summary)" : "");
  return h("div", {class: "hist", "data-score": score.name},
    h("div", {class: "hist-title"}, h("b", {text: score.name}), h("span", {class: "muted", text: means})),
    svg, h("div", {class: "legend"}, legend));
}

function renderHistograms() {
  $("hists").replaceChildren(...META.scores.map((s, i) => histogram(s, i)));
  if (!META.scores.length) $("hists").replaceChildren(h("p", {class: "muted", text: "No scores."}));
}

