/// The page's inline style and script. They are constant text: everything that varies comes in
/// through the embedded JSON, which the script reads as data and writes into the page only through
/// `esc` (markup) or `textContent` (tooltips).
extension ReportPage {
    static let style = #"""
        :root { --fg: #1d2330; --muted: #6b7280; --line: #e3e6ea; }
        * { box-sizing: border-box; }
        body { margin: 0; padding: 16px 24px 40px; color: var(--fg); background: #f4f5f7;
          font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
        header h1 { font-size: 18px; margin: 0 0 6px; }
        .legend { display: flex; flex-wrap: wrap; gap: 4px 14px; color: var(--muted); font-size: 12px; }
        .key { display: inline-flex; align-items: center; gap: 5px; }
        section.run { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px;
          margin: 14px 0; }
        h2 { font-size: 16px; margin: 0 0 6px; overflow-wrap: anywhere; }
        .chip { display: inline-block; padding: 1px 8px; border-radius: 10px; background: #eef1f5; color: #374151;
          font-size: 12px; margin: 0 2px 4px 0; }
        .chip.good { background: #dcf3e4; color: #17663a; } .chip.bad { background: #fde2e1; color: #a11d1a; }
        .chip.warn { background: #fdebd3; color: #8a4b08; }
        .alert { border: 1px solid #f2b8b5; background: #fff4f3; border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
        .alert h3 { margin: 0 0 4px; font-size: 13px; color: #a11d1a; }
        .alert ul { margin: 0; padding-left: 18px; }
        .alert .why { color: #7f1d1d; margin: 1px 0 4px; overflow-wrap: anywhere;
          font: 12px/1.35 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
        nav.index { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px;
          margin: 14px 0; }
        nav.index h2 { font-size: 14px; } nav.index ol { margin: 0; padding-left: 22px; columns: 2 360px; }
        nav.index li { margin: 1px 0; break-inside: avoid; } nav.index li.failing a { color: #a11d1a; font-weight: 600; }
        .alert dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
        .alert dt { color: var(--muted); } .alert dd { margin: 0; overflow-wrap: anywhere; }
        pre, code { font: 12px/1.35 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
        pre { margin: 0; white-space: pre-wrap; }
        .tools { margin: 6px 0 4px; display: flex; gap: 4px; align-items: center; }
        .tools button { font: inherit; min-width: 28px; padding: 1px 8px; border: 1px solid #cfd5dc; background: #fff;
          border-radius: 4px; cursor: pointer; }
        .tools .scale { color: var(--muted); font-size: 12px; margin-left: 6px; }
        .chart { display: flex; border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
        .labels { flex: none; width: 210px; border-right: 1px solid var(--line); background: #fafbfc; }
        .scroll { flex: 1; min-width: 0; overflow-x: auto; overflow-y: hidden; }
        svg { display: block; } svg text { font-size: 11px; fill: #374151; }
        .ghead { font-weight: 600; fill: #111827; } .sub { fill: #4b5563; } .top { font-weight: 600; }
        .lbl { fill: #fff; pointer-events: none; } .lbl-dark { fill: #1f2937; pointer-events: none; }
        .lane-bg { fill: #f7f8fa; } .gsep { stroke: #d5d9df; } .grid { stroke: #e6e8ec; } .axis text { fill: #6b7280; }
        .st-active { fill: #34a865; } .st-inactive { fill: #f2c14e; } .st-background { fill: #4a7fd6; }
        .st-suspended { fill: #8e6cc4; } .st-notRunning { fill: #d9dde3; }
        .budget { fill: #cfe0f7; } .budget-late { fill: #f8c59f; } .budget-unused { fill: #fff; opacity: .6; }
        .task { fill: #2f9e9a; } .task-open { fill: #a9dcd9; stroke: #2f9e9a; stroke-dasharray: 3 2; }
        .task-expired, .task-fail { fill: #d64541; }
        .http { fill: #5b8def; } .http-fail { fill: #d64541; }
        .http-open { fill: #c3d4f9; stroke: #5b8def; stroke-dasharray: 3 2; }
        .op { fill: #c0508f; } .op-fail { fill: #e07b39; }
        .op-open { fill: #f1d3e4; stroke: #c0508f; stroke-dasharray: 3 2; }
        .xfer { fill: #b8d8c4; } .xfer-fail { fill: #f3b9b5; } .xfer-queued { fill: #e6eaef; }
        .xfer-open { fill: #dcefe2; stroke: #5aa27a; stroke-dasharray: 3 2; }
        .sys { fill: #c9c2e8; } .sys-fail { fill: #f3b9b5; }
        .sys-open { fill: #e4e0f5; stroke: #7a6cc0; stroke-dasharray: 3 2; }
        .prog { fill: #7cc49a; pointer-events: none; }
        .call { fill: #3b4a5e; } .call-slow { fill: #e07b39; }
        .m-bad { fill: #d11f1a; } .m-end { fill: #374151; } .m-warn { fill: #e69a17; } .m-info { fill: #6b7280; } .m-expire { fill: #f08a24; }
        .m-log-debug { fill: #a0a7b2; } .m-log-info { fill: #4a7fd6; } .m-log-warning { fill: #e69a17; }
        .m-log-error { fill: #d11f1a; }
        .v-bad { stroke: #d11f1a; stroke-width: 2; } .v-end { stroke: #6b7280; stroke-width: 1.5; stroke-dasharray: 2 2; }
        .v-expire { stroke: #f08a24; stroke-width: 1.5; stroke-dasharray: 5 3; }
        [data-k]:hover { stroke: #111827; stroke-width: 1.2; }
        #tip { position: fixed; display: none; z-index: 10; max-width: 560px; background: #1f2633; color: #f3f4f6;
          padding: 6px 9px; border-radius: 6px; font-size: 12px; box-shadow: 0 4px 14px rgba(0, 0, 0, .25);
          pointer-events: none; }
        #tip table { border-collapse: collapse; } #tip td { padding: 0 8px 0 0; vertical-align: top; }
        #tip td.k { color: #9aa4b2; white-space: nowrap; }
        #tip td.v { white-space: pre-wrap; overflow-wrap: anywhere;
          font-family: ui-monospace, Menlo, Consolas, monospace; }
        #tip tr.sep td { border-top: 1px solid #465064; padding-top: 3px; }
        .log summary { cursor: pointer; margin-top: 10px; font-weight: 600; }
        .logbox { max-height: 320px; overflow: auto; border: 1px solid var(--line); border-radius: 6px;
          margin-top: 6px; }
        .log table { border-collapse: collapse; width: 100%;
          font: 12px/1.35 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
        .log th { position: sticky; top: 0; background: #f3f4f6; text-align: left; padding: 3px 8px; }
        .log td { padding: 2px 8px; border-top: 1px solid #f0f1f3; vertical-align: top; white-space: nowrap; }
        .log td:last-child { white-space: pre-wrap; overflow-wrap: anywhere; width: 100%; }
        .lv-warning td { background: #fff8eb; } .lv-error td { background: #fff1f0; color: #a11d1a; }
        .lv-debug td { color: #6b7280; }
        """#

    static let script = #"""
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
        """#
}
