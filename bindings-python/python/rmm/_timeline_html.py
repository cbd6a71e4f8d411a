"""A self-contained HTML page for a memory snapshot (rmm.timeline.to_html): no network, no
dependencies; the snapshot is inlined as JSON and drawn by a small script.

What the page shows, with the class names a test counts:
- a summary line (``#summary``): segments, bytes reserved and allocated, trace entries;
- one row per segment (``.segment``), a bar whose blocks (``.block``, plus the block's state as a
  class: ``active_allocated``, ``active_pending_free``, ``inactive``) are as wide as their bytes,
  each with a tooltip of its size, resource stack and top frames;
- allocated bytes over time per device (``svg.timeline`` with one ``polyline`` each), from the traces;
- the largest live allocations (``tr.allocation``) with the frames that made them.
"""

from __future__ import annotations

import html
import json
from typing import Any

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; }
#summary { margin: 0 0 12px; color: #444; }
.segment { display: flex; align-items: center; margin: 3px 0; }
.segment .label { width: 260px; font: 11px monospace; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.segment .bar { flex: 1; display: flex; height: 18px; border: 1px solid #999; background: #fff; }
.block { height: 100%; min-width: 1px; box-sizing: border-box; border-right: 1px solid #fff; }
.active_allocated { background: #d9534f; }
.active_pending_free { background: #f0ad4e; }
.inactive { background: #e8f1e8; }
svg.timeline { border: 1px solid #ccc; background: #fcfcfc; margin: 6px 0; }
svg.timeline polyline { fill: none; stroke: #337ab7; stroke-width: 1.5; }
table { border-collapse: collapse; margin-top: 6px; }
td, th { border: 1px solid #ddd; padding: 2px 6px; font: 11px monospace; text-align: left; vertical-align: top; }
.legend .swatch { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<div id="summary"></div>
<div class="legend">blocks:<span class="swatch active_allocated"></span>allocated<span class="swatch active_pending_free"></span>pending free<span class="swatch inactive"></span>free</div>
<h2>Segments</h2>
<div id="segments"></div>
<h2>Allocated bytes over time</h2>
<div id="timelines"></div>
<h2>Largest live allocations</h2>
<table id="allocations"><tr><th>bytes</th><th>requested</th><th>resource</th><th>frames (innermost first)</th></tr></table>
<script id="snapshot" type="application/json">__SNAPSHOT__</script>
<script>
"use strict";
const snap = JSON.parse(document.getElementById("snapshot").textContent);
const fmt = (n) => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
};
const frameText = (frames, n) => (frames || []).slice(0, n).map((f) => `${f.name} (${String(f.filename).split("/").pop()}:${f.line})`);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };

const segments = snap.segments || [];
const traces = snap.device_traces || [];
const reserved = segments.reduce((a, s) => a + s.total_size, 0);
const allocated = segments.reduce((a, s) => a + s.allocated_size, 0);
const entries = traces.reduce((a, t) => a + t.length, 0);
document.getElementById("summary").textContent =
  `${segments.length} segments, ${fmt(reserved)} reserved, ${fmt(allocated)} allocated, ${entries} trace entries` +
  ((snap.rmm && snap.rmm.dropped_events) ? ` (${snap.rmm.dropped_events} older events dropped)` : "");

const segRoot = document.getElementById("segments");
for (const s of segments) {
  const row = el("div", "segment");
  row.dataset.address = s.address;
  row.appendChild(el("div", "label", `dev ${s.device} 0x${s.address.toString(16)} ${fmt(s.total_size)} ${s.resource || ""}`));
  const bar = el("div", "bar");
  for (const b of s.blocks) {
    const d = el("div", "block " + b.state);
    d.style.flexGrow = String(Math.max(b.size, 1));
    d.style.flexBasis = "0";
    d.title = [`${fmt(b.size)} ${b.state} at 0x${b.address.toString(16)}`, b.resource || "", ...frameText(b.frames, 8)].filter(Boolean).join("\\n");
    bar.appendChild(d);
  }
  row.appendChild(bar);
  segRoot.appendChild(row);
}

const NS = "http://www.w3.org/2000/svg";
const tlRoot = document.getElementById("timelines");
traces.forEach((trace, device) => {
  if (!trace.length) return;
  let live = 0;
  const pts = [];
  for (const e of trace) {
    if (e.action === "alloc") live += e.size;
    else if (e.action === "free_completed") live -= e.size;
    else continue;
    pts.push([e.time_us, live]);
  }
  if (!pts.length) return;
  const W = 900, H = 160;
  const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1);
  const lo = Math.min(0, ...pts.map((p) => p[1])), hi = Math.max(1, ...pts.map((p) => p[1]));
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "timeline");
  svg.setAttribute("width", W); svg.setAttribute("height", H);
  svg.dataset.device = device;
  const line = document.createElementNS(NS, "polyline");
  line.setAttribute("points", pts.map(([t, v]) => `${((t - t0) / (t1 - t0) * (W - 10) + 5).toFixed(1)},${(H - 5 - (v - lo) / (hi - lo) * (H - 10)).toFixed(1)}`).join(" "));
  svg.appendChild(line);
  const title = el("div", null, `device ${device}: ${pts.length} allocations and frees, peak ${fmt(hi)}`);
  tlRoot.appendChild(title);
  tlRoot.appendChild(svg);
});

const table = document.getElementById("allocations");
const live = [];
for (const s of segments) for (const b of s.blocks) if (b.state === "active_allocated") live.push(b);
live.sort((a, b) => b.size - a.size);
for (const b of live.slice(0, 50)) {
  const tr = el("tr", "allocation");
  tr.appendChild(el("td", null, String(b.size)));
  tr.appendChild(el("td", null, String(b.requested_size)));
  tr.appendChild(el("td", null, b.resource || ""));
  tr.appendChild(el("td", null, frameText(b.frames, 4).join(" <- ")));
  table.appendChild(tr);
}
document.body.dataset.rendered = "yes";
</script>
</body>
</html>
"""


def render(snapshot: dict[str, Any], title: str = "rmm memory snapshot") -> str:
    """The page for ``snapshot`` (what ``rmm.timeline.snapshot()`` returns)."""
    # Inside <script>, "</" would end the element: JSON allows escaping the slash.
    data = json.dumps(snapshot, default=list).replace("</", "<\\/")
    return _PAGE.replace("__TITLE__", html.escape(title)).replace("__SNAPSHOT__", data)
