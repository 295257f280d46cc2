(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("lifeline-data").textContent);
  var AXIS = 26, ROW = 14, STATE = 24, HEAD = 20, GAP = 6, LABELW = 210, PAD = 12, CHARW = 6.2;
  var DARK = { "st-inactive": 1, "st-notRunning": 1, "budget": 1, "budget-late": 1, "xfer": 1, "xfer-fail": 1,
    "xfer-open": 1, "xfer-queued": 1, "sys": 1, "sys-fail": 1, "sys-open": 1, "task-open": 1, "budget-unused": 1, "http-open": 1, "op-open": 1 };
  var tip = document.getElementById("tip");
  var lanesDrawn = 0;

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) { return "&#" + c.charCodeAt(0) + ";"; });
  }
  function clip(s, n) { s = String(s); return s.length > n ? s.slice(0, Math.max(n - 1, 1)) + "\u2026" : s; }
  function niceStep(raw) {
    var s = 0.001;
    while (s < raw && s < 1e12) {
      if (s * 2 >= raw) return s * 2;
      if (s * 5 >= raw) return s * 5;
      s *= 10;
    }
    return s;
  }
  function fmt(t, step) {
    var d = step >= 1 ? 0 : step >= 0.1 ? 1 : step >= 0.01 ? 2 : 3;
    return String(+t.toFixed(d)) + "s";
  }

  // Vertical positions depend only on the lanes; zooming changes x alone.
  function layout(run) {
    var y = AXIS, rows = [], group = "";
    run.lanes.forEach(function (lane) {
      if (lane.group !== group) {
        group = lane.group;
        if (group) { rows.push({ head: group, y: y }); y += HEAD; }
      }
      // Busy lanes get thin rows: bars without text, but none on top of another.
      var rowH = lane.rows > 10 ? 7 : ROW;
      var h = lane.kind === "state" ? STATE : Math.max(lane.rows, 1) * rowH + 4;
      rows.push({ lane: lane, y: y, h: h, rowH: rowH });
      y += h + GAP;
    });
    return { rows: rows, height: y + 4 };
  }

  function labelsSvg(L) {
    var s = '<svg width="' + LABELW + '" height="' + L.height + '">';
    L.rows.forEach(function (r) {
      if (!r.lane) {
        s += '<text class="ghead" x="8" y="' + (r.y + 14) + '">' + esc(clip(r.head, 30)) + "</text>";
        return;
      }
      var sub = !!r.lane.group;
      s += '<text class="' + (sub ? "sub" : "top") + '" x="' + (sub ? 18 : 8) + '" y="' + (r.y + r.h / 2 + 4) +
        '"><title>' + esc(r.lane.label) + "</title>" + esc(clip(r.lane.label, sub ? 30 : 32)) + "</text>";
    });
    return s + "</svg>";
  }

  function chartSvg(run, L, scale, width) {
    var t0 = run.start;
    function X(t) { return PAD + (t - t0) * scale; }
    var s = '<svg width="' + width + '" height="' + L.height + '">';
    L.rows.forEach(function (r) {
      if (r.lane) {
        s += '<rect class="lane-bg" x="0" y="' + (r.y - 2) + '" width="' + width + '" height="' + (r.h + 4) +
          '"></rect>';
      } else {
        s += '<line class="gsep" x1="0" x2="' + width + '" y1="' + (r.y + 2) + '" y2="' + (r.y + 2) +
          '"></line>';
      }
    });
    var step = niceStep(90 / scale), first = Math.ceil(t0 / step) * step;
    s += '<g class="axis">';
    for (var n = 0; n < 5000; n++) {
      var t = first + n * step;
      if (t > run.end + step * 1e-6) break;
      var x = X(t).toFixed(1), label = fmt(t, step);
      s += '<line class="grid" x1="' + x + '" x2="' + x + '" y1="' + (AXIS - 6) + '" y2="' + L.height +
        '"></line>';
      // The last label would be cut by the edge: it goes left of its line instead.
      var lx = +x + 3 + label.length * CHARW > width ? +x - 3 - label.length * CHARW : +x + 3;
      s += '<text x="' + lx.toFixed(1) + '" y="14">' + label + "</text>";
    }
    s += "</g>";
    // Labels go last, above marks and progress fills, so nothing is drawn over text.
    var labels = "";
    L.rows.forEach(function (r) {
      if (!r.lane) return;
      var state = r.lane.kind === "state";
      r.lane.items.forEach(function (it) {
        var cls = it[3], k = it[4], text = it[5];
        var y = state ? r.y : r.y + 2 + it[2] * r.rowH, h = state ? STATE : r.rowH - (r.rowH > 8 ? 2 : 1);
        var x0 = X(it[0]);
        if (cls.slice(0, 2) === "m-") {
          if (cls === "m-bad" || cls === "m-end") {
            s += '<path class="' + cls + '" data-k="' + k + '" d="M' + x0.toFixed(1) + " " + y + "l5 " + h / 2 +
              "l-5 " + h / 2 + "l-5 " + (-h / 2) + 'z"></path>';
          } else {
            s += '<rect class="' + cls + '" data-k="' + k + '" x="' + (x0 - 1.5).toFixed(1) + '" y="' +
              (y + 1) + '" width="3" height="' + (h - 2) + '" rx="1"></rect>';
          }
          return;
        }
        var w = Math.max(X(it[1]) - x0, 2);
        if (it.length > 6 && typeof it[6] === "number") {
          var ph = Math.max((h - 4) * it[6], 1);
          s += '<rect class="prog" x="' + x0.toFixed(1) + '" y="' + (y + h - 2 - ph).toFixed(1) + '" width="' +
            w.toFixed(1) + '" height="' + ph.toFixed(1) + '"></rect>';
          return;
        }
        s += '<rect class="' + cls + '" data-k="' + k + '" x="' + x0.toFixed(1) + '" y="' + y + '" width="' +
          w.toFixed(1) + '" height="' + h + '" rx="2"></rect>';
        var room = Math.floor((w - 8) / CHARW);
        if (text && room >= 4 && h >= 10) {
          labels += '<text class="' + (DARK[cls] ? "lbl-dark" : "lbl") + '" x="' + (x0 + 4).toFixed(1) +
            '" y="' + (y + h / 2 + 4) + '">' + esc(clip(text, room)) + "</text>";
        }
      });
    });
    s += labels;
    run.vlines.forEach(function (v) {
      var x = X(v[0]).toFixed(1);
      s += '<line class="' + v[1] + '" data-k="' + v[2] + '" x1="' + x + '" x2="' + x + '" y1="' + (AXIS - 6) +
        '" y2="' + L.height + '"></line>';
    });
    return s + "</svg>";
  }

  function showTip(run, k, ev) {
    var rows = run.tips[k];
    if (!rows) return;
    var table = document.createElement("table");
    rows.slice(0, 80).forEach(function (p) {
      var tr = document.createElement("tr");
      if (p[0] === "" && p[1] === "") {
        tr.className = "sep";
        var td = document.createElement("td");
        td.colSpan = 2;
        tr.appendChild(td);
      } else {
        var a = document.createElement("td"), b = document.createElement("td");
        a.className = "k"; b.className = "v";
        a.textContent = p[0];
        b.textContent = p[1].length > 2000 ? p[1].slice(0, 2000) + "\u2026" : p[1];
        tr.appendChild(a); tr.appendChild(b);
      }
      table.appendChild(tr);
    });
    tip.replaceChildren(table);
    tip.style.display = "block";
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth - 8) x = Math.max(8, ev.clientX - tip.offsetWidth - 14);
    if (y + tip.offsetHeight > window.innerHeight - 8) y = Math.max(8, ev.clientY - tip.offsetHeight - 14);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  function setup(run, index) {
    var section = document.getElementById("run-" + index);
    if (!section) return;
    var labels = section.querySelector(".labels"), scroll = section.querySelector(".scroll");
    var scaleText = section.querySelector(".scale");
    var L = layout(run), dur = Math.max(run.end - run.start, 0.001);
    var scale = 0, fitted = true;
    function fit() { return Math.max(((scroll.clientWidth || 1000) - 2 * PAD) / dur, 1e-6); }
    function maxScale() { return Math.max(fit(), Math.min(20000, 400000 / dur)); }
    function draw() {
      var width = Math.max(scroll.clientWidth || 1000, Math.ceil(dur * scale + 2 * PAD));
      scroll.innerHTML = chartSvg(run, L, scale, width);
      var shown = ((scroll.clientWidth || width) - 2 * PAD) / scale;
      scaleText.textContent = fitted ? "whole run: " + fmt(dur, 0.001)
        : "showing " + fmt(Math.min(shown, dur), 0.001) + " of " + fmt(dur, 0.001);
    }
    function zoom(f, px) {
      var t = run.start + (scroll.scrollLeft + px - PAD) / scale;
      scale = Math.min(Math.max(scale * f, fit()), maxScale());
      fitted = scale <= fit() * 1.0001;
      draw();
      scroll.scrollLeft = PAD + (t - run.start) * scale - px;
    }
    labels.innerHTML = labelsSvg(L);
    scale = fit();
    draw();
    lanesDrawn += run.lanes.length;
    section.querySelectorAll("button[data-zoom]").forEach(function (b) {
      b.addEventListener("click", function () {
        var what = b.getAttribute("data-zoom"), mid = scroll.clientWidth / 2;
        if (what === "fit") { scale = fit(); fitted = true; draw(); scroll.scrollLeft = 0; }
        else zoom(what === "in" ? 2 : 0.5, mid);
      });
    });
    scroll.addEventListener("wheel", function (e) {
      if (!e.ctrlKey && !e.metaKey) return;
      e.preventDefault();
      zoom(e.deltaY < 0 ? 1.25 : 0.8, e.clientX - scroll.getBoundingClientRect().left);
    }, { passive: false });
    scroll.addEventListener("mousemove", function (e) {
      var el = e.target && e.target.closest ? e.target.closest("[data-k]") : null;
      if (el) showTip(run, +el.getAttribute("data-k"), e); else hideTip();
    });
    scroll.addEventListener("mouseleave", hideTip);
    window.addEventListener("resize", function () { if (fitted) { scale = fit(); draw(); } });
  }

  data.runs.forEach(setup);
  document.body.dataset.lanes = String(lanesDrawn);
  document.body.dataset.rendered = "ok";
})();
