"""The trace page's HTML, CSS and JavaScript (traces/html.py fills it in).

One template string: render_html replaces __TITLE__ with the escaped title, __DIAGRAM__ with
the sequence diagram's SVG (traces/html_diagram.py) and __DATA__ with the page data as JSON.
No external resources: everything the browser needs is in this string.
"""

# ruff: noqa: E501 - the page's own CSS and JavaScript, kept as written

PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
  :root { --bg: #fafafa; --fg: #222; --muted: #777; --line: #ddd; --changed: #ffe27a; --bad: #c62828; --ok: #2e7d32; }
  * { box-sizing: border-box; }
  body { margin: 0; padding: 16px 20px 40px; background: var(--bg); color: var(--fg);
         font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
  h1 { font-size: 18px; margin: 0 0 4px; }
  code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
  #summary { color: var(--muted); margin-bottom: 10px; }
  #controls { display: flex; align-items: center; gap: 8px; flex-wrap: wrap; position: sticky; top: 0;
              background: var(--bg); padding: 8px 0; z-index: 5; border-bottom: 1px solid var(--line); }
  button { font: inherit; padding: 3px 10px; border: 1px solid #bbb; border-radius: 4px; background: #fff; cursor: pointer; }
  button:disabled { opacity: .4; cursor: default; }
  #step-counter { font-weight: 600; min-width: 90px; text-align: center; }
  #action { font-size: 15px; padding: 2px 8px; background: #eef3fb; border-radius: 4px; }
  #cycle-mark { font-weight: 700; color: #6a1b9a; background: #f3e5f5; padding: 2px 8px; border-radius: 4px; }
  .hint { color: var(--muted); font-size: 12px; margin-left: auto; }
  h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); margin: 16px 0 6px; }
  #permalink { font-size: 12px; color: #1565c0; }
  #sequence-wrap { overflow-x: auto; border: 1px solid var(--line); background: #fff; border-radius: 4px; }
  #sequence text { font-size: 11px; fill: #333; }
  #sequence .seq-lane { font-weight: 600; font-size: 12px; }
  #sequence .seq-num { font-weight: 700; fill: #1565c0; text-decoration: underline; }
  #sequence .seq-type { fill: #555; }
  #sequence .seq-row { cursor: pointer; }
  #sequence .seq-bg { fill: transparent; }
  #sequence .seq-row:hover .seq-bg { fill: #f0f4fa; }
  #sequence .seq-cycle .seq-bg { fill: #f3e5f5; }
  #sequence .seq-loop-label { fill: #6a1b9a; font-weight: 700; }
  #sequence .seq-cycle-arrow { stroke: #6a1b9a; stroke-width: 2; fill: none; }
  #sequence .seq-head.cycle { fill: #6a1b9a; }
  #sequence .seq-violation .seq-bg { fill: #fdecea; }
  #sequence .seq-reached .seq-bg { fill: #e8f5e9; }
  #sequence .seq-violation .seq-num { fill: var(--bad); }
  #sequence .seq-row.current .seq-bg { stroke: #f9a825; stroke-width: 2; }
  #sequence .life { stroke: #cfcfcf; stroke-width: 2; }
  #sequence .life.leader { stroke: #1e88e5; stroke-width: 4; }
  #sequence .life.zombie { stroke: #fb8c00; stroke-width: 4; }
  #sequence .life.crashed { stroke: #e57373; stroke-dasharray: 2 4; }
  #sequence .seq-msg line { stroke-width: 1.5; }
  #sequence .seq-msg.request line { stroke: #1565c0; }
  #sequence .seq-msg.response line { stroke: #6a1b9a; stroke-dasharray: 5 3; }
  #sequence .seq-head.request { fill: #1565c0; } #sequence .seq-head.response { fill: #6a1b9a; }
  #sequence .seq-label { paint-order: stroke; stroke: #fff; stroke-width: 3px; }
  #sequence .seq-msg.request .seq-label { fill: #0d47a1; } #sequence .seq-msg.response .seq-label { fill: #4a148c; }
  #sequence .seq-sym { font-size: 15px; font-weight: 700; }
  #sequence .seq-mark.crash .seq-sym, #sequence .seq-verdict.bad { fill: var(--bad); }
  #sequence .seq-mark.restart .seq-sym, #sequence .seq-verdict.good { fill: var(--ok); }
  #sequence .seq-mark.elect .seq-sym { fill: #e65100; }
  #sequence .seq-mark .seq-label { font-weight: 600; }
  #sequence .seq-verdict { font-size: 13px; font-weight: 700; }
  #health { display: flex; gap: 6px; flex-wrap: wrap; margin-top: 12px; }
  .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; border: 1px solid transparent; }
  .health-bad { background: #fdecea; color: var(--bad); border-color: #f5c2c0; }
  .health-ok { background: #e8f5e9; color: var(--ok); }
  #lanes { position: relative; margin-top: 8px; }
  .lane { display: grid; grid-template-columns: 170px 280px 1fr; border-bottom: 1px solid var(--line);
          background: #fff; min-height: 46px; }
  .lane:first-child { border-top: 1px solid var(--line); }
  .lane-name { padding: 8px 10px; border-right: 1px solid var(--line); }
  .lane-name .title { font-weight: 600; }
  .gutter { border-right: 1px solid var(--line); background: repeating-linear-gradient(90deg, #fff 0 14px, #fcfcfc 14px 28px); }
  .lane-body { padding: 6px 10px; }
  .kv { display: inline-block; margin: 0 12px 3px 0; white-space: nowrap; }
  .observed { display: inline-block; border-left: 2px dashed var(--muted); padding-left: 8px; }
  .observed::before { content: "observed by clients:"; color: var(--muted); font-size: 12px; margin-right: 8px; }
  .kv .k { color: var(--muted); font-size: 12px; margin-right: 4px; }
  .kv .v { font-family: ui-monospace, Menlo, Consolas, monospace; padding: 0 2px; border-radius: 3px; }
  .wrap .v { white-space: normal; }
  .changed { background: var(--changed); }
  .role { font-size: 12px; }
  .role.leader { background: #e3f2fd; color: #0d47a1; }
  .role.zombie { background: #fff3e0; color: #e65100; border-color: #ffb74d; }
  .role.follower { background: #f1f1f1; color: #444; }
  .role.crashed { background: #fdecea; color: var(--bad); }
  .role.none { background: #f5f5f5; color: var(--muted); }
  .role.changed { outline: 2px solid #e0b400; }
  .mark { display: inline-block; margin: 2px 6px 2px 0; padding: 1px 6px; border-radius: 3px; font-size: 12px; font-weight: 600; }
  .mark.crash { background: var(--bad); color: #fff; }
  .mark.restart { background: var(--ok); color: #fff; }
  .mark.stall, .mark.fence { background: #6d4c41; color: #fff; }
  .mark.elect { background: #f9a825; color: #000; }
  #arrows .sym { font-size: 18px; font-weight: 700; stroke-width: 0; }
  .log { position: relative; height: 70px; margin: 4px 0 2px; white-space: nowrap; }
  .cell { position: absolute; top: 14px; width: 44px; height: 26px; border-radius: 3px; text-align: center;
          font: 12px/26px ui-monospace, Menlo, Consolas, monospace; color: #fff; border: 1px solid rgba(0,0,0,.25); }
  .cell .ep { font-size: 9px; opacity: .85; margin-left: 2px; }
  .cell.changed { box-shadow: 0 0 0 3px var(--changed); }
  .cell.lost { background: transparent !important; color: var(--bad); border: 1px dashed var(--bad); text-decoration: line-through; }
  .offset { position: absolute; top: 0; width: 44px; text-align: center; font-size: 10px; color: var(--muted); }
  /* HW and LEO labels sit on their own rows under the cells so they never collide. */
  .marker { position: absolute; top: 12px; width: 0; border-left: 2px solid; }
  .marker span { position: absolute; left: 3px; bottom: -3px; font-size: 10px; font-weight: 700; white-space: nowrap; }
  .marker.hw { height: 42px; border-color: #2e7d32; } .marker.hw span { color: #2e7d32; }
  .marker.leo { height: 56px; border-color: #1565c0; border-left-style: dotted; } .marker.leo span { color: #1565c0; }
  .marker.changed span { background: var(--changed); }
  .empty-log { position: absolute; top: 18px; color: var(--muted); font-size: 12px; }
  #arrows { position: absolute; top: 0; pointer-events: none; overflow: visible; }
  #arrows .msg line { stroke-width: 2; }
  #arrows .msg.request line { stroke: #1565c0; }
  #arrows .msg.response line { stroke: #6a1b9a; stroke-dasharray: 5 3; }
  #arrows text { font-size: 11px; paint-order: stroke; stroke: #fff; stroke-width: 3px; }
  #arrows .msg.request text { fill: #0d47a1; } #arrows .msg.response text { fill: #4a148c; }
  #legend { display: flex; gap: 10px; flex-wrap: wrap; align-items: center; font-size: 12px; }
  .swatch { display: inline-block; width: 14px; height: 14px; border-radius: 3px; vertical-align: middle; margin-right: 3px; }
  .outcome { margin-top: 16px; padding: 10px 14px; border-radius: 4px; }
  #violation { background: #fdecea; border: 2px solid var(--bad); color: #7f1d1d; }
  #violation .name, #reached .name { font-weight: 700; font-size: 15px; }
  #violation table { border-collapse: collapse; margin: 4px 0 6px 12px; font-size: 12px; }
  #violation td { padding: 1px 10px 1px 0; }
  #violation td.value { font-family: ui-monospace, Menlo, Consolas, monospace; }
  #reached { background: #e8f5e9; border: 2px solid var(--ok); color: #1b5e20; }
  .pending-note { color: var(--muted); font-size: 12px; margin-top: 10px; }
  #story { margin: 0 0 12px 0; padding: 8px 12px; border-left: 4px solid var(--bad); background: #fff8f7; }
  #story.witness { border-left-color: var(--ok); background: #f3faf3; }
  #story p { margin: 2px 0; font-weight: 600; }
  #story table { border-collapse: collapse; font-size: 13px; }
  #story td { padding: 1px 10px 1px 0; vertical-align: top; }
  #story td.label { font-weight: 600; white-space: nowrap; }
  #story td.broken { color: var(--bad); }
</style>
</head>
<body>
<h1 id="title">__TITLE__</h1>
<div id="summary"></div>
__STORY__
<div id="controls">
  <button id="first" title="first step (Home)">&#xAB; first</button>
  <button id="prev" title="previous step (ArrowLeft, p)">&#x25C0; back</button>
  <span id="step-counter" data-testid="step-counter"></span>
  <button id="next" title="next step (ArrowRight, n)">next &#x25B6;</button>
  <button id="last" title="last step (End)">last &#xBB;</button>
  <code id="action" data-testid="action"></code>
  <a id="permalink" data-testid="permalink" href="#step=0" title="a link to this step">link to this step</a>
  <span class="hint">keys: &#x2190; &#x2192; or p n, Home, End; click a row of the diagram</span>
</div>

<h2>the whole trace</h2>
<div id="sequence-wrap">__DIAGRAM__</div>
<div class="pending-note">lifelines: thick blue = the leader, thick orange = a zombie leader, dotted = crashed;
  solid arrows are requests, dashed ones responses; &#x2715; crash, &#x21BB; restart, &#x2605; the controller elects</div>

<div id="health" data-testid="health"></div>
<h2>lanes at this step</h2>
<div id="lanes"><svg id="arrows"><defs>
  <marker id="head-request" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#1565c0"/></marker>
  <marker id="head-response" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6a1b9a"/></marker>
</defs><g id="arrow-layer"></g></svg></div>
<div id="legend" data-testid="legend"></div>

<div id="violation" class="outcome" data-testid="violation" hidden></div>
<div id="reached" class="outcome" data-testid="reached" hidden></div>
<div id="outcome-note" class="pending-note"></div>

<script type="application/json" id="trace-data">__DATA__</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("trace-data").textContent);
const STEPS = DATA.steps, LAST = STEPS.length - 1;
// The step the verdict is about: a counterexample's violation, a witness's reached step.
const FOCUS = DATA.invariant || DATA.reached ? LAST : 0;
const PALETTE = ["#1e88e5", "#43a047", "#8e24aa", "#f4511e", "#00897b", "#c0ca33", "#6d4c41", "#d81b60", "#3949ab", "#757575"];
const SYMBOL = {crash: "\u2715", restart: "\u21BB", stall: "\u2016", fence: "\u2298", elect: "\u2605"};
const SYMBOL_COLOUR = {crash: "#c62828", restart: "#2e7d32", elect: "#e65100"};
const CELL = 48;   // px per log offset; a cell is 44px wide, the HW/LEO lines run in the gap before it
let cur = 0;

const $ = id => document.getElementById(id);
const esc = s => String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const epochColour = e => PALETTE[(e - 1 + PALETTE.length) % PALETTE.length];
const lanes = () => ["producer", "controller"].concat(STEPS[0].brokers.map(b => "b" + b.id));
const laneName = k => k === "producer" ? "producer" : k === "controller" ? "controller" : "broker " + k.slice(1);

function kv(key, value, before, cls) {
  const changed = before !== undefined && before !== value;
  return `<span class="kv ${cls || ""}" data-key="${esc(key)}"><span class="k">${esc(key)}</span>` +
         `<span class="v${changed ? " changed" : ""}">${esc(value)}</span></span>`;
}

function marksFor(step, lane) {
  return step.marks.filter(m => m.lane === lane)
    .map(m => `<span class="mark ${esc(m.kind)}" data-testid="mark">${esc(m.label)}</span>`).join("");
}

function logStrip(b, prev) {
  const width = Math.max(b.log.length, prev ? prev.log.length : 0, 1) * CELL + 40;
  let h = `<div class="log" style="width:${width}px" data-testid="log">`;
  b.log.forEach(([epoch, rec], off) => {
    const old = prev && prev.log[off];
    const changed = prev && (!old || old[0] !== epoch || old[1] !== rec);
    h += `<div class="offset" style="left:${off * CELL + 3}px">${off}</div>` +
         `<div class="cell${changed ? " changed" : ""}" data-offset="${off}" data-epoch="${epoch}" ` +
         `style="left:${off * CELL + 3}px;background:${epochColour(epoch)}" title="offset ${off}: record ${rec}, leader epoch ${epoch}">` +
         `r${rec}<span class="ep">e${epoch}</span></div>`;
  });
  // Records the previous step had beyond this log's end: lost by truncation or a crash.
  if (prev) prev.log.slice(b.log.length).forEach(([epoch, rec], i) => {
    const off = b.log.length + i;
    h += `<div class="offset" style="left:${off * CELL + 3}px">${off}</div>` +
         `<div class="cell lost" data-offset="${off}" style="left:${off * CELL + 3}px" title="lost in this step">r${rec}<span class="ep">e${epoch}</span></div>`;
  });
  if (!b.log.length && !(prev && prev.log.length)) h += `<span class="empty-log" style="left:8px">empty log</span>`;
  const mark = (cls, label, off, old) =>
    `<div class="marker ${cls}${prev && old !== off ? " changed" : ""}" data-testid="${cls}" style="left:${off * CELL}px"><span>${label}</span></div>`;
  h += mark("hw", "HW " + b.hw, b.hw, prev && prev.hw) + mark("leo", "LEO " + b.leo, b.leo, prev && prev.leo);
  return h + "</div>";
}

function brokerLane(step, b, prev) {
  const pf = prev ? prev.fields : {};
  let fields = "";
  for (const [k, v] of Object.entries(b.fields)) {
    if (v === "" && !(prev && pf[k])) continue;
    fields += kv(k, v === "" ? "-" : v, prev ? (pf[k] === "" ? "-" : pf[k]) : undefined, k === "leader state" ? "wrap" : "");
  }
  const roleChanged = prev && prev.role !== b.role;
  return `<div class="lane" data-lane="b${b.id}" data-broker="${b.id}" data-testid="lane-b${b.id}">` +
    `<div class="lane-name"><div class="title">broker ${b.id}</div>` +
    `<span class="badge role ${b.kind}${roleChanged ? " changed" : ""}" data-testid="role">${esc(b.role)}</span></div>` +
    `<div class="gutter"></div><div class="lane-body">${marksFor(step, "b" + b.id)}${fields}${logStrip(b, prev)}</div></div>`;
}

function controllerLane(step, prev) {
  let fields = "";
  for (const [k, v] of Object.entries(step.controller)) fields += kv(k, v, prev ? prev.controller[k] : undefined);
  return `<div class="lane" data-lane="controller" data-testid="lane-controller"><div class="lane-name">` +
    `<div class="title">controller</div><span class="badge role ${step.controller.recovery === "RECOVERING" ? "zombie" : "none"}">KRaft</span></div>` +
    `<div class="gutter"></div><div class="lane-body">${marksFor(step, "controller")}${fields}</div></div>`;
}

// The producer's lane also carries what clients were told (the ghost): observed, not protocol state.
function producerLane(step, prev) {
  let observed = "";
  for (const [k, v] of Object.entries(step.observed)) observed += kv(k, v, prev ? prev.observed[k] : undefined);
  return `<div class="lane" data-lane="producer" data-testid="lane-producer"><div class="lane-name"><div class="title">producer</div></div>` +
    `<div class="gutter"></div><div class="lane-body">${kv("acks", step.producer.acks)}` +
    `<div class="observed" data-testid="observed" title="observed by clients; not protocol state">${observed}</div></div></div>`;
}

// Arrows for the step's messages, drawn over the gutter column between the lanes' centres.
function drawArrows(step) {
  const box = $("lanes"), svg = $("arrows"), gutter = box.querySelector(".gutter");
  const top = box.getBoundingClientRect().top, g = gutter.getBoundingClientRect();
  svg.setAttribute("width", g.width); svg.setAttribute("height", box.offsetHeight);
  svg.style.left = (g.left - box.getBoundingClientRect().left) + "px";
  const centre = lane => { const r = box.querySelector(`.lane[data-lane="${lane}"]`).getBoundingClientRect(); return r.top - top + r.height / 2; };
  const n = step.messages.length;
  let h = "";
  step.messages.forEach((m, i) => {
    const x = 14 + i * (g.width - 20) / n;   // labels run to the right of each line
    const y1 = centre(m.from), y2 = centre(m.to), dir = y2 > y1 ? 1 : -1;
    const ly = y1 + (y2 - y1) * (n > 1 ? 0.35 + 0.3 * i / (n - 1) : 0.5);
    h += `<g class="msg ${m.kind}" data-testid="message" data-from="${m.from}" data-to="${m.to}">` +
         `<line x1="${x}" y1="${y1 + dir * 6}" x2="${x}" y2="${y2 - dir * 8}" marker-end="url(#head-${m.kind})"/>` +
         `<text x="${x + 6}" y="${ly}">${esc(m.label)}</text></g>`;
  });
  // Marks (crash, restart, election...) as a symbol in the gutter too, so the eye finds them.
  for (const m of step.marks) {
    h += `<text class="sym" data-testid="mark-symbol" x="${g.width - 24}" y="${centre(m.lane) + 6}" fill="${SYMBOL_COLOUR[m.kind] || "#444"}">${SYMBOL[m.kind] || "\u2022"}</text>`;
  }
  $("arrow-layer").innerHTML = h;
}

// A liveness lasso's page: DATA.loop is its loop step, DATA.cycle what goes on forever from there.
const LASSO = DATA.loop !== undefined && DATA.loop !== null;

function violationHtml() {
  const exp = DATA.explanation || {};
  let h = `<div class="name">VIOLATED <span data-testid="invariant">${esc(DATA.invariant)}</span>${LASSO ? " (never happens)" : ""}</div>`;
  if (exp.meaning) h += `<div>${esc(exp.meaning)}</div>`;
  // Values in Kafka's words (traces/words.py); the invariant's own variable name is the tooltip.
  for (const part of DATA.failed_parts) {
    h += `<div class="part" data-testid="failed-part">fails: ${esc(part.part)}</div><table>` +
      part.values.map(v => `<tr title="${esc(v.name)}" data-testid="failed-value"><td>${esc(v.words)}</td><td class="value">${esc(v.value)}</td></tr>`).join("") + "</table>";
  }
  if ((exp.also_violated || []).length) h += `<div>also violated here: ${esc(exp.also_violated.join(", "))}</div>`;
  if (LASSO) h += `<div data-testid="cycle"><a href="#step=${DATA.loop}">\u21BB ${esc(DATA.cycle)}</a></div>`;
  return h;
}

// The fragment #step=N names a step; anything else (none, garbage, out of range) means FOCUS.
function stepFromHash() {
  const m = /^#step=(\d+)$/.exec(location.hash), i = m ? Number(m[1]) : -1;
  return i >= 0 && i <= LAST ? i : FOCUS;
}

function setHash(i) {
  const h = `#step=${i}`;
  if (location.hash === h) return;
  // replaceState: stepping should not fill the back button's history.
  try { history.replaceState(null, "", h); } catch (e) { location.replace(h); }
}

function show(i) {
  cur = Math.max(0, Math.min(LAST, i));
  const step = STEPS[cur], prev = cur > 0 ? STEPS[cur - 1] : null;
  $("step-counter").textContent = `step ${cur} / ${LAST}`;
  $("action").textContent = step.action;
  if (LASSO) $("cycle-mark").textContent = cur === DATA.loop ? "\u21BB " + step.loop_marker
    : cur > DATA.loop ? `in the cycle from step ${DATA.loop}` : "";
  if (LASSO) $("cycle-mark").hidden = cur < DATA.loop;
  $("first").disabled = $("prev").disabled = cur === 0;
  $("next").disabled = $("last").disabled = cur === LAST;
  $("health").innerHTML = "<span class=\"k\">health:</span> " + (step.health.length
    ? step.health.map(x => `<span class="badge health-bad${prev && !prev.health.includes(x) ? " changed" : ""}">${esc(x)}</span>`).join("")
    : `<span class="badge health-ok">healthy</span>`);
  const svg = $("arrows");   // the arrow overlay lives in #lanes: keep it across the rebuild
  $("lanes").innerHTML = producerLane(step, prev) + controllerLane(step, prev) +
    step.brokers.map((b, k) => brokerLane(step, b, prev && prev.brokers[k])).join("");
  $("lanes").appendChild(svg);
  drawArrows(step);
  document.querySelectorAll("#sequence .seq-row").forEach(r => r.classList.toggle("current", +r.dataset.step === cur));
  $("permalink").href = `#step=${cur}`;
  setHash(cur);
  const atEnd = cur === LAST;
  $("violation").hidden = !(atEnd && DATA.invariant);
  $("reached").hidden = !(atEnd && DATA.reached);
  $("outcome-note").textContent = atEnd ? "" : LASSO ? DATA.cycle : DATA.invariant ? `${DATA.invariant} is violated at step ${LAST}`
    : DATA.reached ? `${DATA.reached} is reached at step ${LAST}` : "";
  document.body.dataset.step = cur;
}

function init() {
  $("summary").textContent = DATA.summary + (LASSO ? ` \u2014 liveness counterexample to ${DATA.invariant}: a lasso looping from step ${DATA.loop}`
    : DATA.invariant ? ` \u2014 counterexample to ${DATA.invariant}`
    : DATA.reached ? ` \u2014 witness: ${DATA.reached} is reachable` : "");
  if (DATA.invariant) $("violation").innerHTML = violationHtml();
  if (LASSO) $("action").insertAdjacentHTML("afterend", `<span id="cycle-mark" data-testid="cycle-mark" hidden></span>`);
  if (DATA.reached) $("reached").innerHTML = `<div class="name">REACHED <span data-testid="reached-name">${esc(DATA.reached)}</span></div>` +
    `<div>a shortest path to this state: a witness, not a violation</div>`;
  $("legend").innerHTML = "<span class=\"k\">log cells by leader epoch:</span>" +
    (DATA.epochs.length ? DATA.epochs.map(e => `<span data-epoch="${e}"><span class="swatch" style="background:${epochColour(e)}"></span>epoch ${e}</span>`).join("")
      : " <span>(no records in this trace)</span>") +
    `<span><span class="swatch" style="border:2px solid #2e7d32"></span>HW</span>` +
    `<span><span class="swatch" style="border:2px dotted #1565c0"></span>LEO</span>` +
    `<span><span class="swatch" style="background:var(--changed)"></span>changed in this step</span>`;
  document.querySelectorAll("#sequence .seq-row").forEach(r => r.addEventListener("click", e => {
    e.preventDefault();   // the step number is a link too: one way to move, without a history entry
    show(+r.dataset.step);
  }));
  window.addEventListener("hashchange", () => show(stepFromHash()));
  $("first").onclick = () => show(0);
  $("prev").onclick = () => show(cur - 1);
  $("next").onclick = () => show(cur + 1);
  $("last").onclick = () => show(LAST);
  document.addEventListener("keydown", e => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const to = {ArrowRight: cur + 1, n: cur + 1, ArrowLeft: cur - 1, p: cur - 1, Home: 0, End: LAST}[e.key];
    if (to === undefined) return;
    e.preventDefault();
    show(to);
  });
  window.addEventListener("resize", () => drawArrows(STEPS[cur]));
  show(stepFromHash());
}
init();
</script>
</body>
</html>
"""
