// The page of a job's control API: it polls GET /api/v1/job every second
// and draws it. Plain JavaScript, no dependency; every value from the job
// is set as text, never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
let token = "";
let updates = 0;
// expanded holds the operators whose subtasks the table shows.
const expanded = new Set();

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function cell(row, text, num) {
  row.appendChild(el("td", num ? { class: "num" } : {}, text));
}

function fill(tbody, rows, render) {
  tbody.replaceChildren();
  for (const r of rows) {
    const tr = el("tr");
    render(tr, r);
    tbody.appendChild(tr);
  }
}

const fmt = (n) => Math.round(n).toLocaleString("en");
const pct = (x) => Math.round(100 * x) + "%";
const time = (t) => new Date(t).toLocaleTimeString("en-GB");

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

// level is the colour class of a share of time backpressured.
function level(bp) {
  return bp > 0.5 ? "bad" : bp > 0.1 ? "warn" : "ok";
}

const colours = { ok: "#2e9e5b", warn: "#e0a526", bad: "#d64541" };

function drawGraph(st) {
  const svg = $("graph");
  svg.replaceChildren();
  const nodes = st.graph.nodes;
  const ops = Object.fromEntries(st.operators.map((o) => [o.name, o]));
  // Columns by depth: a node sits right of every input.
  const depth = nodes.map(() => 0);
  for (const e of st.graph.edges) depth[e.to] = Math.max(depth[e.to], depth[e.from] + 1);
  const columns = [];
  nodes.forEach((n, i) => (columns[depth[i]] = columns[depth[i]] || []).push(i));
  const w = 250, h = 84, gapX = 80, gapY = 18;
  const pos = [];
  columns.forEach((col, c) => col.forEach((i, r) => (pos[i] = { x: 10 + c * (w + gapX), y: 10 + r * (h + gapY) })));
  const rows = Math.max(...columns.map((c) => c.length));
  svg.setAttribute("viewBox", `0 0 ${20 + columns.length * (w + gapX) - gapX} ${20 + rows * (h + gapY) - gapY}`);
  for (const e of st.graph.edges) {
    const a = pos[e.from], b = pos[e.to];
    const x1 = a.x + w, y1 = a.y + h / 2, x2 = b.x, y2 = b.y + h / 2;
    const chained = nodes[e.to].chained_to === e.from;
    svg.appendChild(el("svg:path", { class: "edge" + (chained ? " chained" : ""), d: `M${x1},${y1} C${x1 + gapX / 2},${y1} ${x2 - gapX / 2},${y2} ${x2},${y2}` }));
    svg.appendChild(el("svg:text", { class: "edge-label", x: (x1 + x2) / 2 - 20, y: (y1 + y2) / 2 - 6 }, chained ? "chained" : e.partitioning));
  }
  nodes.forEach((n, i) => {
    const o = ops[n.name] || { subtasks: [] };
    const bp = Math.max(0, ...o.subtasks.map((s) => s.backpressured));
    const busy = Math.max(0, ...o.subtasks.map((s) => s.busy));
    const g = el("svg:g", { class: "node " + level(bp), "data-name": n.name, transform: `translate(${pos[i].x},${pos[i].y})` });
    g.appendChild(el("svg:rect", { width: w, height: h, rx: 6, fill: colours[level(bp)] }));
    g.appendChild(el("svg:text", { class: "name", x: 10, y: 18 }, `${n.name} ×${n.parallelism}`));
    g.appendChild(el("svg:text", { x: 10, y: 36 }, `${n.kind}${n.keyed ? ", keyed" : ""}`));
    g.appendChild(el("svg:text", { class: "rates", x: 10, y: 54 }, `in ${fmt(o.in_per_second || 0)}/s · out ${fmt(o.out_per_second || 0)}/s`));
    g.appendChild(el("svg:text", { class: "pressure", x: 10, y: 72 }, `backpressured ${pct(bp)} · busy ${pct(busy)}`));
    svg.appendChild(g);
  });
}

// eventTime is where an operator or subtask is in event time.
function eventTime(e) {
  if (e.input_ended) return "input ended";
  if (e.watermark) return e.watermark.replace("T", " ").replace("Z", "") + (e.idle ? " (idle)" : "");
  return e.idle ? "idle" : "–";
}

function drawOperators(st) {
  const tbody = $("operators").tBodies[0];
  tbody.replaceChildren();
  for (const o of st.operators) {
    const tr = el("tr", { class: "operator" + (expanded.has(o.name) ? " expanded" : "") });
    tr.dataset.name = o.name;
    const busy = Math.max(0, ...o.subtasks.map((s) => s.busy));
    const bp = Math.max(0, ...o.subtasks.map((s) => s.backpressured));
    cell(tr, (expanded.has(o.name) ? "▾ " : "▸ ") + o.name);
    cell(tr, String(o.subtasks.length), true);
    cell(tr, fmt(o.records_in), true);
    cell(tr, fmt(o.in_per_second), true);
    cell(tr, fmt(o.records_out), true);
    cell(tr, fmt(o.out_per_second), true);
    cell(tr, pct(busy), true);
    cell(tr, pct(bp), true);
    cell(tr, fmt(o.late_records), true);
    cell(tr, eventTime(o));
    tr.addEventListener("click", () => {
      if (!expanded.delete(o.name)) expanded.add(o.name);
      drawOperators(st);
    });
    tbody.appendChild(tr);
    if (!expanded.has(o.name)) continue;
    for (const s of o.subtasks) {
      const sr = el("tr", { class: "subtask" });
      sr.dataset.operator = o.name;
      sr.dataset.subtask = s.index;
      cell(sr, `  ${o.name}[${s.index}] in task ${s.task}`);
      sr.appendChild(el("td", { colspan: 5 }));
      cell(sr, pct(s.busy), true);
      cell(sr, pct(s.backpressured), true);
      sr.appendChild(el("td"));
      cell(sr, eventTime(s));
      tbody.appendChild(sr);
    }
  }
}

function drawCheckpoints(cp) {
  $("cp-counts").textContent = `${cp.completed} completed, ${cp.aborted} aborted in this process`;
  const recent = cp.history.slice(-40);
  const svg = $("cp-chart");
  svg.replaceChildren();
  const W = 800, H = 120, top = 14, bottom = 18;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const maxMs = Math.max(1, ...recent.map((c) => c.duration_ms));
  const bw = W / 40;
  recent.forEach((c, i) => {
    const hgt = c.status === "in_progress" ? 4 : Math.max(2, ((H - top - bottom) * c.duration_ms) / maxMs);
    const cls = c.status === "completed" ? "ok" : c.status === "aborted" ? "bad" : "warn";
    const bar = el("svg:rect", { x: i * bw + 1, y: H - bottom - hgt, width: bw - 2, height: hgt, fill: colours[cls], "data-id": c.id });
    bar.appendChild(el("svg:title", {}, `#${c.id} ${c.kind} ${c.status}: ${c.duration_ms} ms`));
    svg.appendChild(bar);
  });
  svg.appendChild(el("svg:text", { class: "axis", x: 4, y: 11 }, `${maxMs} ms`));
  svg.appendChild(el("svg:text", { class: "axis", x: 4, y: H - 4 }, "0"));
  fill($("checkpoints").tBodies[0], cp.history.slice(-12).reverse(), (tr, c) => {
    tr.className = c.status;
    tr.dataset.id = c.id;
    cell(tr, String(c.id), true);
    cell(tr, c.kind);
    cell(tr, c.status + (c.reason ? ": " + c.reason.split("\n")[0] : ""));
    cell(tr, time(c.triggered));
    cell(tr, c.status === "in_progress" ? "…" : c.duration_ms + " ms", true);
    cell(tr, c.alignment_ms + " ms", true);
    cell(tr, bytes(c.state_bytes + c.shared_bytes), true);
    cell(tr, (c.commits || []).map((k) => k.committed < k.subtasks ? `${k.sink} ${k.committed}/${k.subtasks} pending` :
      `${k.sink} ${k.committed}/${k.subtasks} in ${k.latency_ms} ms`).join(", "));
  });
  $("pending").textContent = cp.pending_commits.length === 0 ? "No pending commits." :
    "Pending commits: " + cp.pending_commits.map((p) => `${p.sink} (checkpoint ${p.checkpoint}, ${p.waiting} subtasks, ${p.since_ms} ms)`).join(", ");
}

function drawRestarts(restarts) {
  const ul = $("restarts");
  ul.replaceChildren();
  if (restarts.length === 0) ul.appendChild(el("li", { class: "muted" }, "none"));
  for (const r of restarts.slice().reverse()) {
    ul.appendChild(el("li", {}, `${time(r.time)} — restart ${r.attempt}: ${r.error.split("\n")[0]}`));
  }
}

function drawLag(lag) {
  fill($("lag").tBodies[0], lag, (tr, l) => {
    cell(tr, l.source);
    cell(tr, String(l.subtask), true);
    cell(tr, l.split);
    cell(tr, `${fmt(l.lag)} ${l.unit}`, true);
  });
  if (lag.length === 0) {
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: 4, class: "muted" }, "no source tells its lag"));
    $("lag").tBodies[0].appendChild(tr);
  }
}

const palette = ["#2563eb", "#2e9e5b", "#d64541", "#e0a526", "#7c3aed", "#0891b2", "#db2777", "#65a30d"];

function drawThroughput(points) {
  const svg = $("throughput");
  svg.replaceChildren();
  const W = 800, H = 140, top = 14, bottom = 18, left = 4;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const names = points.length ? points[points.length - 1].operators.map((o) => o.name) : [];
  const max = Math.max(1, ...points.flatMap((p) => p.operators.map((o) => o.in_per_second)));
  const x = (i) => left + ((W - left) * i) / Math.max(1, points.length - 1);
  const y = (v) => H - bottom - ((H - top - bottom) * v) / max;
  names.forEach((name, k) => {
    const d = points.map((p, i) => {
      const o = p.operators.find((o) => o.name === name);
      return `${i ? "L" : "M"}${x(i).toFixed(1)},${y(o ? o.in_per_second : 0).toFixed(1)}`;
    }).join(" ");
    const line = el("svg:path", { class: "rate", d, fill: "none", stroke: palette[k % palette.length], "stroke-width": 2, "data-name": name });
    line.appendChild(el("svg:title", {}, `${name}: records in per second`));
    svg.appendChild(line);
  });
  svg.appendChild(el("svg:text", { class: "axis", x: 4, y: 11 }, `${fmt(max)}/s`));
  svg.appendChild(el("svg:text", { class: "axis", x: 4, y: H - 4 }, "0"));
  const legend = $("throughput-legend");
  legend.replaceChildren("Records in per second of each operator, one point per sampling interval, oldest on the left: ");
  names.forEach((name, k) => {
    legend.appendChild(el("span", { class: "sw", style: `background:${palette[k % palette.length]}` }, ""));
    legend.appendChild(document.createTextNode(` ${name}  `));
  });
}

// drawExceptions lists the job's errors, newest first, each with its whole
// text on a click.
// drawn holds what the views that are redrawn only on a change show now.
const drawn = { exceptions: null, configuration: null };

function drawExceptions(st) {
  const items = [];
  if (st.error) items.push({ time: null, what: `the job (${st.state})`, text: st.error });
  for (const r of st.restarts) items.push({ time: r.time, what: `restart ${r.attempt}`, text: r.error });
  for (const c of st.checkpoints.history) {
    if (c.status === "aborted" && c.reason) items.push({ time: c.triggered, what: `${c.kind} ${c.id} aborted`, text: c.reason });
  }
  items.sort((a, b) => (b.time ? Date.parse(b.time) : Infinity) - (a.time ? Date.parse(a.time) : Infinity));
  // Redrawn only when they change: a redraw would close the exception the
  // user opened.
  const shown = JSON.stringify(items.slice(0, 20));
  if (shown === drawn.exceptions) return;
  drawn.exceptions = shown;
  const ul = $("exceptions");
  ul.replaceChildren();
  if (items.length === 0) ul.appendChild(el("li", { class: "muted" }, "none"));
  for (const e of items.slice(0, 20)) {
    const d = el("details");
    d.appendChild(el("summary", {}, `${e.time ? time(e.time) + " — " : ""}${e.what}: ${e.text.split("\n")[0]}`));
    d.appendChild(el("pre", {}, e.text));
    const li = el("li");
    li.appendChild(d);
    ul.appendChild(li);
  }
}

function drawConfiguration(settings) {
  const shown = JSON.stringify(settings);
  if (shown === drawn.configuration) return;
  drawn.configuration = shown;
  fill($("configuration").tBodies[0], settings, (tr, s) => {
    tr.dataset.name = s.name;
    cell(tr, s.name);
    cell(tr, s.value);
  });
}

// drawCluster shows, for an instance of a job run on a cluster, its tasks
// and the group's assignment; the section stays hidden otherwise.
function drawCluster(c) {
  $("cluster").hidden = !c;
  if (!c) return;
  fill($("tasks").tBodies[0], c.tasks, (tr, t) => {
    tr.dataset.task = `${t.topic}/${t.partition}`;
    cell(tr, `${t.topic}/${t.partition}`);
    cell(tr, t.stage >= 0 ? String(t.stage) : "-");
    cell(tr, t.state);
    cell(tr, time(t.since));
    cell(tr, String(t.epoch));
    cell(tr, t.checkpoint ? String(t.checkpoint) + (t.checkpoint_time ? " at " + time(t.checkpoint_time) : "") : "-");
    cell(tr, String(t.runs));
    cell(tr, String(t.restarts));
    cell(tr, t.error ? t.error.split("\n")[0] : "");
  });
  $("assignment-meta").textContent = `${c.assignment.length} members of group ${c.group}` +
    (c.assignment_time && !c.assignment_time.startsWith("0001") ? `, as the broker described it at ${time(c.assignment_time)}` : "") +
    (c.assignment_error ? ` (the latest description failed: ${c.assignment_error})` : "");
  fill($("assignment").tBodies[0], c.assignment, (tr, m) => {
    tr.dataset.member = m.member;
    cell(tr, m.member + (m.member === c.member ? " (this instance)" : ""));
    cell(tr, m.client);
    cell(tr, m.host);
    cell(tr, m.tasks.join(" "));
  });
}

function draw(st) {
  $("job").textContent = st.job;
  $("state").textContent = st.state;
  $("state").className = "badge " + st.state;
  $("meta").textContent = st.cluster
    ? `started ${new Date(st.started).toLocaleString("en-GB")} · instance ${st.cluster.member} of group ${st.cluster.group} · storage ${st.storage}`
    : `started ${new Date(st.started).toLocaleString("en-GB")} · incarnation ${st.incarnation} · epoch ${st.epoch} · storage ${st.storage}` +
      (st.restored_from ? ` · restored from checkpoint ${st.restored_from}` : "");
  drawCluster(st.cluster);
  const err = $("error");
  err.hidden = !st.error;
  err.textContent = st.error ? st.error.split("\n")[0] : "";
  drawGraph(st);
  drawOperators(st);
  drawCheckpoints(st.checkpoints);
  drawRestarts(st.restarts);
  drawLag(st.lag);
  drawThroughput(st.throughput);
  drawExceptions(st);
  drawConfiguration(st.configuration);
}

async function refresh() {
  try {
    const resp = await fetch("/api/v1/job", { cache: "no-store" });
    if (!resp.ok) throw new Error(`${resp.status} ${resp.statusText}`);
    draw(await resp.json());
    updates++;
    $("updated").textContent = `updated ${new Date().toLocaleTimeString("en-GB")} (${updates})`;
    $("updated").dataset.updates = updates;
  } catch (e) {
    $("updated").textContent = `the job does not answer (${e.message}): it may have ended`;
  }
}

const changeButtons = ["savepoint-button", "stop-savepoint-button", "stop-button"];

// change posts a call that changes the job (a savepoint, a stop) with the
// token, and says what came of it.
async function change(path, doing, done) {
  const out = $("savepoint-result");
  for (const b of changeButtons) $(b).disabled = true;
  out.className = "";
  out.textContent = doing;
  try {
    const resp = await fetch(path, { method: "POST", headers: { Authorization: "Bearer " + token } });
    const body = await resp.json();
    if (!resp.ok) throw new Error(body.error || `${resp.status} ${resp.statusText}`);
    out.className = "ok";
    out.textContent = done(body);
    refresh();
  } catch (e) {
    out.className = "bad";
    out.textContent = "refused: " + e.message;
  } finally {
    for (const b of changeButtons) $(b).disabled = token === "";
  }
}

function savepoint(ev) {
  ev.preventDefault();
  change("/api/v1/savepoint", "taking a savepoint…", (b) => "savepoint at " + b.savepoint);
}

function stop(withSavepoint) {
  if (!window.confirm(withSavepoint ? "Take a savepoint and stop the job?" : "Stop the job?")) return;
  change("/api/v1/stop" + (withSavepoint ? "?savepoint=true" : ""), withSavepoint ? "taking a savepoint, then stopping…" : "stopping…",
    (b) => b.savepoint ? "stopping; savepoint at " + b.savepoint : "stopping: the job commits what its last checkpoint covers and ends");
}

document.addEventListener("DOMContentLoaded", () => {
  $("savepoint-token").addEventListener("input", (ev) => {
    token = ev.target.value.trim();
    for (const b of changeButtons) $(b).disabled = token === "";
  });
  $("savepoint-form").addEventListener("submit", savepoint);
  $("stop-button").addEventListener("click", () => stop(false));
  $("stop-savepoint-button").addEventListener("click", () => stop(true));
  refresh();
  setInterval(refresh, 1000);
});
