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
    "#timeline{overflow-x:auto}svg text{font:11px monospace}\n"
    "rect.task{stroke:#555;stroke-width:0.5}rect.task.cp{stroke:#d00;stroke-width:2}\n"
    ".chip{display:inline-block;margin:2px;padding:1px 6px;border:1px solid #999;"
    "border-radius:3px;font:12px monospace}.chip.cp{border-color:#d00}\n"
    "</style>\n</head>\n<body>\n<h1>plexus DFX report</h1>\n<p id=\"summary\"></p>\n"
    "<h2>Timeline</h2>\n<div id=\"timeline\"></div>\n"
    "<h2>Critical path</h2>\n<p id=\"cp-summary\"></p>\n<ol id=\"cp\"></ol>\n"
    "<h2>Kernels</h2>\n<table id=\"kernels\"><thead><tr><th>kernel</th><th>count</th>"
    "<th>total us</th><th>mean us</th><th>max us</th></tr></thead><tbody></tbody></table>\n"
    "<script type=\"application/json\" id=\"plexus-data\">";

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
    "  var onCp = {};\n"
    "  d.critical_path.tasks.forEach(function (id) { onCp[id] = true; });\n"
    "  document.getElementById('summary').textContent = d.tasks.length + ' tasks, ' +\n"
    "    d.edges.length + ' edges' + (d.timed ? ', span ' + us(d.span_us) + ' us' : '') +\n"
    "    '; clock ' + d.clock + '; from ' + d.sources.join(' and ');\n"
    "  var tl = document.getElementById('timeline');\n"
    "  if (d.timed) {\n"
    "    var rows = {}, order = [];\n"
    "    d.tasks.forEach(function (t) {\n"
    "      var key = t.pid + '/' + t.tid;\n"
    "      if (t.ts_us !== null && !(key in rows)) { rows[key] = 0; order.push(t); }\n"
    "    });\n"
    "    order.sort(function (a, b) { return a.pid - b.pid || a.tid - b.tid; });\n"
    "    order.forEach(function (t, i) { rows[t.pid + '/' + t.tid] = i; });\n"
    "    var names = {};\n"
    "    d.tracks.forEach(function (k) { names[k.pid + '/' + k.tid] = k.name; });\n"
    "    var W = 1000, L = 140, H = 22, span = d.span_us > 0 ? d.span_us : 1;\n"
    "    var svg = mk('svg', {width: L + W + 10, height: order.length * H + 24}, undefined, 1);\n"
    "    order.forEach(function (t, i) {\n"
    "      var key = t.pid + '/' + t.tid;\n"
    "      svg.appendChild(mk('text', {x: 2, y: i * H + 15},\n"
    "        names[key] || ('chip ' + t.pid + ' track ' + t.tid), 1));\n"
    "    });\n"
    "    d.tasks.forEach(function (t) {\n"
    "      if (t.ts_us === null) return;\n"
    "      var r = mk('rect', {x: L + t.ts_us / span * W, y: rows[t.pid + '/' + t.tid] * H + 2,\n"
    "        width: Math.max(t.dur_us / span * W, 0.5), height: H - 4,\n"
    "        fill: 'hsl(' + hue(t.kernel) + ',60%,65%)', 'data-task': t.id,\n"
    "        'class': onCp[t.id] ? 'task cp' : 'task'}, undefined, 1);\n"
    "      r.appendChild(mk('title', {}, 'task ' + t.id + ' ' + t.kernel + ': ' +\n"
    "        us(t.ts_us) + ' us + ' + us(t.dur_us) + ' us', 1));\n"
    "      svg.appendChild(r);\n"
    "    });\n"
    "    svg.appendChild(mk('text', {x: L, y: order.length * H + 18}, '0 us', 1));\n"
    "    svg.appendChild(mk('text', {x: L + W - 80, y: order.length * H + 18},\n"
    "      us(span) + ' us', 1));\n"
    "    tl.appendChild(svg);\n"
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
    "  var cp = d.critical_path, byId = {};\n"
    "  d.tasks.forEach(function (t) { byId[t.id] = t; });\n"
    "  document.getElementById('cp-summary').textContent = cp.tasks.length + ' tasks, ' +\n"
    "    (cp.by === 'duration' ? us(cp.length_us) + ' us of task time'"
    " : 'longest chain by task count (no timing)');\n"
    "  var ol = document.getElementById('cp');\n"
    "  cp.tasks.forEach(function (id) {\n"
    "    var t = byId[id];\n"
    "    ol.appendChild(mk('li', {'data-cp': id}, 'task ' + id + ' ' + (t ? t.kernel : '?') +\n"
    "      (t && t.ts_us !== null ? ' (' + us(t.dur_us) + ' us)' : '')));\n"
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
