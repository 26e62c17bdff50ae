// The report's charts: throughput, latency quantiles and latency per op, on the timeline's own
// time axis (same left edge, same width, same view: zooming or panning either moves both).
// report.js hands over what they share; the figures come from the model (harness/presentation/
// report/charts.py), computed from every op, so they stay exact whatever the page embeds.
window.ReportCharts = function (S) {
  "use strict";
  var M = S.M, Sr = M.series, FS = Object.keys(Sr.fs), G = M.latencyGrid;
  var FCOL = ["#0969da", "#8250df", "#1a7f37", "#bf3989", "#953800", "#57606a"];
  var OUT = {ok: "#2f81f7", fail: "#e85aad", info: "#f0a020"};
  var DASH = {ok: [], fail: [6, 3], info: [2, 3]};
  var QDASH = {p50: [], p95: [6, 3], p99: [2, 2]}, QW = {p50: 2, p95: 1.4, p99: 1.2};
  var RED = "#cf222e", TOP = 20, AXIS = 20, FONT = "11px system-ui,sans-serif";
  var list = [
    {id: "throughput-canvas", h: 190, draw: throughput},
    {id: "latency-canvas", h: 240, draw: latency},
  ];
  list.forEach(function (c) { c.el = document.getElementById(c.id); });
  list = list.filter(function (c) { return c.el; });

  function fcol(f) { return FCOL[FS.indexOf(f) % FCOL.length]; }
  function bucketsInView() {
    var w = Sr.width;
    return [Math.max(0, Math.floor(S.view.a / w) - 1),
            Math.min(Sr.n - 1, Math.ceil(S.view.b / w) + 1)];
  }

  // what every chart has: fault bands named in their own colours, the time axis under the
  // plot, violations marked
  function frame(g, c) {
    var geo = S.geo(), bot = c.h - AXIS;
    g.clearRect(0, 0, geo.W, c.h); g.fillStyle = "#fff"; g.fillRect(0, 0, geo.W, c.h);
    g.save(); g.beginPath(); g.rect(geo.LABEL, 0, geo.PW, c.h); g.clip();
    g.font = FONT;
    var boxes = [];  // each name drawn, inside its window (shortened to fit: the whole in
    M.faults.forEach(function (f) {  // the timeline's tooltip and the fault table)
      if (f.stop < S.view.a || f.start > S.view.b) return;
      var x0 = S.clipX(f.start), x1 = Math.max(S.clipX(f.stop), x0 + 2);
      var col = f.error ? "#bc4c00" : f.colour || "#57606a";
      g.globalAlpha = f.background ? 0.08 : 0.14; g.fillStyle = col;
      g.fillRect(x0, TOP, x1 - x0, bot - TOP);
      g.globalAlpha = 1; g.fillRect(x0, TOP - 4, x1 - x0, 3);
      var name = S.fitText(g, (f.label || f.f) + (f.error ? " (failed)" : ""), x1 - x0 - 4);
      if (!name) return;
      g.fillText(name, x0 + 2, TOP - 7);
      boxes.push([x0 + 2, g.measureText(name).width, x1, name].join(","));
    });
    g.restore();
    var ticks = S.ticks(), labels = [];
    g.strokeStyle = "#eaeef2"; g.lineWidth = 1; g.fillStyle = "#656d76"; g.font = FONT;
    ticks.forEach(function (t) {
      var x = Math.round(S.X(t.t)) + 0.5;
      g.beginPath(); g.moveTo(x, TOP); g.lineTo(x, bot + 4); g.stroke();
      g.fillText(t.label, x + 3, c.h - 6);
      labels.push(t.label);
    });
    g.strokeStyle = "#8c959f";
    g.beginPath(); g.moveTo(geo.LABEL, bot + 0.5); g.lineTo(geo.LABEL + geo.PW, bot + 0.5);
    g.stroke();
    c.el.dataset.axis = labels.join(" | ");
    c.el.dataset.labels = boxes.join("|");  // x, width, the window's end, text: for a test
    c.el.dataset.plot = geo.LABEL + "," + geo.PW;
  }
  function marks(g, c) {  // violations: a red span and line, numbered where there is room
    var geo = S.geo(), bot = c.h - AXIS, flags = [];
    g.save(); g.beginPath(); g.rect(geo.LABEL, 0, geo.PW, c.h); g.clip();
    g.font = "bold 10px system-ui,sans-serif";
    var shown = S.violations.filter(function (v) { return v.t1 >= S.view.a && v.t0 <= S.view.b; });
    shown.sort(function (a, b) {  // the selected one first, then left to right
      return (b.n === S.selected()) - (a.n === S.selected()) || a.t0 - b.t0;
    });
    shown.forEach(function (v) {  // a flag where it covers none placed, else none
      var x = Math.max(geo.LABEL, Math.min(S.X(v.t0), geo.LABEL + geo.PW - 1));
      var w = g.measureText(String(v.n)).width + 5;
      var l = x + w > geo.LABEL + geo.PW ? x - w : x;
      if (flags.every(function (f) { return l >= f[0] + f[1] + 1 || l + w + 1 <= f[0]; })) {
        flags.push([l, w, v.n]);
      }
    });
    c.el.dataset.flags = flags.map(function (f) { return f.join(","); }).join("|");
    shown.forEach(function (v) {
      if (v.t1 < S.view.a || v.t0 > S.view.b) return;
      var x0 = S.X(v.t0), x1 = Math.max(S.X(v.t1), x0 + 1), on = v.n === S.selected();
      g.fillStyle = on ? "rgba(207,34,46,.20)" : "rgba(207,34,46,.08)";
      g.fillRect(x0, TOP, x1 - x0, bot - TOP);
      g.strokeStyle = RED; g.lineWidth = on ? 2 : 1; g.setLineDash([3, 3]);
      g.beginPath(); g.moveTo(x0, TOP); g.lineTo(x0, bot); g.stroke(); g.setLineDash([]);
    });
    flags.forEach(function (f) {
      g.fillStyle = f[2] === S.selected() ? "#82071e" : RED; g.fillRect(f[0], bot - 14, f[1], 14);
      g.fillStyle = "#fff"; g.fillText(String(f[2]), f[0] + 2.5, bot - 3);
    });
    g.restore();
  }
  function yTicks(g, ticks, Y, fmt) {
    var geo = S.geo();
    g.font = FONT;
    ticks.forEach(function (t) {
      var y = Math.round(Y(t)) + 0.5;
      g.fillStyle = "#656d76"; g.fillText(fmt(t), 6, y + 4);
      g.strokeStyle = "#eaeef2"; g.lineWidth = 1;
      g.beginPath(); g.moveTo(geo.LABEL, y); g.lineTo(geo.LABEL + geo.PW, y); g.stroke();
    });
  }
  function line(g, vals, Y, colour, width, dash) {
    var b = bucketsInView(), pen = false, w = Sr.width;
    g.strokeStyle = colour; g.lineWidth = width; g.setLineDash(dash); g.beginPath();
    for (var k = b[0]; k <= b[1]; k++) {
      var v = vals[k];
      if (v === null || v === undefined) { pen = false; continue; }
      var x = S.X((k + 0.5) * w), y = Y(v);
      if (pen) g.lineTo(x, y); else g.moveTo(x, y);
      pen = true;
    }
    g.stroke(); g.setLineDash([]);
  }

  // throughput: completions a second per f (colour) and outcome (ok solid, fail dashed, info
  // dotted)
  function throughput(g, c) {
    var geo = S.geo(), bot = c.h - AXIS, b = bucketsInView(), hi = 0;
    frame(g, c);
    FS.forEach(function (f) {
      ["ok", "fail", "info"].forEach(function (o) {
        for (var k = b[0]; k <= b[1]; k++) hi = Math.max(hi, Sr.fs[f][o][k]);
      });
    });
    if (hi <= 0) { empty(g, c, "no op completed in view"); return; }
    hi = niceTop(hi);
    function Y(v) { return bot - v / hi * (bot - TOP - 4); }
    yTicks(g, [0, hi / 2, hi], Y, function (t) { return fmtRate(t); });
    g.save(); g.beginPath(); g.rect(geo.LABEL, 0, geo.PW, c.h); g.clip();
    FS.forEach(function (f) {
      ["info", "fail", "ok"].forEach(function (o) {
        if (Sr.fs[f][o].some(function (x) { return x > 0; })) {
          line(g, Sr.fs[f][o], Y, fcol(f), o === "ok" ? 1.8 : 1.4, DASH[o]);
        }
      });
    });
    g.restore();
    marks(g, c);
  }

  // latency: every op a point (or, for a long run, a cell counting the ops in it), coloured by
  // outcome, and each f's p50 / p95 / p99 over time; log scale
  function latency(g, c) {
    var geo = S.geo(), bot = c.h - AXIS, lo = Infinity, hi = 0, b = bucketsInView();
    var pts = G ? null : points(), k;
    frame(g, c);
    if (pts) {
      for (k = 0; k < pts.length; k += 3) { lo = Math.min(lo, pts[k + 1]); hi = Math.max(hi, pts[k + 1]); }
    } else {
      eachCell(function (x0, x1, row, n) {
        lo = Math.min(lo, rowLatency(row)); hi = Math.max(hi, rowLatency(row + 1));
      });
    }
    FS.forEach(function (f) {
      ["p50", "p99"].forEach(function (q) {
        for (var j = b[0]; j <= b[1]; j++) {
          var v = Sr.fs[f][q][j];
          if (v !== null && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
        }
      });
    });
    if (!(hi > 0)) { empty(g, c, "no op completed in view"); return; }
    lo = Math.pow(10, Math.floor(Math.log10(Math.max(lo, 1e-3))));
    hi = Math.pow(10, Math.ceil(Math.log10(hi)));
    if (hi <= lo) hi = lo * 10;
    var L0 = Math.log10(lo), L1 = Math.log10(hi);
    function Y(ms) {
      return bot - 2 - (Math.log10(Math.max(ms, lo)) - L0) / (L1 - L0) * (bot - TOP - 6);
    }
    var ticks = [];
    for (var t = lo; t <= hi * 1.001; t *= 10) ticks.push(t);
    yTicks(g, ticks, Y, S.fmtMs);
    g.save(); g.beginPath(); g.rect(geo.LABEL, TOP, geo.PW, bot - TOP); g.clip();
    if (pts) {
      g.globalAlpha = pts.length > 6000 ? 0.45 : 0.8;
      for (k = 0; k < pts.length; k += 3) {
        g.fillStyle = [OUT.ok, OUT.fail, OUT.info][pts[k + 2]];
        g.fillRect(S.X(pts[k]) - 1.5, Y(pts[k + 1]) - 1.5, 3, 3);
      }
      g.globalAlpha = 1;
    } else {
      var most = 1;
      eachCell(function (x0, x1, row, n) { most = Math.max(most, n[0], n[1], n[2]); });
      [0, 1, 2].forEach(function (o) {
        g.fillStyle = [OUT.ok, OUT.fail, OUT.info][o];
        eachCell(function (x0, x1, row, n) {
          if (!n[o]) return;
          g.globalAlpha = 0.25 + 0.65 * Math.log(1 + n[o]) / Math.log(1 + most);
          var y0 = Y(rowLatency(row + 1)), y1 = Y(rowLatency(row));
          g.fillRect(x0, y0, Math.max(1, x1 - x0), Math.max(1, y1 - y0));
        });
      });
      g.globalAlpha = 1;
    }
    FS.forEach(function (f) {
      ["p99", "p95", "p50"].forEach(function (q) {
        line(g, Sr.fs[f][q], Y, "#fff", QW[q] + 2, []);  // a halo, to read over the points
        line(g, Sr.fs[f][q], Y, fcol(f), QW[q], QDASH[q]);
      });
    });
    g.restore();
    marks(g, c);
  }
  function points() {  // time (us), latency (ms), outcome of each embedded op in view
    var o = S.ops, out = [], lo = S.lowerBound(S.view.a - o.maxDur), k;
    var read = o.fs.indexOf("read");
    for (k = lo; k < o.n && o.start[k] <= S.view.b; k++) {
      if (o.d[k] < 0 || o.f[k] === read || o.start[k] < S.view.a) continue;
      out.push(o.start[k], Math.max(o.d[k], 1) / 1000, Math.min(o.ty[k], 2));
    }
    return out;
  }
  function rowLatency(row) {  // ms at the bottom of a grid row
    return G.floor * Math.pow(10, row / G.perDecade) * 1000;
  }
  function eachCell(fn) {
    var cells = G.cells, geo = S.geo(), n = [0, 0, 0];
    for (var k = 0; k < cells.length; k += 5) {
      var t0 = cells[k] * G.width, t1 = t0 + G.width;
      if (t1 < S.view.a || t0 > S.view.b) continue;
      var x0 = Math.max(geo.LABEL, S.X(t0)), x1 = Math.min(geo.LABEL + geo.PW, S.X(t1));
      n[0] = cells[k + 2]; n[1] = cells[k + 3]; n[2] = cells[k + 4];
      fn(x0, x1, cells[k + 1], n);
    }
  }
  function empty(g, c, text) {
    g.fillStyle = "#656d76"; g.font = FONT; g.fillText(text, S.geo().LABEL + 8, TOP + 20);
    marks(g, c);
  }
  function niceTop(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function fmtRate(v) {
    return (v >= 1e4 ? Math.round(v / 1000) + "k" : v >= 10 ? Math.round(v) : v.toFixed(1)) +
      "/s";
  }

  // zoom and pan from the charts as from the timeline
  list.forEach(function (c) {
    var cv = c.el, drag = null;
    cv.addEventListener("wheel", function (e) {
      if (e.offsetX < S.geo().LABEL) return;
      e.preventDefault(); S.zoomAt(S.T(e.offsetX), Math.pow(1.0015, e.deltaY));
    }, {passive: false});
    cv.addEventListener("mousedown", function (e) { drag = {x: e.clientX}; });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      S.panBy(-(e.clientX - drag.x) / S.geo().PW * (S.view.b - S.view.a));
      drag.x = e.clientX;
    });
    cv.addEventListener("dblclick", S.fit);
    cv.addEventListener("mouseleave", function () { tip.hidden = true; });
    cv.addEventListener("mousemove", function (e) {
      var text = drag || e.offsetX < S.geo().LABEL ? "" : describe(S.T(e.offsetX));
      tip.hidden = !text;
      if (!text) return;
      tip.textContent = text;
      tip.style.left = Math.min(window.innerWidth - 380, e.clientX + 14) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    });
  });
  var tip = document.getElementById("tip");
  function describe(t) {  // the bucket under the pointer, in figures
    var k = Math.floor(t / Sr.width);
    if (k < 0 || k >= Sr.n) return "";
    var out = [S.s3(k * Sr.width) + " – " + S.s3((k + 1) * Sr.width) + " s"];
    FS.forEach(function (f) {
      var x = Sr.fs[f], q = x.p50[k] === null ? "" : " · latency p50 " + S.fmtMs(x.p50[k]) +
        ", p95 " + S.fmtMs(x.p95[k]) + ", p99 " + S.fmtMs(x.p99[k]);
      out.push(f + ": " + fmtRate(x.ok[k]) + " ok, " + fmtRate(x.fail[k]) + " fail, " +
        fmtRate(x.info[k]) + " info" + q);
    });
    M.faults.forEach(function (f) {
      if (t >= f.start && t <= f.stop) out.push("during " + (f.label || f.f));
    });
    S.violations.forEach(function (v) {
      var slack = (S.view.b - S.view.a) / S.geo().PW * 3;
      if (t >= v.t0 - slack && t <= v.t1 + slack) out.push("violation " + v.n + ": " +
        v.explanation);
    });
    return out.join("\n");
  }

  function legend() {
    var box = document.getElementById("chart-legend");
    if (!box) return;
    function item(style, text) {
      var s = document.createElement("span"), i = document.createElement("i");
      i.setAttribute("style", style);
      s.appendChild(i); s.appendChild(document.createTextNode(text)); box.appendChild(s);
    }
    FS.forEach(function (f) { item("background:" + fcol(f), f); });
    item("border-top:2px solid #1f2328;height:0", "ok / p50");
    item("border-top:2px dashed #1f2328;height:0", "fail / p95");
    item("border-top:2px dotted #1f2328;height:0", "info / p99");
    ["ok", "fail", "info"].forEach(function (o) {
      item("background:" + OUT[o] + ";width:.6em;height:.6em", o + " op");
    });
    item("background:rgba(207,34,46,.3);border-left:2px dashed " + RED, "violation");
  }

  return {
    resize: function (setup) { list.forEach(function (c) { c.g = setup(c.el, c.h); }); },
    draw: function () { list.forEach(function (c) { if (c.g) c.draw(c.g, c); }); },
    legend: legend,
  };
};
