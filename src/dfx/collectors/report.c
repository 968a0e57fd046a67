/*
 * report.c - report.html: one self-contained page (no network, no external script or font)
 * with the swimlane timeline, the critical path and per-kernel statistics of a run.
 *
 * px_dfx_report_write() takes the run's task model, built in memory by swimlane and depgen
 * (model.h; the files are not read back), embeds what
 * the page shows as JSON in <script type="application/json" id="plexus-data"> (every string
 * escapes '<', '>' and '&', so the JSON cannot close the element), and adds a small inline
 * script that draws the page from it: an SVG timeline with one rect per task carrying a
 * data-task attribute (a list of tasks when there is no timing), the critical path, and the
 * kernel table. Format of the embedded data: docs/formats.md.
 */
#include "dfx/collectors/collectors.h"

#include "dfx/collectors/model.h"
#include "dfx/collectors/out.h"
#include "util/log.h"

static const char report_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>plexus DFX report</title>\n<style>\n"
    "body{font:14px/1.4 sans-serif;margin:1.5em;color:#222}\n"
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\n"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;"
    "text-align:right}td:first-child,th:first-child{text-align:left}\n"
    "#timeline{overflow:hidden;border:1px solid #ddd;cursor:grab;user-select:none}\n"
    "svg text{font:11px monospace}text.chip-label{font-weight:bold}text.host-label{font-weight:bold;font-size:13px}\n"
    "rect.task{stroke:#555;stroke-width:0.5}rect.task.cp{stroke:#d00;stroke-width:2}\n"
    "rect.task:hover{stroke:#000;stroke-width:2}polyline.cp-line{fill:none;stroke:#d00;"
    "stroke-width:1;stroke-dasharray:4 2}\n"
    "#controls button{margin-right:4px}#view{font:12px monospace;margin-left:8px}\n"
    "#tooltip{position:fixed;pointer-events:none;background:#ffe;border:1px solid #999;"
    "padding:4px 6px;font:12px monospace;white-space:pre;display:none}\n"
    ".chip{display:inline-block;margin:2px;padding:1px 6px;border:1px solid #999;"
    "border-radius:3px;font:12px monospace}.chip.cp{border-color:#d00}\n"
    "</style>\n</head>\n<body>\n<h1>plexus DFX report</h1>\n<p id=\"summary\"></p>\n"
    "<h2>Timeline</h2>\n<div id=\"controls\"><button id=\"zoom-in\" type=\"button\">zoom in"
    "</button><button id=\"zoom-out\" type=\"button\">zoom out</button><button id=\"zoom-reset\""
    " type=\"button\">whole run</button><span id=\"view\"></span> (wheel: zoom, drag: pan; "
    "the page address may end in #zoom=Z&amp;start=US)</div>\n"
    "<div id=\"timeline\"></div>\n<div id=\"tooltip\"></div>\n"
    "<h2>Utilisation</h2>\n<table id=\"utilisation\"><thead><tr><th>track</th><th>tasks</th>"
    "<th>busy us</th><th>utilisation</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Critical path</h2>\n<p id=\"cp-summary\"></p>\n<ol id=\"cp\"></ol>\n"
    "<h2>Kernels</h2>\n<table id=\"kernels\"><thead><tr><th>kernel</th><th>count</th>"
    "<th>total us</th><th>mean us</th><th>max us</th></tr></thead><tbody></tbody></table>\n"
    "<script type=\"application/json\" id=\"plexus-data\">";

/*
 * The page's script. The timeline groups its rows by process (chip), one row per track; a
 * view [v0, v1) in microseconds maps onto the lanes: zoom (buttons, the wheel, or the
 * address's #zoom=Z&start=US) narrows it, dragging moves it, and every task's rect is placed
 * again. Each rect carries data-task, data-core and data-deps, a <title> and the tooltip text
 * (id, kernel, core, start, duration, dependencies); the critical path's rects have class cp
 * and a dashed line joins them.
 */
static const char report_tail[] =
    "</script>\n<script>\n"
    "(function () {\n"
    "  'use strict';\n"
    "  var d = JSON.parse(document.getElementById('plexus-data').textContent);\n"
    "  var NS = 'http://www.w3.org/2000/svg';\n"
    "  function mk(tag, attrs, text, ns) {\n"
    "    var e = ns ? document.createElementNS(NS, tag) : document.createElement(tag);\n"
    "    for (var k in attrs) e.setAttribute(k, attrs[k]);\n"
    "    if (text !== undefined) e.textContent = text;\n"
    "    return e;\n"
    "  }\n"
    "  function hue(s) { var h = 0; for (var i = 0; i < s.length; i++)"
    " h = (h * 31 + s.charCodeAt(i)) % 360; return h; }\n"
    "  function us(v) { return v.toFixed(3); }\n"
    "  var onCp = {}, byId = {}, deps = {};\n"
    "  d.critical_path.tasks.forEach(function (id) { onCp[id] = true; });\n"
    "  d.tasks.forEach(function (t) { byId[t.id] = t; deps[t.id] = []; });\n"
    "  d.edges.forEach(function (e) { if (deps[e[1]]) deps[e[1]].push(e[0]); });\n"
    "  function info(t) {\n"
    "    return 'task ' + t.id + ' ' + t.kernel + '\\ncore ' + t.core + '\\nstart ' +\n"
    "      us(t.ts_us) + ' us, duration ' + us(t.dur_us) + ' us\\ndepends on: ' +\n"
    "      (deps[t.id].length ? deps[t.id].join(', ') : 'none');\n"
    "  }\n"
    "  document.getElementById('summary').textContent = d.tasks.length + ' tasks, ' +\n"
    "    d.edges.length + ' edges' + (d.timed ? ', span ' + us(d.span_us) + ' us' : '') +\n"
    "    '; clock ' + d.clock + '; from ' + d.sources.join(' and ');\n"
    "  var tl = document.getElementById('timeline'), tip = document.getElementById('tooltip');\n"
    "  var names = {};\n"
    "  d.tracks.forEach(function (k) { names[k.pid + '/' + k.tid] = k.name; });\n"
    "  var timed = d.tasks.filter(function (t) { return t.ts_us !== null; });\n"
    "  var t0 = d.start_us < d.span_us ? d.start_us : 0, t1 = d.span_us > t0 ? d.span_us : t0 + 1;\n"
    "  var span = t1 - t0, v0 = t0, v1 = t1, rects = [];\n"
    "  var W = 1000, L = 160, H = 22, G = 20, svg = null, cpLine = null, rowY = {};\n"
    "  function px2(v) { return Math.round(v * 100) / 100; }\n"
    "  function place() {\n"
    "    var k = W / (v1 - v0), pts = [];\n"
    "    rects.forEach(function (r) {\n"
    "      var t = r.t, a = L + (t.ts_us - v0) * k, b = L + (t.ts_us + t.dur_us - v0) * k;\n"
    "      if (b - a < 0.5) { a = Math.min(a, L + W - 0.5); b = a + 0.5; }\n"
    "      a = px2(a); b = px2(b);\n"
    "      r.e.setAttribute('x', a.toFixed(2));\n"
    "      r.e.setAttribute('width', (b - a).toFixed(2));\n"
    "      if (onCp[t.id]) pts.push(((a + b) / 2).toFixed(2) + ',' + (r.y + H / 2 - 2));\n"
    "    });\n"
    "    if (cpLine) cpLine.setAttribute('points', pts.join(' '));\n"
    "    tl.setAttribute('data-zoom', (span / (v1 - v0)).toFixed(3));\n"
    "    tl.setAttribute('data-view-start-us', us(v0));\n"
    "    tl.setAttribute('data-view-end-us', us(v1));\n"
    "    document.getElementById('view').textContent = 'view ' + us(v0) + ' .. ' + us(v1) +\n"
    "      ' us (zoom ' + (span / (v1 - v0)).toFixed(2) + 'x)';\n"
    "  }\n"
    "  function view(a, b) {\n"
    "    var w = Math.min(Math.max(b - a, span / 1e6), span);\n"
    "    a = Math.min(Math.max(a, t0), t1 - w);\n"
    "    v0 = a; v1 = a + w; place();\n"
    "  }\n"
    "  function zoomAt(f, at) { view(at - (at - v0) / f, at + (v1 - at) / f); }\n"
    "  if (d.timed && timed.length > 0) {\n"
    "    var keys = [], seen = {};\n"
    "    timed.forEach(function (t) {\n"
    "      var key = t.pid + '/' + t.tid;\n"
    "      if (!seen[key]) { seen[key] = 1; keys.push({pid: t.pid, tid: t.tid, key: key}); }\n"
    "    });\n"
    "    keys.sort(function (a, b) { return a.pid - b.pid || a.tid - b.tid; });\n"
    "    var y = 0, lastPid = null, lastHost = null, groups = {}, height;\n"
    "    function hostOf(pid) {\n"
    "      var h = null;\n"
    "      (d.hosts || []).forEach(function (x) { if (x.pid_base <= pid) h = x; });\n"
    "      return h;\n"
    "    }\n"
    "    svg = mk('svg', {id: 'tl-svg'}, undefined, 1);\n"
    "    var defs = mk('defs', {}, undefined, 1), clip = mk('clipPath', {id: 'lanes-clip'},\n"
    "      undefined, 1);\n"
    "    keys.forEach(function (k) {\n"
    "      var hk = hostOf(k.pid);\n"
    "      if (hk && hk !== lastHost) {\n"
    "        lastHost = hk;\n"
    "        svg.appendChild(mk('text', {'class': 'host-label', x: 2, y: y + 14,\n"
    "          'data-host': hk.host}, hk.name, 1));\n"
    "        y += G;\n"
    "      }\n"
    "      if (k.pid !== lastPid) {\n"
    "        lastPid = k.pid;\n"
    "        groups[k.pid] = mk('g', {'class': 'chip-group', 'data-pid': k.pid}, undefined, 1);\n"
    "        groups[k.pid].appendChild(mk('text', {'class': 'chip-label', x: 2, y: y + 14},\n"
    "          d.processes && d.processes[k.pid] ? d.processes[k.pid] : 'chip ' + k.pid, 1));\n"
    "        svg.appendChild(groups[k.pid]);\n"
    "        y += G;\n"
    "      }\n"
    "      rowY[k.key] = y;\n"
    "      groups[k.pid].appendChild(mk('text', {'class': 'lane-label', x: 10, y: y + 15,\n"
    "        'data-track': k.key}, names[k.key] || ('track ' + k.tid), 1));\n"
    "      y += H;\n"
    "    });\n"
    "    height = y + 24;\n"
    "    svg.setAttribute('width', L + W + 10);\n"
    "    svg.setAttribute('height', height);\n"
    "    clip.appendChild(mk('rect', {x: L, y: 0, width: W, height: height}, undefined, 1));\n"
    "    defs.appendChild(clip);\n"
    "    svg.insertBefore(defs, svg.firstChild);\n"
    "    var lanes = mk('g', {id: 'lanes', 'clip-path': 'url(#lanes-clip)'}, undefined, 1);\n"
    "    timed.forEach(function (t) {\n"
    "      var yy = rowY[t.pid + '/' + t.tid] + 2;\n"
    "      var r = mk('rect', {y: yy, height: H - 4, fill: 'hsl(' + hue(t.kernel) +\n"
    "        ',60%,65%)', 'data-task': t.id, 'data-core': t.core,\n"
    "        'data-deps': deps[t.id].join(' '), 'class': onCp[t.id] ? 'task cp' : 'task'},\n"
    "        undefined, 1);\n"
    "      r.appendChild(mk('title', {}, info(t), 1));\n"
    "      r.addEventListener('mousemove', function (ev) {\n"
    "        tip.textContent = info(t); tip.style.display = 'block';\n"
    "        tip.style.left = (ev.clientX + 12) + 'px'; tip.style.top = (ev.clientY + 12) + 'px';\n"
    "      });\n"
    "      r.addEventListener('mouseleave', function () { tip.style.display = 'none'; });\n"
    "      lanes.appendChild(r);\n"
    "      rects.push({e: r, t: t, y: yy});\n"
    "    });\n"
    "    svg.appendChild(lanes);\n"
    "    cpLine = mk('polyline', {id: 'cp-line', 'class': 'cp-line'}, undefined, 1);\n"
    "    lanes.appendChild(cpLine);\n"
    "    var axis0 = mk('text', {id: 'axis-start', x: L, y: height - 6,\n"
    "        'text-anchor': 'start'}, '', 1),\n"
    "        axis1 = mk('text', {id: 'axis-end', x: L + W, y: height - 6,\n"
    "        'text-anchor': 'end'}, '', 1);\n"
    "    svg.appendChild(axis0);\n"
    "    svg.appendChild(axis1);\n"
    "    var place0 = place;\n"
    "    place = function () { place0(); axis0.textContent = us(v0) + ' us';\n"
    "      axis1.textContent = us(v1) + ' us'; axis0.setAttribute('data-us', us(v0));\n"
    "      axis1.setAttribute('data-us', us(v1)); };\n"
    "    tl.appendChild(svg);\n"
    "    var h = {};\n"
    "    location.hash.replace(/^#/, '').split('&').forEach(function (kv) {\n"
    "      var p = kv.split('='); if (p.length === 2) h[p[0]] = parseFloat(p[1]);\n"
    "    });\n"
    "    var z = h.zoom > 0 ? h.zoom : 1, s0 = h.start >= 0 ? h.start : t0;\n"
    "    view(s0, s0 + span / z);\n"
    "    function at(ev) {\n"
    "      var b = svg.getBoundingClientRect();\n"
    "      return v0 + (ev.clientX - b.left - L) / W * (v1 - v0);\n"
    "    }\n"
    "    svg.addEventListener('wheel', function (ev) {\n"
    "      ev.preventDefault(); zoomAt(ev.deltaY < 0 ? 1.25 : 0.8, at(ev));\n"
    "    }, {passive: false});\n"
    "    var drag = null;\n"
    "    svg.addEventListener('mousedown', function (ev) { drag = {x: ev.clientX, v0: v0}; });\n"
    "    window.addEventListener('mouseup', function () { drag = null; });\n"
    "    window.addEventListener('mousemove', function (ev) {\n"
    "      if (!drag) return;\n"
    "      var dv = (ev.clientX - drag.x) / W * (v1 - v0);\n"
    "      view(drag.v0 - dv, drag.v0 - dv + (v1 - v0));\n"
    "    });\n"
    "    document.getElementById('zoom-in').addEventListener('click', function () {\n"
    "      zoomAt(2, (v0 + v1) / 2); });\n"
    "    document.getElementById('zoom-out').addEventListener('click', function () {\n"
    "      zoomAt(0.5, (v0 + v1) / 2); });\n"
    "    document.getElementById('zoom-reset').addEventListener('click', function () {\n"
    "      view(t0, t1); });\n"
    "    var ut = document.querySelector('#utilisation tbody');\n"
    "    keys.forEach(function (k) {\n"
    "      var mine = timed.filter(function (t) { return t.pid + '/' + t.tid === k.key; });\n"
    "      var busy = mine.reduce(function (a, t) { return a + t.dur_us; }, 0);\n"
    "      var tr = mk('tr', {'data-track': k.key});\n"
    "      [(d.processes && d.processes[k.pid] ? d.processes[k.pid] : 'chip ' + k.pid) + ' / ' +\n"
    "       (names[k.key] || ('track ' + k.tid)), mine.length, us(busy),\n"
    "       (busy / span * 100).toFixed(1) + ' %'].forEach(function (v) {\n"
    "        tr.appendChild(mk('td', {}, String(v)));\n"
    "      });\n"
    "      ut.appendChild(tr);\n"
    "    });\n"
    "  }\n"
    "  var untimed = d.tasks.filter(function (t) { return t.ts_us === null; });\n"
    "  if (untimed.length > 0) {\n"
    "    tl.appendChild(mk('p', {}, d.timed ? 'Tasks without a slice (not run):' :\n"
    "      'No timing: swimlane was off. Tasks in submission order:'));\n"
    "    untimed.forEach(function (t) {\n"
    "      tl.appendChild(mk('span', {'data-task': t.id, 'class': onCp[t.id] ? 'chip cp' :"
    " 'chip'}, t.id + ' ' + t.kernel));\n"
    "    });\n"
    "  }\n"
    "  var cp = d.critical_path;\n"
    "  document.getElementById('cp-summary').textContent = cp.tasks.length + ' tasks, ' +\n"
    "    (cp.by === 'duration' ? us(cp.length_us) + ' us of task time'"
    " : 'longest chain by task count (no timing)');\n"
    "  var ol = document.getElementById('cp');\n"
    "  cp.tasks.forEach(function (id, i) {\n"
    "    var t = byId[id], o = cp.outer ? cp.outer[i] : -1;\n"
    "    var where = t && t.pid >= 0 && d.processes && d.processes[t.pid] ?\n"
    "      ', ' + d.processes[t.pid] : '';\n"
    "    ol.appendChild(mk('li', {'data-cp': id, 'data-outer': o}, 'task ' + id + ' ' +\n"
    "      (t ? t.kernel : '?') + (t && t.ts_us !== null ? ' (' + us(t.dur_us) + ' us' + where +\n"
    "      ')' : '') + (o >= 0 ? ' - run by task ' + o : '')));\n"
    "  });\n"
    "  var tb = document.querySelector('#kernels tbody');\n"
    "  d.kernels.forEach(function (k) {\n"
    "    var tr = mk('tr', {});\n"
    "    [k.name, k.count, us(k.total_us), us(k.mean_us), us(k.max_us)].forEach(function (v) {\n"
    "      tr.appendChild(mk('td', {}, String(v)));\n"
    "    });\n"
    "    tb.appendChild(tr);\n"
    "  });\n"
    "})();\n"
    "</script>\n</body>\n</html>\n";

/* Appends the tasks array of the embedded data. */
static void report_tasks(const dfxc_model *m, dfxc_buf *b)
{
    dfxc_buf_puts(b, "\"tasks\": [");
    for (size_t i = 0; i < m->n; i++) {
        const dfxc_mtask *t = &m->t[i];

        dfxc_buf_puts(b, i ? ",\n{\"id\": " : "\n{\"id\": ");
        dfxc_buf_u64(b, t->id);
        dfxc_buf_puts(b, ", \"kernel\": ");
        dfxc_buf_json_str(b, t->kernel);
        dfxc_buf_puts(b, ", \"pid\": ");
        dfxc_buf_i64(b, t->pid);
        dfxc_buf_puts(b, ", \"tid\": ");
        dfxc_buf_i64(b, t->tid);
        dfxc_buf_puts(b, ", \"core\": ");
        dfxc_buf_i64(b, t->core);
        dfxc_buf_puts(b, ", \"ts_us\": ");
        if (t->timed) {
            dfxc_buf_us(b, t->ts);
            dfxc_buf_puts(b, ", \"dur_us\": ");
            dfxc_buf_us(b, t->dur);
        } else {
            dfxc_buf_puts(b, "null, \"dur_us\": null");
        }
        dfxc_buf_puts(b, "}");
    }
    dfxc_buf_puts(b, "],\n");
}

/* Appends tracks, edges, critical path and kernels of the embedded data. */
static void report_graph(const dfxc_model *m, dfxc_buf *b)
{
    dfxc_buf_puts(b, "\"tracks\": [");
    for (size_t i = 0; i < m->ntracks; i++) {
        dfxc_buf_printf(b, "%s{\"pid\": %d, \"tid\": %d, \"name\": ", i ? ", " : "",
                        m->tracks[i].pid, m->tracks[i].tid);
        dfxc_buf_json_str(b, m->tracks[i].name);
        dfxc_buf_puts(b, "}");
    }
    dfxc_buf_puts(b, "],\n\"processes\": {");
    for (size_t i = 0; i < m->nprocs; i++) {
        dfxc_buf_printf(b, "%s\"%d\": ", i ? ", " : "", m->procs[i].pid);
        dfxc_buf_json_str(b, m->procs[i].name);
    }
    dfxc_buf_puts(b, "},\n\"hosts\": [");
    for (size_t i = 0; i < m->nhosts; i++) {
        dfxc_buf_printf(b, "%s{\"host\": %d, \"pid_base\": %d, \"name\": ", i ? ", " : "",
                        m->hosts[i].tid, m->hosts[i].pid);
        dfxc_buf_json_str(b, m->hosts[i].name);
        dfxc_buf_puts(b, "}");
    }
    dfxc_buf_puts(b, "],\n\"edges\": [");
    for (size_t i = 0; i < m->edges.n; i++) {
        dfxc_buf_puts(b, i ? ", [" : "[");
        dfxc_buf_u64(b, m->edges.v[i].p);
        dfxc_buf_puts(b, ", ");
        dfxc_buf_u64(b, m->edges.v[i].c);
        dfxc_buf_puts(b, "]");
    }
    dfxc_buf_printf(b, "],\n\"critical_path\": {\"by\": \"%s\", \"length_us\": ",
                    m->cp_by_count ? "count" : "duration");
    dfxc_buf_us(b, m->cp_by_count ? 0 : m->cp_len);
    dfxc_buf_puts(b, ", \"tasks\": [");
    for (size_t i = 0; i < m->ncp; i++) {
        if (i)
            dfxc_buf_puts(b, ", ");
        dfxc_buf_u64(b, m->cp[i]);
    }
    dfxc_buf_puts(b, "], \"outer\": [");
    for (size_t i = 0; i < m->ncp; i++) {
        if (i)
            dfxc_buf_puts(b, ", ");
        if (m->cp_outer[i] == UINT64_MAX)
            dfxc_buf_puts(b, "-1");
        else
            dfxc_buf_u64(b, m->cp_outer[i]);
    }
    dfxc_buf_puts(b, "]},\n\"kernels\": [");
    for (size_t i = 0; i < m->nk; i++) {
        const dfxc_mkernel *k = &m->k[i];

        dfxc_buf_printf(b, "%s\n{\"name\": ", i ? "," : "");
        dfxc_buf_json_str(b, k->name);
        dfxc_buf_printf(b, ", \"count\": %llu, \"total_us\": ", (unsigned long long)k->count);
        dfxc_buf_us(b, k->total);
        dfxc_buf_puts(b, ", \"mean_us\": ");
        dfxc_buf_us(b, k->timed ? k->total / (int64_t)k->timed : 0);
        dfxc_buf_puts(b, ", \"max_us\": ");
        dfxc_buf_us(b, k->max);
        dfxc_buf_puts(b, "}");
    }
    dfxc_buf_puts(b, "]}");
}

/* Appends the whole embedded JSON document. */
static void report_data(const dfxc_model *m, dfxc_buf *b)
{
    dfxc_buf_printf(b, "{\"version\": 1, \"generator\": \"plexus\", \"clock\": ");
    dfxc_buf_json_str(b, m->clock);
    dfxc_buf_printf(b, ", \"sources\": [%s%s%s], \"timed\": %s, \"span_us\": ",
                    m->has_trace ? "\"trace.json\"" : "", m->has_trace && m->has_deps ? ", " : "",
                    m->has_deps ? "\"deps.json\"" : "", m->has_trace ? "true" : "false");
    dfxc_buf_us(b, m->span);
    dfxc_buf_puts(b, ", \"start_us\": ");
    dfxc_buf_us(b, m->first);
    dfxc_buf_puts(b, ",\n");
    report_tasks(m, b);
    report_graph(m, b);
}

px_status px_dfx_report_write(const char *out_dir, dfxc_model *m)
{
    px_status st;
    dfxc_buf b;

    if (!m->has_trace && !m->has_deps) {
        PX_LOG_INFO("dfx[report]: no trace.json or deps.json in %s; report.html not written",
                    out_dir);
        dfxc_remove(out_dir, "report.html");
        return PX_OK;
    }
    if ((st = dfxc_model_finish(m)) != PX_OK)
        return st;
    dfxc_buf_init(&b);
    dfxc_buf_put(&b, report_head, sizeof(report_head) - 1);
    report_data(m, &b);
    dfxc_buf_put(&b, report_tail, sizeof(report_tail) - 1);
    st = dfxc_buf_write_file(&b, out_dir, "report.html", "report");
    dfxc_buf_free(&b);
    return st;
}
