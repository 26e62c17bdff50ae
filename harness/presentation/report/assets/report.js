(function () {
"use strict";
var M = JSON.parse(document.getElementById("report-data").textContent);
M.violations.forEach(function (v) {  // its words are on the page once: in the list
  var li = document.getElementById("violation-" + v.n);
  v.explanation = li ? li.querySelector(".expl").textContent : "";
});
var O = M.ops, N = O.t.length, END = Math.max(M.end, 1), NL = M.lanes.length;
var COL = ["#2f81f7", "#e85aad", "#f0a020", "#f0a020"];
var TYPE = ["ok", "fail", "info (unknown outcome)", "never completed"];
var FCOL = ["#0969da", "#8250df", "#1a7f37", "#bf3989", "#953800", "#57606a"];
var LABEL = 104, AXIS_H = 22, NEM_ROW = 22, DENSE = 4, LABEL_FONT = "11px system-ui,sans-serif";
var NEM_H = NEM_ROW * Math.max(1, M.faultRows || 1);  // one row per fault on at once
var RED = "#cf222e";
var ACQ = O.fs.indexOf("acquire");  // waiting to acquire is drawn hollow: not a held lock
var R = M.rejected || {lane: [], t: [], seq: [], tok: []};

// decode the ops: invoke times are delta-encoded microseconds; d < 0: never completed
var start = new Float64Array(N), end = new Float64Array(N), acc = 0, i, l;
var index = new Float64Array(N), accI = 0;  // history indexes, delta-encoded too
for (i = 0; i < N; i++) {
  acc += O.t[i]; start[i] = acc; end[i] = O.d[i] < 0 ? acc : acc + O.d[i];
  accI += O.i[i]; index[i] = accI;
}
// per lane: its ops (sorted by invoke), the longest op (to find what reaches into a window),
// and where its first unknown outcome begins (info runs on to the end of the history)
var lanes = [], maxDur = [], tail = [];
for (l = 0; l < NL; l++) { lanes.push([]); maxDur.push(0); tail.push(Infinity); }
for (i = 0; i < N; i++) {
  l = O.lane[i]; lanes[l].push(i);
  if (end[i] - start[i] > maxDur[l]) maxDur[l] = end[i] - start[i];
  if (O.ty[i] >= 2 && end[i] < tail[l]) tail[l] = end[i];
}
// a long run embeds only the ops near violations and fault boundaries: the others are a
// density per lane (one digit of outcome bits a column), and its tails count every op
var D = M.density;
if (D) D.lanes.forEach(function (s, k) { if (D.tails[k] >= 0) tail[k] = Math.min(tail[k], D.tails[k]); });
var laneOf = {};
M.laneProcs.forEach(function (p, k) { laneOf[p] = k; });
// drawn and flagged: the violations with a time; informational items only when selected
var V = M.violations.filter(function (v) { return v.t0 !== null && !v.info; });
var byTime = V.slice().sort(function (a, b) { return a.t0 - b.t0 || a.n - b.n; });

// harness serve's compare view opens the page at #compare=US: what #png shows, on a time scale
// to US (the longer run's end), in step with the other run's page (see inStep)
var CMP = /^#compare=(\d+)$/.exec(location.hash), SCALE = CMP ? Math.max(END, +CMP[1]) : END;
var view = {a: 0, b: SCALE}, sel = 0;  // sel: the number shown (1, 2, ...), 0: none
var cv = document.getElementById("timeline-canvas"), ctx = cv.getContext("2d");
var tip = document.getElementById("tip"), markers = document.getElementById("markers");
var selOp = null, panel = document.getElementById("op-panel");
var laneH = Math.max(8, Math.min(30, Math.floor(440 / Math.max(NL, 1))));
var H = AXIS_H + NEM_H + NL * laneH + 6, W = 800, PW = 600;
var DPR = window.devicePixelRatio || 1;

function X(t) { return LABEL + (t - view.a) / (view.b - view.a) * PW; }
function T(x) { return view.a + (x - LABEL) / PW * (view.b - view.a); }
function laneY(k) { return AXIS_H + NEM_H + k * laneH; }
function s3(us) { return (us / 1e6).toFixed(3); }
function fmtDur(us) {
  if (us < 1000) return (us / 1000).toFixed(2) + " ms";
  return us < 1e6 ? (us / 1000).toFixed(1) + " ms" : (us / 1e6).toFixed(3) + " s";
}
function fmtMs(ms) {
  return ms >= 1000 ? ms / 1000 + " s" : ms >= 1 ? ms + " ms" : Math.round(ms * 1000) + " µs";
}
function lowerBound(arr, t) {  // first position in a lane whose op starts at or after t
  var lo = 0, hi = arr.length;
  while (lo < hi) {
    var mid = (lo + hi) >> 1;
    if (start[arr[mid]] < t) lo = mid + 1; else hi = mid;
  }
  return lo;
}
function setup(c, h) {
  c.width = Math.round(W * DPR); c.height = Math.round(h * DPR);
  c.style.width = W + "px"; c.style.height = h + "px";
  var g = c.getContext("2d"); g.setTransform(DPR, 0, 0, DPR, 0, 0);
  return g;
}
function resize() {
  W = Math.max(480, cv.parentNode.clientWidth - 2); PW = W - LABEL - 10;
  cv.dataset.plot = LABEL + " " + PW;  // where time is drawn: its left edge and width (px),
  cv.dataset.lanes = laneY(0) + " " + laneH;  // where the lanes begin and their height
  ctx = setup(cv, H);
  CH.resize(setup);
}
function niceStep(span, px) {
  var raw = span / Math.max(1, px / 90), p = Math.pow(10, Math.floor(Math.log10(raw)));
  var m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
function clipX(t) { return Math.min(LABEL + PW, Math.max(LABEL, X(t))); }

// the timeline -----------------------------------------------------------------------------
function shadeFaults(g, y0, y1, labels) {
  M.faults.forEach(function (f) {
    if (f.stop < view.a || f.start > view.b) return;
    var x0 = clipX(f.start), x1 = Math.max(clipX(f.stop), x0 + 2);
    g.fillStyle = "rgba(110,119,129,.17)"; g.fillRect(x0, y0, x1 - x0, y1 - y0);
    if (!labels) return;
    var top = AXIS_H + NEM_ROW * (f.row || 0);
    g.fillStyle = f.error ? "#bc4c00" : f.background ? "#8c959f" : f.colour || "#57606a";
    g.fillRect(x0, top + 3, x1 - x0, NEM_ROW - 6);
  });
}
function faultText(f) {
  return (f.label || f.f + " " + f.targets.join(",")) + (f.error ? " (failed)" : "");
}
var flabels = document.getElementById("fault-labels");
function placeFaultLabels() {  // each window's words inside its bar: shortened to fit (the
  ctx.font = LABEL_FONT;  // whole in its tooltip and the fault table), none when no room
  M.faults.forEach(function (f) {
    var el = f.el;
    if (!el) {
      el = f.el = document.createElement("span"); el.className = "flabel";
      el.title = faultText(f); flabels.appendChild(el);
    }
    var x0 = clipX(f.start), x1 = Math.max(clipX(f.stop), x0 + 2), room = x1 - x0 - 8;
    var text = fitText(ctx, faultText(f), room);
    el.hidden = f.stop < view.a || f.start > view.b || !text;
    if (el.hidden) return;
    el.textContent = text; el.dataset.bar = x0 + " " + x1;
    el.style.left = (x0 + 3) + "px"; el.style.top = (AXIS_H + NEM_ROW * (f.row || 0) + 3) + "px";
  });
}
function fitText(g, text, room) {  // text, or its start and "…", in room px ("" if none fits)
  if (g.measureText(text).width <= room) return text;
  for (var n = text.length - 1; n > 0; n--) {
    var cut = text.slice(0, n).replace(/[\s·,(]+$/, "") + "…";
    if (g.measureText(cut).width <= room) return n > 2 ? cut : "";
  }
  return "";
}
function ticks() {  // the time axis's ticks in view: {t (us), label}, the charts' too
  var step = niceStep(view.b - view.a, PW), t = Math.ceil(view.a / step) * step, out = [];
  var digits = step < 1e4 ? 3 : step < 1e5 ? 2 : step < 1e6 ? 1 : 0;
  for (var k = 0; t <= view.b && k < 60; t += step, k++) {
    out.push({t: t, label: (t / 1e6).toFixed(digits) + " s"});
  }
  return out;
}
function axis(g, y, h, labels) {
  g.fillStyle = "#656d76"; g.strokeStyle = "#eaeef2"; g.lineWidth = 1;
  g.font = "11px system-ui,sans-serif";
  ticks().forEach(function (tk) {
    var x = Math.round(X(tk.t)) + 0.5;
    g.beginPath(); g.moveTo(x, y); g.lineTo(x, y + h); g.stroke();
    if (!labels) return;  // on white: a flag's line never hides it
    g.fillStyle = "#fff"; g.fillRect(x + 2, 3, g.measureText(tk.label).width + 2, 14);
    g.fillStyle = "#656d76"; g.fillText(tk.label, x + 3, 14);
  });
}
function densityMask(k) {  // the lane's ops not embedded, as outcome bits per pixel column
  var mask = new Uint8Array(PW + 1), s = D.lanes[k], w = END / D.cols, any = false;
  var c0 = Math.max(0, Math.floor(view.a / w)), c1 = Math.min(D.cols - 1, Math.floor(view.b / w));
  for (var c = c0; c <= c1; c++) {
    var m = s.charCodeAt(c) - 48;
    if (!m) continue;
    var p0 = Math.max(0, Math.floor(X(c * w) - LABEL));
    var p1 = Math.min(PW, Math.max(p0, Math.ceil(X((c + 1) * w) - LABEL) - 1));
    for (var p = p0; p <= p1; p++) mask[p] |= m;
    any = true;
  }
  return any ? mask : null;
}
function drawMask(mask, by, bh) {  // a column a pixel, every outcome in it stacked
  for (var c = 0; c <= PW; c++) {
    var m = mask[c];
    if (!m) continue;
    var h = bh / ((m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1)), yy = by;
    for (var b = 0; b < 3; b++) {
      if (m & (1 << b)) { ctx.fillStyle = COL[b]; ctx.fillRect(LABEL + c, yy, 1, h); yy += h; }
    }
  }
}
function drawLane(k) {  // returns ops in view: > 0 drawn per pixel column, < 0 one by one
  var ops = lanes[k], y = laneY(k);
  var lo = lowerBound(ops, view.a - maxDur[k]), hi = lowerBound(ops, view.b + 1);
  var by = y + laneH * 0.25, bh = Math.max(3, laneH * 0.55), n = hi - lo, j, o, c;
  var dens = D ? densityMask(k) : null;
  if (n > PW / DENSE) {  // more ops than room: one column a pixel, every outcome in it shown
    var mask = dens || new Uint8Array(PW + 1);
    for (j = lo; j < hi; j++) {
      o = ops[j];
      var c0 = Math.floor(X(start[o]) - LABEL), c1 = Math.floor(X(end[o]) - LABEL);
      if (c1 < 0 || c0 > PW) continue;
      c0 = Math.max(0, c0); c1 = Math.min(PW, c1);
      var bit = 1 << Math.min(O.ty[o], 2);
      for (c = c0; c <= c1; c++) mask[c] |= bit;
    }
    drawMask(mask, by, bh);
    return n;
  }
  if (dens) {  // ops not embedded, faint beneath the single ops that are
    ctx.globalAlpha = 0.4; drawMask(dens, by, bh); ctx.globalAlpha = 1; densityInView = true;
  }
  for (j = lo; j < hi; j++) {
    o = ops[j];
    var x0 = X(start[o]), x1 = X(end[o]);
    if (x1 < LABEL || x0 > LABEL + PW) continue;
    x0 = Math.max(LABEL, x0); x1 = Math.min(LABEL + PW, Math.max(x1, x0 + 2));
    if (O.f[o] === ACQ && x1 - x0 > 5) {  // an acquire: the wait, hollow (held is green)
      ctx.fillStyle = "rgba(255,255,255,.9)"; ctx.fillRect(x0, by, x1 - x0, bh);
      ctx.strokeStyle = COL[O.ty[o]]; ctx.lineWidth = 1.5; ctx.setLineDash([5, 3]);
      ctx.strokeRect(x0 + 0.75, by + 0.75, x1 - x0 - 1.5, bh - 1.5); ctx.setLineDash([]);
      ctx.fillStyle = COL[O.ty[o]]; ctx.fillRect(Math.max(x0, x1 - 3), by, 3, bh);
      continue;
    }
    ctx.fillStyle = COL[O.ty[o]]; ctx.fillRect(x0, by, x1 - x0, bh);
    if (x1 - x0 > 5) {
      ctx.strokeStyle = "rgba(0,0,0,.35)"; ctx.lineWidth = 1;
      ctx.strokeRect(x0 + 0.5, by + 0.5, x1 - x0 - 1, bh - 1);
    }
  }
  return -n;
}
function drawSpans(g) {  // lock held: a light band over the lane and a solid strip at its top
  var S = M.spans;
  if (D && D.held) drawHeld(g);
  for (var s = 0; s < S.s.length; s++) {
    var e = S.e[s] < 0 ? END : S.e[s];
    if (e < view.a || S.s[s] > view.b) continue;
    var x0 = clipX(S.s[s]), x1 = Math.max(clipX(e), x0 + 1), y = laneY(S.lane[s]);
    g.fillStyle = "rgba(45,164,78,.20)"; g.fillRect(x0, y + 1, x1 - x0, laneH - 2);
    g.fillStyle = "#2da44e"; g.fillRect(x0, y + 1, x1 - x0, Math.max(2, laneH * 0.14));
  }
}
function drawHeld(g) {  // spans not embedded: a pixel column each where the lock was held
  var w = END / D.cols, c0 = Math.max(0, Math.floor(view.a / w));
  var c1 = Math.min(D.cols - 1, Math.floor(view.b / w));
  g.fillStyle = "rgba(45,164,78,.20)";
  D.held.forEach(function (s, k) {
    for (var c = c0; c <= c1; c++) {
      if (s.charCodeAt(c) !== 49) continue;
      var x0 = clipX(c * w), x1 = Math.max(clipX((c + 1) * w), x0 + 1);
      g.fillRect(x0, laneY(k) + 1, x1 - x0, laneH - 2);
    }
  });
}
function drawRejected(g) {  // writes the resource refused (stale token): a dark red cross
  var drawn = 0;
  for (var r = 0; r < R.t.length; r++) {
    if (R.t[r] < view.a || R.t[r] > view.b) continue;
    drawn++;
    var x = X(R.t[r]), y = laneY(R.lane[r]) + laneH / 2, s = Math.max(4, laneH * 0.3);
    g.strokeStyle = "#fff"; g.lineWidth = 5; cross(); g.strokeStyle = "#82071e"; g.lineWidth = 2.5;
    cross();
  }
  document.body.dataset.rejectedDrawn = String(drawn);
  function cross() {
    g.beginPath(); g.moveTo(x - s, y - s); g.lineTo(x + s, y + s);
    g.moveTo(x - s, y + s); g.lineTo(x + s, y - s); g.stroke();
  }
}
function drawViolation(g, v) {
  var x0 = X(v.t0), x1 = Math.max(X(v.t1), x0 + 3), on = v.n === sel;
  var ls = [];
  v.procs.forEach(function (p) { if (laneOf[p] !== undefined) ls.push(laneOf[p]); });
  if (!ls.length) for (var k = 0; k < NL; k++) ls.push(k);
  g.strokeStyle = v.info ? "#9a6700" : RED; g.lineWidth = on ? 3 : 1.2;
  ls.forEach(function (k) {
    if (on) {
      g.fillStyle = v.info ? "rgba(154,103,0,.15)" : "rgba(207,34,46,.18)";
      g.fillRect(x0, laneY(k), x1 - x0, laneH);
    }
    g.strokeRect(x0, laneY(k) + 1, x1 - x0, laneH - 2);
  });
  g.lineWidth = on ? 2 : 1; g.setLineDash([3, 3]); g.beginPath();
  g.moveTo(x0, 0); g.lineTo(x0, on ? H : AXIS_H); g.stroke(); g.setLineDash([]);
}
function draw() {
  var g = ctx, k;
  g.clearRect(0, 0, W, H); g.fillStyle = "#fff"; g.fillRect(0, 0, W, H);
  for (k = 1; k < NL; k += 2) { g.fillStyle = "#f6f8fa"; g.fillRect(0, laneY(k), W, laneH); }
  axis(g, 0, H, true); shadeFaults(g, AXIS_H, H, true); drawSpans(g);
  var dense = 0, single = 0;
  densityInView = false;
  for (k = 0; k < NL; k++) {
    var n = drawLane(k);
    if (n > 0) dense += n; else single -= n;
    if (tail[k] < view.b) {  // an unknown outcome may take effect any time until the end
      var y = laneY(k) + laneH * 0.9;
      g.strokeStyle = "#f0a020"; g.setLineDash([4, 3]); g.lineWidth = 2; g.beginPath();
      g.moveTo(clipX(tail[k]), y); g.lineTo(clipX(END), y); g.stroke(); g.setLineDash([]);
    }
  }
  drawRejected(g);
  V.forEach(function (v) {
    if (v.n !== sel && v.c1 >= view.a && v.c0 <= view.b) drawViolation(g, v);
  });
  var selected = M.violations[sel - 1];
  if (selected && selected.t0 !== null) drawViolation(g, selected);
  if (selOp) {  // the op whose details are in the panel
    g.strokeStyle = "#1f2328"; g.lineWidth = 2;
    var sx0 = clipX(start[selOp.o]), sx1 = Math.max(clipX(end[selOp.o]), sx0 + 2);
    g.strokeRect(sx0 - 1, laneY(selOp.k) + 1, sx1 - sx0 + 2, laneH - 2);
  }
  axis(g, 0, 0, true);  // the time labels again, over the flags' lines
  g.fillStyle = "#fff"; g.fillRect(0, AXIS_H, LABEL - 4, H);
  g.fillStyle = "#1f2328"; g.font = "12px system-ui,sans-serif";
  g.fillText("faults", 8, AXIS_H + 15);
  for (k = 0; k < NL; k++) g.fillText(M.lanes[k], 8, laneY(k) + laneH / 2 + 4);
  var unflagged = placeMarkers(); placeFaultLabels(); CH.draw(); inStep();
  cv.dataset.ticks = ticks().map(function (tk) {  // each time label and its x: for a test
    return tk.label + "@" + Math.round(X(tk.t));
  }).join("|");
  document.getElementById("window").textContent =
    s3(view.a) + " – " + s3(view.b) + " s  (" + fmtDur(view.b - view.a) + " in view)";
  document.getElementById("mode").textContent = (dense
    ? dense.toLocaleString() + " ops in view are drawn per pixel column (more ops than " +
      "pixels: a column shows every outcome in it)" +
      (single ? ", " + single.toLocaleString() + " one by one" : "") +
      ". Zoom in to see single ops."
    : single.toLocaleString() + " ops in view, each drawn as its own bar." +
      (densityInView ? " Faint columns: ops this page does not embed one by one." : "")) +
    (unflagged ? " " + unflagged + " of the violations in view are outlined without a flag " +
      "(no room for one): zoom in, or step through them all with ‹ previous / next ›." : "");
  document.body.dataset.unflagged = String(unflagged);
}
function placeMarkers() {  // HTML flags over the timeline: two rows, the selected one on top;
  var rows = [-1e9, -1e9], unflagged = 0, edge = markers.clientWidth;  // returns how many in
  byTime.forEach(function (v) {  // view got no flag; left to right, each row's right edge kept
    var m = v.mark || (v.mark = document.getElementById("vm-" + v.n));
    if (!m) return;
    var x = X(v.t0), inView = v.t0 >= view.a && v.t0 <= view.b, row = -1;
    m.style.display = "block";
    var w = m.offsetWidth, flip = x - 1 + w > edge, left = flip ? x + 1 - w : x - 1;
    if (inView) {
      for (var r = 0; r < rows.length && row < 0; r++) if (left >= rows[r] + 3) row = r;
    }
    if (v.n === sel && inView && row < 0) row = 0;
    if (row < 0) {
      m.style.display = "none"; m.dataset.visible = "0"; if (inView) unflagged++;
      return;
    }
    rows[row] = left + w;
    m.dataset.visible = "1"; m.classList.toggle("flip", flip);
    m.style.left = left + "px"; m.style.top = (2 + row * 18) + "px";
  });
  return unflagged + (sel ? hideUnder(document.getElementById("vm-" + sel)) : 0);
}
function hideUnder(top) {  // the selected flag was put on row 0 without room: the flags it
  if (!top || top.dataset.visible !== "1") return 0;  // would cover give way (how many)
  var a = top.getBoundingClientRect(), hid = 0;
  byTime.forEach(function (v) {
    var m = v.mark;
    if (!m || m === top || m.dataset.visible !== "1") return;
    var b = m.getBoundingClientRect();
    if (b.left < a.right && a.left < b.right && b.top < a.bottom && a.top < b.bottom) {
      m.style.display = "none"; m.dataset.visible = "0"; hid++;
    }
  });
  return hid;
}

// the charts (charts.js) share the view, the axis and the zoom ------------------------------
var densityInView = false;
var maxDurAll = Math.max.apply(null, maxDur.concat([0]));
function firstAt(t) {  // the first embedded op (in invoke order) that starts at or after t
  var lo = 0, hi = N;
  while (lo < hi) { var mid = (lo + hi) >> 1; if (start[mid] < t) lo = mid + 1; else hi = mid; }
  return lo;
}
var CH = window.ReportCharts({
  M: M, view: view, X: X, T: T, clipX: clipX, ticks: ticks, fmtMs: fmtMs, s3: s3,
  violations: V, fitText: fitText,
  selected: function () { return sel; },
  geo: function () { return {W: W, LABEL: LABEL, PW: PW}; },
  ops: {n: N, start: start, d: O.d, ty: O.ty, f: O.f, fs: O.fs, maxDur: maxDurAll},
  lowerBound: firstAt,
  zoomAt: function (t, f) { zoomAt(t, f); },
  panBy: function (dt) { view.a += dt; view.b += dt; clampView(); redraw(); },
  fit: function () { fit(); },
});

// selection and the callout ----------------------------------------------------------------
var callout = document.getElementById("callout");
function select(n, zoom) {  // n: the number the page shows (#v-1: the first)
  var v = M.violations[n - 1];
  if (!v) return;
  sel = n;
  var li = document.getElementById("violation-" + n);
  if (li) unfold(li.parentNode);
  document.querySelectorAll(".sel").forEach(function (e) { e.classList.remove("sel"); });
  ["violation-", "vm-"].forEach(function (p) {
    var e = document.getElementById(p + n);
    if (e) e.classList.add("sel");
  });
  var head = (v.info ? "Informational (" + v.check + " judged it harmless) " : "Violation ") +
    n + " of " + M.violations.length + " · " + v.check + " · " + v.kind +
    (v.total > 1 ? " (" + (v.rank + 1) + " of " + v.total + ")" : "");
  callout.classList.toggle("info", !!v.info);
  head += v.t0 !== null ? " · " + s3(v.t0) + " – " + s3(v.t1) + " s" : " · no time recorded";
  if (v.procs.length) head += " · processes " + v.procs.join(", ");
  callout.hidden = false;
  callout.querySelector(".head").textContent = head;
  callout.querySelector(".expl").textContent = v.explanation;
  callout.querySelector("a.list").href = "#violation-" + n;
  if (zoom && v.t0 !== null) {
    var pad = Math.max(2e5, (v.c1 - v.c0) * 0.25);
    view.a = Math.max(0, v.c0 - pad); view.b = Math.min(SCALE, v.c1 + pad);
    if (view.b - view.a < 1000) view.b = view.a + 1000;
  }
  draw();
}
function fromHash() {
  var m = /^#v-(\d+)$/.exec(location.hash);
  if (m) select(+m[1], true);
  return !!m;
}
window.addEventListener("hashchange", fromHash);
callout.querySelector(".prev").onclick = function () {
  if (sel > 1) location.hash = "#v-" + (sel - 1);
};
callout.querySelector(".next").onclick = function () {
  if (sel < M.violations.length) location.hash = "#v-" + (sel + 1);
};
document.querySelectorAll("a.show").forEach(function (a) {
  a.addEventListener("click", function () {
    document.getElementById("timeline").scrollIntoView();
  });
});

// zoom, pan, hover -------------------------------------------------------------------------
function clampView() {
  var span = view.b - view.a;
  if (view.a < 0) { view.a = 0; view.b = span; }
  if (view.b > SCALE * 1.01) { view.b = SCALE * 1.01; view.a = Math.max(0, view.b - span); }
}
var pending = false;
function flush() { if (pending) { pending = false; draw(); } }
function redraw() {  // at most one draw a frame, however many events asked for one
  if (pending) return;
  pending = true;
  requestAnimationFrame(flush);
  setTimeout(flush, 100);  // frames do not come in background tabs and some headless modes
}
function zoomAt(t, factor) {
  var span = Math.min(SCALE * 1.01, Math.max(1000, (view.b - view.a) * factor));
  var f = (t - view.a) / (view.b - view.a);
  view.a = t - f * span; view.b = view.a + span; clampView(); redraw();
}
function pan(frac) {
  var s = (view.b - view.a) * frac;
  view.a += s; view.b += s; clampView(); redraw();
}
function fit() { view.a = 0; view.b = SCALE; redraw(); }
var told = view.a + " " + view.b;  // the view last told to (or by) the compare page: both
// pages begin with the whole scale, so only a zoom or a pan is news
function inStep() {  // a zoom or pan here: the compare page passes it on to the other run's
  var v = view.a + " " + view.b;
  if (!CMP || v === told) return;
  told = v;
  parent.postMessage({compareView: [view.a, view.b]}, "*");
}
window.addEventListener("message", function (ev) {
  var v = ev.data && ev.data.compareView;
  if (!CMP || !v || ev.source !== parent) return;
  told = v.join(" "); view.a = v[0]; view.b = v[1]; redraw();
});
function mid() { return (view.a + view.b) / 2; }
document.getElementById("zoom-in").onclick = function () { zoomAt(mid(), 0.5); };
document.getElementById("zoom-out").onclick = function () { zoomAt(mid(), 2); };
document.getElementById("zoom-fit").onclick = fit;
document.getElementById("pan-left").onclick = function () { pan(-0.4); };
document.getElementById("pan-right").onclick = function () { pan(0.4); };
cv.addEventListener("wheel", function (e) {
  if (e.offsetX < LABEL) return;
  e.preventDefault(); zoomAt(T(e.offsetX), Math.pow(1.0015, e.deltaY));
}, {passive: false});
var drag = null;
cv.addEventListener("mousedown", function (e) {
  drag = {x: e.clientX, a: view.a, b: view.b}; cv.classList.add("drag");
});
cv.addEventListener("click", function (e) {  // not a drag: what is under it, in the panel
  if (dragged) return;
  var text = hover(e.offsetX, e.offsetY);
  selOp = picked;
  panel.hidden = !text;
  panel.querySelector(".lines").textContent = text;
  draw();
});
var dragged = false;  // the click that ends a drag selects nothing
window.addEventListener("mouseup", function (e) {
  dragged = !!drag && Math.abs(e.clientX - drag.x) > 3;
  drag = null; cv.classList.remove("drag");
});
window.addEventListener("mousemove", function (e) {
  if (!drag) return;
  var dt = (e.clientX - drag.x) / PW * (drag.b - drag.a);
  view.a = drag.a - dt; view.b = drag.b - dt; clampView(); redraw();
});
cv.addEventListener("dblclick", fit);
cv.addEventListener("mouseleave", function () { tip.hidden = true; });
cv.addEventListener("mousemove", function (e) {
  var text = drag ? "" : hover(e.offsetX, e.offsetY);
  tip.hidden = !text;
  if (!text) return;
  tip.textContent = text;
  tip.style.left = Math.min(window.innerWidth - 380, e.clientX + 14) + "px";
  tip.style.top = (e.clientY + 14) + "px";
});
function describeFault(f) {
  var s = faultText(f) + "\n" + f.f + " on " + (f.targets.join(", ") || "-") + ": " + s3(f.start) + " – " +
    s3(f.stop) + " s (" + fmtDur(f.stop - f.start) + ")" +
    (f.background ? ", in the background" : "");
  if (f.params) {
    s += "\n" + Object.keys(f.params).map(function (k) {
      return k + " = " + f.params[k];
    }).join(", ");
  }
  if (f.missed) s += "\nmissed " + f.missed.join(", ") + " (aimed at " + s3(f.aimed) + " s)";
  if (f.error) s += "\nfailed: " + f.error;
  if (f.open) s += "\nnever stopped before the history ends";
  return s;
}
function describeOp(k, o) {
  var out = [M.lanes[k] + " · " + O.fs[O.f[o]] + " · " + TYPE[O.ty[o]]];
  out.push("invoked " + (start[o] / 1e6).toFixed(4) + " s" + (O.d[o] < 0 ? ", never completed"
    : ", completed " + (end[o] / 1e6).toFixed(4) + " s (" + fmtDur(end[o] - start[o]) + ")"));
  if (O.ty[o] >= 2) out.push("may take effect at any later time: dashed on to the end");
  if (O.texts[O.x[o]]) out.push(O.texts[O.x[o]]);
  out.push("history index " + index[o]);
  return out;
}
var picked = null;  // the op hover last described: {k: lane, o: op}
function hover(x, y) {
  picked = null;
  if (x < LABEL) return "";
  var t = T(x), slack = (view.b - view.a) / PW * 3, out = [], j, s;
  if (y >= AXIS_H && y < AXIS_H + NEM_H) {
    var row = Math.floor((y - AXIS_H) / NEM_ROW);
    M.faults.forEach(function (f) {
      if ((f.row || 0) === row && t >= f.start - slack && t <= f.stop + slack) {
        out.push(describeFault(f));
      }
    });
    return out.join("\n");
  }
  var k = Math.floor((y - AXIS_H - NEM_H) / laneH);
  if (k < 0 || k >= NL) return "";
  var ops = lanes[k], lo = lowerBound(ops, view.a - maxDur[k]), hi = lowerBound(ops, view.b + 1);
  var best = -1, bestD = Infinity, count = [0, 0, 0, 0];
  for (j = lo; j < hi; j++) {
    var o = ops[j];
    if (t < start[o] - slack || t > end[o] + slack) continue;
    count[O.ty[o]]++;
    var d = t < start[o] ? start[o] - t : t > end[o] ? t - end[o] : 0;
    if (d < bestD) { bestD = d; best = o; }
  }
  var many = count[0] + count[1] + count[2] + count[3];
  if (hi - lo > PW / DENSE && many > 1) {
    out.push(M.lanes[k] + " around " + s3(t) + " s: " + count[0] + " ok, " + count[1] +
      " fail, " + (count[2] + count[3]) + " info (zoom in for single ops)");
  } else if (best >= 0) {
    out = out.concat(describeOp(k, best)); picked = {k: k, o: best};
  }
  var S = M.spans;
  for (s = 0; s < S.s.length; s++) {
    var e = S.e[s] < 0 ? END : S.e[s];
    if (S.lane[s] !== k || t < S.s[s] || t > e) continue;
    out.push("holds the lock " + s3(S.s[s]) + " – " +
      (S.e[s] < 0 ? "the end (never released)" : s3(e) + " s") +
      (S.tok[s] >= 0 ? ", token " + S.tok[s] : ""));
  }
  for (s = 0; s < R.t.length; s++) {
    if (R.lane[s] === k && Math.abs(t - R.t[s]) <= slack * 2) {
      out.push("write rejected by the resource (stale token" +
        (R.tok[s] >= 0 ? " " + R.tok[s] : "") + "), resource seq " + R.seq[s]);
    }
  }
  V.forEach(function (v) {
    var inLane = !v.procs.length || v.procs.indexOf(M.laneProcs[k]) >= 0;
    if (inLane && t >= v.t0 - slack && t <= v.t1 + slack) {
      out.push("violation " + v.n + ": " + v.explanation);
    }
  });
  M.faults.forEach(function (f) {
    if (t >= f.start && t <= f.stop) out.push("during " + f.f + " on " + f.targets.join(", "));
  });
  return out.join("\n");
}

// long lists and tables: their first rows (the CSS hides the others while the list is
// data-folded), and a button that says how many there are --------------------------------
var KEEP = 6, FOLD = 10;
function unfold(el) {
  if (!el || el.dataset.folded !== "1") return;
  el.dataset.folded = "0";
  if (el.nextElementSibling && el.nextElementSibling.className === "show-all") {
    el.nextElementSibling.remove();
  }
}
document.querySelectorAll("main ol.violations, main table:not(.linearization)").forEach(function (el) {
  var n = el.tagName === "OL" ? el.children.length : (el.tBodies[0] || el).rows.length;
  if (n <= FOLD) return;
  el.dataset.folded = "1";
  var b = document.createElement("button");
  b.className = "show-all"; b.type = "button"; b.onclick = function () { unfold(el); };
  b.textContent = "show all " + n.toLocaleString() + " (" + KEEP + " shown)";
  el.parentNode.insertBefore(b, el.nextSibling);
});
function reveal() {  // a link to a folded row opens its list
  var id = decodeURIComponent(location.hash.slice(1)), t = id && document.getElementById(id);
  var host = t && t.closest("[data-folded='1']");
  if (host) { unfold(host); t.scrollIntoView(); }
}
window.addEventListener("hashchange", reveal);

// the timeline, its flags and labels, and the charts as one PNG: what pastes into an issue --
function paint(g, el, ox, oy) {  // an element's background and its own words, where they are
  var r = el.getBoundingClientRect(), cs = getComputedStyle(el), x = r.left - ox, y = r.top - oy;
  if (!r.width || !r.height) return;
  if (el.tagName === "CANVAS") { g.drawImage(el, x, y, r.width, r.height); return; }
  if (!/^(rgba\(0, 0, 0, 0\)|transparent)$/.test(cs.backgroundColor)) {
    g.fillStyle = cs.backgroundColor; g.fillRect(x, y, r.width, r.height);
  }
  g.fillStyle = cs.color; g.textBaseline = "middle";
  g.font = cs.fontStyle + " " + cs.fontWeight + " " + cs.fontSize + " " + cs.fontFamily;
  var range = document.createRange();
  el.childNodes.forEach(function (c) {
    if (c.nodeType !== 3) return;
    var re = /\S+/g, m;
    while ((m = re.exec(c.textContent))) {  // word by word, where the layout put each
      range.setStart(c, m.index); range.setEnd(c, m.index + m[0].length);
      var b = range.getBoundingClientRect();
      if (b.width) g.fillText(m[0], b.left - ox, b.top + b.height / 2 - oy);
    }
  });
}
var PAINTED = [".tl-wrap", "#markers", ".vmark", "#timeline-canvas", ".flabel", "#callout",
  "#charts h2",
  "#callout .head", "#callout .expl", "#op-panel", "#op-panel .lines", "#timeline .legend span",
  "#timeline .legend i", "#timeline .legend b", "#charts .chart .label", "#charts canvas",
  "#chart-legend span", "#chart-legend i"];
function timelinePng() {  // laid out as `harness report --png` shows it (body.png), meanwhile
  var was = document.body.classList.contains("png");
  document.body.classList.add("png");
  try { return composed(); } finally { if (!was) document.body.classList.remove("png"); }
}
function composed() {
  var els = [], box = {l: 1e9, t: 1e9, r: -1e9, b: -1e9};
  PAINTED.forEach(function (q) {
    document.querySelectorAll(q).forEach(function (el) {
      if (el.hidden || el.closest("[hidden]") || getComputedStyle(el).display === "none") return;
      var r = el.getBoundingClientRect();
      if (!r.width) return;
      els.push(el);
      box.l = Math.min(box.l, r.left); box.t = Math.min(box.t, r.top);
      box.r = Math.max(box.r, r.right); box.b = Math.max(box.b, r.bottom);
    });
  });
  var HEAD = 28, w = Math.ceil(box.r - box.l) + 16, h = Math.ceil(box.b - box.t) + HEAD + 8;
  var c = document.createElement("canvas");
  c.width = Math.round(w * DPR); c.height = Math.round(h * DPR);
  var g = c.getContext("2d"); g.scale(DPR, DPR);
  g.fillStyle = "#fff"; g.fillRect(0, 0, w, h);
  g.fillStyle = "#1f2328"; g.font = "bold 14px system-ui,sans-serif"; g.textBaseline = "middle";
  g.fillText(document.title + "   " + document.getElementById("window").textContent, 8, 15);
  els.forEach(function (el) { paint(g, el, box.l - 8, box.t - HEAD); });
  return c;
}
document.getElementById("save-png").onclick = function () {
  var a = document.createElement("a");
  a.href = timelinePng().toDataURL("image/png");
  a.download = (document.title.replace(/[^\w.-]+/g, "-").slice(0, 80) || "timeline") + ".png";
  document.body.appendChild(a); a.click(); a.remove();
};
window.ReportPng = timelinePng;
if (location.hash === "#png" || CMP) document.body.classList.add("png");  // report --png

window.addEventListener("resize", function () { resize(); redraw(); });
window.onerror = function (msg) { document.body.dataset.error = String(msg); };
resize(); CH.legend();
if (!fromHash()) {
  var first = M.violations.filter(function (v) { return !v.info; })[0];
  if (first) select(first.n, false); else draw();
}
var ms = Math.round(performance.now());
document.body.dataset.ready = "1";
document.body.dataset.height = String(document.documentElement.scrollHeight);
if (CMP) parent.postMessage({compareHeight: document.body.dataset.height}, "*");
document.body.dataset.renderMs = String(ms);
document.getElementById("drawn").textContent = "page opened and drawn in " + ms + " ms";
})();
