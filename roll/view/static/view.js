// The ALE viewer: a `roll view` run or a `rome-bench view` benchmark run, from window.VIEW (data.js).
"use strict";

const VIEW = window.VIEW;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fmt(value, digits) {
  if (value === null || value === undefined) return "-";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(digits ?? 2);
  return String(value);
}

// ---- charts ----

function drawPanel(panel, container) {
  const box = el("div", { class: "chart", "data-title": panel.title });
  container.append(box);
  const traces = panel.series.map((s) => ({
    type: panel.bars ? "bar" : "scatter",
    mode: panel.bars ? undefined : "lines+markers",
    name: s.label, x: s.x, y: s.y,
    text: panel.bars ? panel.notes.map((n) => n.text) : undefined,
    textposition: panel.bars ? "outside" : undefined,
  }));
  const xaxis = { title: { text: panel.xlabel } };
  if (panel.ticks) {
    xaxis.tickvals = panel.ticks.map((_, i) => i);
    xaxis.ticktext = panel.ticks;
  }
  const layout = {
    title: { text: panel.title, font: { size: 13 } },
    margin: { l: 45, r: 10, t: 34, b: 45 }, xaxis, yaxis: { automargin: true },
    showlegend: panel.series.length > 1, legend: { font: { size: 10 } },
  };
  Plotly.newPlot(box, traces, layout, { displayModeBar: false, responsive: true });
}

function chartsTab(main) {
  const grid = el("div", { class: "charts" });
  main.append(grid);
  if (!VIEW.panels.length) grid.append(el("p", { text: "Nothing to draw yet: the run logged no metrics." }));
  VIEW.panels.forEach((panel) => drawPanel(panel, grid));
}

// ---- transcripts ----

function stepNode(step) {
  const extra = step.extra || {};
  const chunk = extra.chunk;
  const classes = ["step", step.source];
  if (step.is_copied_context) classes.push("copied");
  const head = el("div", { class: "head" }, el("strong", { text: `#${step.step_id} ${step.source}` }));
  if (step.is_copied_context) head.append(el("span", { class: "tag expert", text: "expert prefill (not trained)" }));
  if (chunk) {
    head.append(el("span", { class: "tag", text: `chunk ${chunk.index} · v${chunk.weight_version}` }));
    head.append(el("span", { class: "tag", text: `${chunk.context_tokens} ctx → ${chunk.output_tokens} out` }));
    if (chunk.logprob_mean !== undefined) head.append(el("span", { class: "tag", text: `logprob ${fmt(chunk.logprob_mean, 3)}` }));
    head.append(el("span", { class: chunk.relevant ? "tag" : "tag masked", text: chunk.relevant ? "trained" : "masked (irrelevant)" }));
    if (chunk.mismatch_ratio !== undefined) {
      head.append(el("span", { class: chunk.ipa_mask ? "tag" : "tag masked",
        text: `π_old/μ ${fmt(chunk.mismatch_ratio, 3)}${chunk.ipa_mask ? "" : " (IPA mask drops it)"}` }));
    }
    if (chunk.error) head.append(el("span", { class: "tag error", text: "tool call failed" }));
    if (chunk.expert) head.append(el("span", { class: "tag expert", text: "expert (imitation)" }));
  }
  if (step.metrics && !chunk && step.metrics.completion_tokens !== undefined) {
    head.append(el("span", { class: "tag", text: `${step.metrics.completion_tokens} tokens` }));
  }
  const node = el("div", { class: classes.join(" ") }, head);
  const message = typeof step.message === "string" ? step.message : (step.message || []).map((p) => p.text || "").join("");
  if (message) node.append(el("pre", { text: message }));
  for (const call of step.tool_calls || []) {
    const args = call.extra && call.extra.raw_arguments !== undefined ? call.extra.raw_arguments : JSON.stringify(call.arguments, null, 1);
    const command = call.arguments && typeof call.arguments.command === "string" ? call.arguments.command : null;
    node.append(el("pre", { class: "call", text: `${call.function_name}: ${command ?? args}` }));
  }
  for (const result of (step.observation && step.observation.results) || []) {
    const content = typeof result.content === "string" ? result.content : JSON.stringify(result.content);
    node.append(el("pre", { class: "out", text: content || "(no output)" }));
  }
  return node;
}

function factsLine(doc) {
  const extra = doc.extra || {};
  const parts = [];
  for (const key of ["task_id", "label", "start", "reward", "success", "verdict", "cause", "end", "attempt"]) {
    if (extra[key] !== undefined && extra[key] !== null) parts.push(`${key}: ${fmt(extra[key])}`);
  }
  if (doc.agent) parts.push(`agent: ${doc.agent.name}${doc.agent.model_name ? " (" + doc.agent.model_name + ")" : ""}`);
  return el("div", { class: "facts", text: parts.join(" · ") });
}

function renderTrajectory(doc, container) {
  container.replaceChildren(factsLine(doc), ...doc.steps.map(stepNode));
}

function openTranscript(id) {
  const doc = VIEW.episodes[id];
  if (!doc) return;
  document.getElementById("transcript-title").textContent = id;
  renderTrajectory(doc, document.getElementById("transcript-body"));
  document.getElementById("transcript").hidden = false;
}

// ---- held-out table (run) ----

function heldOutTab(main) {
  const table = VIEW.held_out;
  if (!table.rows.length) {
    main.append(el("p", { text: "No evaluation has played an episode yet." }));
    return;
  }
  const won = table.columns.map((_, i) => table.rows.filter((r) => r.cells[i].won).length);
  main.append(el("p", { class: "summary", text: table.columns.map((c, i) => `${c}: ${won[i]}/${table.rows.length}`).join(" · ") + "  (outlined: changed since the column before)" }));
  const head = el("tr", {}, el("th", { text: "instance" }), ...table.columns.map((c) => el("th", { text: c })));
  const body = table.rows.map((row) => {
    const cells = row.cells.map((cell, i) => {
      if (cell.reward === null || cell.reward === undefined) return el("td", { class: "cell none", text: "-" });
      const classes = ["cell", cell.won ? "won" : "lost"];
      const before = i > 0 ? row.cells[i - 1].won : null;
      if (before === false && cell.won) classes.push("gained");
      if (before === true && !cell.won) classes.push("dropped");
      const td = el("td", { class: classes.join(" "), title: cell.episode ? "open the transcript" : "episode not kept",
        "data-episode": cell.episode || "" }, `${cell.won ? "won" : "lost"} ${fmt(cell.reward)}`);
      if (cell.episode) td.addEventListener("click", () => openTranscript(cell.episode));
      return td;
    });
    return el("tr", {}, el("th", { text: row.out_of_family ? `${row.key} (out of family)` : row.key }), ...cells);
  });
  main.append(el("div", { class: "scroll" }, el("table", { id: "held-out" }, el("thead", {}, head), el("tbody", {}, ...body))));
}

// ---- diff (run) ----

function diffTab(main) {
  const table = VIEW.held_out;
  if (table.columns.length < 2) {
    main.append(el("p", { text: "A diff needs two evaluations (e.g. after SFT and after RL)." }));
    return;
  }
  const pick = (name, chosen) => el("select", { id: name }, ...table.columns.map((c, i) => {
    const option = el("option", { value: String(i), text: c });
    if (i === chosen) option.selected = true;
    return option;
  }));
  const sft = table.columns.indexOf("after SFT");
  const left = pick("diff-left", sft >= 0 ? sft : table.columns.length - 2);
  const right = pick("diff-right", table.columns.length - 1);
  const instance = el("select", { id: "diff-instance" }, ...table.rows.map((r, i) => el("option", { value: String(i), text: r.key })));
  // Default to the first instance whose outcome changed between the two columns.
  const changed = table.rows.findIndex((r) => r.cells[left.value].won !== r.cells[right.value].won);
  if (changed >= 0) instance.value = String(changed);
  const panes = el("div", { class: "diff" }, el("div", { id: "diff-a" }), el("div", { id: "diff-b" }));
  const draw = () => {
    const row = table.rows[Number(instance.value)];
    [[left, "diff-a"], [right, "diff-b"]].forEach(([select, id]) => {
      const cell = row.cells[Number(select.value)];
      const pane = panes.querySelector("#" + id);
      pane.replaceChildren(el("h3", { text: `${table.columns[Number(select.value)]}: ${cell.won ? "won" : "lost"}` }));
      const box = el("div");
      pane.append(box);
      if (cell.episode && VIEW.episodes[cell.episode]) renderTrajectory(VIEW.episodes[cell.episode], box);
      else box.append(el("p", { text: "This episode was not kept." }));
    });
  };
  [left, right, instance].forEach((s) => s.addEventListener("change", draw));
  main.append(el("p", {}, "instance ", instance, " left ", left, " right ", right), panes);
  draw();
}

// ---- training episodes (run) ----

function trainingTab(main) {
  const ids = Object.keys(VIEW.episodes).filter((id) => (VIEW.episodes[id].extra || {}).kind === "train");
  if (!ids.length) {
    main.append(el("p", { text: "No training episode was kept (episodes.train_per_step)." }));
    return;
  }
  const rows = ids.map((id) => {
    const extra = VIEW.episodes[id].extra || {};
    const tr = el("tr", { class: extra.success ? "verdict-passed" : "verdict-failed" },
      el("td", { text: extra.label }), el("td", { text: extra.task_id }), el("td", { text: fmt(extra.start) }),
      el("td", { text: fmt(extra.reward) }), el("td", { text: fmt((extra.weight_versions || []).join(",")) }));
    tr.style.cursor = "pointer";
    tr.addEventListener("click", () => openTranscript(id));
    return tr;
  });
  const head = el("tr", {}, ...["step", "task", "start k", "reward", "weight versions"].map((h) => el("th", { text: h })));
  main.append(el("div", { class: "scroll" }, el("table", { id: "training" }, el("thead", {}, head), el("tbody", {}, ...rows))));
}

// ---- bench ----

function trialsTab(main) {
  const table = VIEW.trials;
  main.append(el("p", { class: "summary", text: VIEW.summary_line }));
  const attempts = table.attempts;
  const head = el("tr", {}, el("th", { text: "task" }), el("th", { text: "domain" }), el("th", { text: "difficulty" }),
    ...attempts.map((a) => el("th", { text: `attempt ${a}` })));
  const rows = table.rows.map((row) => el("tr", {}, el("th", { text: row.task }), el("td", { text: row.domain }),
    el("td", { text: row.difficulty }), ...row.cells.map((cell) => {
      if (!cell) return el("td", { class: "cell none", text: "-" });
      const td = el("td", { class: `cell verdict-${cell.verdict}`, "data-episode": cell.episode || "",
        title: cell.cause || cell.verdict }, `${cell.verdict} ${fmt(cell.reward)}`);
      if (cell.episode) td.addEventListener("click", () => openTranscript(cell.episode));
      return td;
    })));
  main.append(el("div", { class: "scroll" }, el("table", { id: "trials" }, el("thead", {}, head), el("tbody", {}, ...rows))));
}

function verdictsTab(main) {
  const head = el("tr", {}, ...["verdict", "cause", "trials"].map((h) => el("th", { text: h })));
  const rows = VIEW.verdicts.map((v) => el("tr", { class: `verdict-${v.verdict}` }, el("td", { text: v.verdict }),
    el("td", { text: v.cause || "-" }), el("td", { text: v.count })));
  main.append(el("table", { id: "verdicts" }, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// ---- frame ----

const TABS = VIEW.kind === "bench"
  ? [["pass@k", chartsTab], ["trials", trialsTab], ["verdicts", verdictsTab]]
  : [["curves", chartsTab], ["held-out", heldOutTab], ["diff", diffTab], ["training episodes", trainingTab]];

function show(name) {
  const main = document.getElementById("main");
  main.replaceChildren();
  document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  TABS.find(([tab]) => tab === name)[1](main);
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
}

function start() {
  document.title = VIEW.title;
  document.getElementById("title").textContent = VIEW.title;
  document.getElementById("source").textContent = VIEW.source;
  const nav = document.getElementById("tabs");
  for (const [name] of TABS) nav.append(el("button", { type: "button", "data-tab": name, text: name, onclick: () => show(name) }));
  document.getElementById("close").addEventListener("click", () => { document.getElementById("transcript").hidden = true; });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") document.getElementById("transcript").hidden = true; });
  const wanted = decodeURIComponent(location.hash.slice(1));
  show(TABS.some(([tab]) => tab === wanted) ? wanted : TABS[0][0]);
}

start();
