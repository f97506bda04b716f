// kmock's timeline: the journal drawn on a canvas. Plain JavaScript, no library; the data is
// the journal's own JSON (embedded in a report, or read from the control API when live).
(() => {
  'use strict';
  const DATA = JSON.parse(document.getElementById('kmock-data').textContent);
  const ERR = DATA.error_names || {};
  const $ = (id) => document.getElementById(id);
  const ROW = 18, HEAD = 17, LABEL_W = 230, AXIS_H = 22;
  // Findings listed at most (all are drawn): a list of thousands helps no one read.
  const LISTED = 1000;
  const PALETTE = {
    Produce: '#3b7dd8', Fetch: '#8aa4c8', OffsetCommit: '#e07b00', OffsetFetch: '#c9a04d',
    JoinGroup: '#8e44ad', SyncGroup: '#a569bd', Heartbeat: '#b9b9c9', LeaveGroup: '#6c3483',
    Metadata: '#7fb77e', FindCoordinator: '#45a085', InitProducerId: '#16a0a0',
    ApiVersions: '#c8d0d8', ListOffsets: '#5d9fb5', EndTxn: '#b03a6e', TxnOffsetCommit: '#d35400',
    AddPartitionsToTxn: '#c0587e', AddOffsetsToTxn: '#d98aa8', ConsumerGroupHeartbeat: '#9b59b6',
  };
  const S = {
    entries: [], bySeq: new Map(), ops: [], report: DATA.report, rows: [], lanes: new Map(),
    height: 0, t0: 0, t1: 1, tmin: 0, tmax: 1, selected: new Set(), violation: -1,
    series: new Map(), seriesKey: '', dirty: true, live: DATA.mode === 'live', drag: null,
  };
  const canvas = $('timeline'), wrap = $('lanes-wrap'), spacer = $('spacer');
  const scanvas = $('series-canvas');

  // ---- the journal's JSON ----
  // The request summary as [kind, fields] (`{"produce": {…}}` → ["produce", {…}]), kept on
  // the entry: it is asked for on every rebuild.
  const summary = (e) => {
    if (e.$summary && e.$summary.of === e.request) return e.$summary.pair;
    let pair = [e.request || null, null];
    if (e.request && typeof e.request === 'object') {
      for (const kind in e.request) { pair = [kind, e.request[kind]]; break; }
    }
    e.$summary = { of: e.request, pair };
    return pair;
  };
  const errName = (c) => (ERR[c] || 'error') + ' (' + c + ')';
  const end = (e) => (e.response ? e.response.at_us : null);
  function groupsOf(e) {
    const [, s] = summary(e);
    if (!s || Array.isArray(s)) return [];
    if (s.group_id) return [s.group_id];
    return Array.isArray(s.groups) ? s.groups : [];
  }
  function partitionsOf(e) {
    const [, s] = summary(e);
    if (!s) return [];
    const list = Array.isArray(s) ? s : s.partitions;
    return Array.isArray(list) ? list : [];
  }
  function producerIdsOf(e) {
    const [, s] = summary(e);
    if (!s) return [];
    const ids = partitionsOf(e).map((p) => p.producer_id).filter((p) => p !== undefined);
    for (const k of ['producer_id', 'assigned_producer_id']) if (s[k] !== undefined && s[k] !== null) ids.push(s[k]);
    return ids;
  }

  // ---- filters ----
  function filters() {
    return {
      api: $('f-api').value, group: $('f-group').value.trim(), tp: $('f-tp').value.trim(),
      pid: $('f-pid').value.trim(), client: $('f-client').value.trim(),
      get any() { return this.api || this.group || this.tp || this.pid || this.client; },
    };
  }
  function matches(e, f) {
    if (!f.any) return true;
    if (f.api && e.api !== f.api) return false;
    if (f.group && !groupsOf(e).includes(f.group)) return false;
    if (f.tp && !partitionsOf(e).some((p) => p.topic === f.tp || p.topic + '-' + p.partition === f.tp)) return false;
    if (f.pid && !producerIdsOf(e).some((p) => String(p) === f.pid)) return false;
    if (f.client && !(e.client_id || '').includes(f.client)) return false;
    return true;
  }

  // ---- data in ----
  function upsert(e) {
    const old = S.bySeq.get(e.seq);
    if (old) {
      if (old.response && !e.response) return;
      Object.assign(old, e);
    } else {
      S.bySeq.set(e.seq, e);
      S.entries.push(e);
      if (e.operation) S.ops.push(e);
    }
    S.dirty = true;
  }

  function rebuild() {
    S.entries.sort((a, b) => a.seq - b.seq);
    S.ops.sort((a, b) => a.seq - b.seq);
    const f = filters();
    const lanes = new Map();
    let tmin = Infinity, tmax = -Infinity;
    const apis = new Set();
    for (const e of S.entries) {
      tmin = Math.min(tmin, e.at_us);
      tmax = Math.max(tmax, end(e) || e.at_us);
      e.$lane = null;
      if (e.operation) continue;
      if (e.api) apis.add(e.api);
      if (!matches(e, f)) continue;
      let lane = lanes.get(e.conn);
      if (!lane) {
        lane = { conn: e.conn, broker: e.broker, client: e.client_id || '', peer: e.peer, items: [], longest: 0 };
        lanes.set(e.conn, lane);
      }
      if (!lane.client && e.client_id) lane.client = e.client_id;
      lane.items.push(e);
      e.$lane = lane;
      lane.longest = Math.max(lane.longest, (end(e) || tmax) - e.at_us);
    }
    if (!isFinite(tmin)) { tmin = 0; tmax = 1; }
    S.tmin = tmin; S.tmax = Math.max(tmax, tmin + 1);
    const sorted = [...lanes.values()].sort((a, b) =>
      a.broker - b.broker || (a.client < b.client ? -1 : a.client > b.client ? 1 : 0) || a.conn - b.conn);
    const rows = [];
    let y = 0, broker = null, client = null;
    for (const lane of sorted) {
      if (lane.broker !== broker) {
        broker = lane.broker; client = null;
        rows.push({ head: 'broker ' + broker, y, h: HEAD, level: 0 }); y += HEAD;
      }
      if (lane.client !== client) {
        client = lane.client;
        rows.push({ head: 'client id ' + (client || '(none)'), y, h: HEAD, level: 1 }); y += HEAD;
      }
      lane.row = { lane, y, h: ROW };
      rows.push(lane.row); y += ROW;
    }
    S.rows = rows; S.lanes = lanes; S.height = y;
    canvas.dataset.lanes = String(lanes.size);
    canvas.dataset.entries = String(S.entries.length);
    const sel = $('f-api');
    if (sel.options.length - 1 !== apis.size) {
      const keep = sel.value;
      sel.length = 1;
      for (const a of [...apis].sort()) sel.add(new Option(a, a));
      sel.value = keep;
    }
    buildSeries();
    S.dirty = false;
    $('status').textContent = S.entries.length + ' entries · ' + lanes.size + ' lanes shown · ' +
      S.ops.length + ' cluster operations · ' + fmtTime(S.tmax - S.tmin) + ' of journal';
  }

  // ---- per-partition series ----
  function buildSeries() {
    const series = new Map();
    const add = (key, p) => { if (!series.has(key)) series.set(key, []); series.get(key).push(p); };
    for (const e of S.entries) {
      const [kind, s] = summary(e);
      if (kind === 'offset_commit') {
        for (const p of s.partitions) {
          add('commits ' + s.group_id + '/' + p.topic + '-' + p.partition,
            { e, t: e.at_us, y: p.offset, err: p.error_code || 0, answered: p.error_code !== null && p.error_code !== undefined });
        }
      } else if (kind === 'produce') {
        for (const p of s.partitions) {
          if (p.producer_id < 0) continue;
          add('sequences producer ' + p.producer_id + ' ' + p.topic + '-' + p.partition,
            { e, t: e.at_us, ta: end(e), y: p.base_sequence, n: p.record_count, epoch: p.producer_epoch,
              err: p.error_code || 0, answered: p.error_code !== null && p.error_code !== undefined });
        }
      }
    }
    for (const [key, points] of series) {
      if (key.startsWith('commits')) {
        let last = null;
        for (const p of points) {
          p.regression = last !== null && p.y < last;
          if (p.err === 0) last = p.y;
        }
      } else {
        const sent = new Map();
        for (const p of points) {
          const id = p.epoch + ':' + p.y;
          const before = sent.get(id);
          p.retry = before !== undefined;
          p.duplicate = p.retry && before.some((b) => b.answered && b.err === 0);
          if (!before) sent.set(id, [p]); else before.push(p);
        }
      }
    }
    S.series = series;
    const sel = $('series');
    const keys = [...series.keys()].sort();
    if (sel.options.length !== keys.length) {
      sel.length = 0;
      for (const k of keys) sel.add(new Option(k, k));
    }
    if (!series.has(S.seriesKey)) S.seriesKey = keys[0] || '';
    sel.value = S.seriesKey;
  }

  // ---- drawing ----
  const colour = (api) => {
    if (PALETTE[api]) return PALETTE[api];
    let h = 0;
    for (const c of api || '?') h = (h * 31 + c.charCodeAt(0)) % 360;
    return 'hsl(' + h + ',45%,60%)';
  };
  function fmtTime(us) {
    if (Math.abs(us) >= 1e6) return (us / 1e6).toFixed(us >= 1e7 ? 1 : 3) + ' s';
    if (Math.abs(us) >= 1e3) return (us / 1e3).toFixed(us >= 1e4 ? 1 : 2) + ' ms';
    return Math.round(us) + ' µs';
  }
  function sizeCanvas(c, w, h) {
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
      c.style.width = w + 'px'; c.style.height = h + 'px';
    }
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  }
  const plotW = () => Math.max(50, canvas.clientWidth - LABEL_W);
  const xOf = (t) => LABEL_W + (t - S.t0) / (S.t1 - S.t0) * plotW();
  const tOf = (x) => S.t0 + (x - LABEL_W) / plotW() * (S.t1 - S.t0);

  function laneY(e) {
    const lane = e.$lane;
    return lane ? AXIS_H + lane.row.y - wrap.scrollTop + ROW / 2 : null;
  }

  function draw() {
    if (S.dirty) rebuild();
    const W = wrap.clientWidth, H = wrap.clientHeight;
    spacer.style.height = Math.max(0, S.height + AXIS_H - H) + 'px';
    const ctx = sizeCanvas(canvas, W, H);
    ctx.clearRect(0, 0, W, H);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const top = wrap.scrollTop;
    // Lanes.
    for (const row of S.rows) {
      const y = AXIS_H + row.y - top;
      if (y + row.h < AXIS_H || y > H) continue;
      if (row.head) {
        ctx.fillStyle = row.level ? '#f1f4f8' : '#e3e8ef';
        ctx.fillRect(0, y, W, row.h);
        ctx.fillStyle = '#1d2430';
        ctx.fillText(row.head, 4 + row.level * 10, y + row.h / 2);
        continue;
      }
      const lane = row.lane;
      ctx.fillStyle = '#3b4656';
      ctx.fillText('conn ' + lane.conn + ' · ' + lane.peer, 24, y + ROW / 2);
      drawItems(ctx, lane, y);
    }
    // Cluster operations.
    for (const op of S.ops) {
      const x = xOf(op.at_us);
      if (x < LABEL_W || x > W) continue;
      ctx.strokeStyle = '#222'; ctx.setLineDash([4, 3]);
      ctx.beginPath(); ctx.moveTo(x, AXIS_H); ctx.lineTo(x, H); ctx.stroke(); ctx.setLineDash([]);
      ctx.fillStyle = S.selected.has(op.seq) ? '#d00' : '#222';
      ctx.beginPath(); ctx.moveTo(x - 5, AXIS_H); ctx.lineTo(x + 5, AXIS_H); ctx.lineTo(x, AXIS_H + 8); ctx.fill();
      ctx.fillText(opLabel(op), x + 6, AXIS_H + 8);
    }
    // Findings: links between the entries they name.
    // Only the findings with an entry in a lane in view; marks as squares (canvas fills
    // rectangles fastest: a journal may hold thousands of findings).
    const vs = (S.report && S.report.violations) || [];
    const link = (v, r) => {
      const pts = [];
      for (const ref of v.entries) {
        const e = S.bySeq.get(ref.seq), y = e && laneY(e);
        if (y !== null && y !== undefined && y > AXIS_H - 10 && y < H + 10) pts.push([xOf(e.at_us), y]);
      }
      if (!pts.length || pts.every(([x]) => x < LABEL_W) || pts.every(([x]) => x > W)) return null;
      ctx.beginPath();
      pts.forEach(([x, y], j) => (j ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
      ctx.stroke();
      for (const [x, y] of pts) ctx.strokeRect(x - r, y - r, 2 * r, 2 * r);
      return pts;
    };
    ctx.lineWidth = 1.5;
    vs.forEach((v, i) => {
      if (i === S.violation) return;
      ctx.strokeStyle = v.severity === 'warning' ? '#d9a400' : '#d11';
      link(v, 3);
    });
    const picked = vs[S.violation];
    if (picked) {
      const bad = picked.severity !== 'warning';
      ctx.lineWidth = 3; ctx.strokeStyle = bad ? '#d11' : '#d9a400';
      const pts = link(picked, 5);
      if (pts) {
        const [x, y] = pts[pts.length - 1];
        ctx.fillStyle = bad ? '#a3221a' : '#7a5a00';
        ctx.fillText(picked.kind + ': ' + picked.key, x + 8, y - 9);
      }
    }
    ctx.lineWidth = 1;
    // Axis on top, over the lanes, and the label column.
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, AXIS_H);
    drawAxis(ctx, W, AXIS_H);
    drawSeries();
  }

  function drawItems(ctx, lane, y) {
    const items = lane.items;
    // First item that may reach into view: arrivals are sorted, bars last at most `longest`.
    let lo = 0, hi = items.length;
    const from = S.t0 - lane.longest;
    while (lo < hi) { const m = (lo + hi) >> 1; if (items[m].at_us < from) lo = m + 1; else hi = m; }
    const W = canvas.clientWidth;
    let lastX = -1;
    for (let i = lo; i < items.length; i++) {
      const e = items[i];
      const x0 = Math.max(LABEL_W, xOf(e.at_us));
      if (x0 > W) break;
      const stop = end(e);
      const x1 = Math.min(W, xOf(stop === null ? S.tmax : stop));
      if (x1 < LABEL_W) continue;
      const w = Math.max(1.5, x1 - x0);
      if (w < 2 && Math.floor(x0) === lastX && !e.faults.length && !S.selected.has(e.seq)) continue;
      lastX = Math.floor(x0);
      const errs = e.response ? e.response.error_codes : [];
      ctx.fillStyle = e.bad_request ? '#000' : colour(e.api);
      ctx.globalAlpha = stop === null ? 0.35 : 1;
      ctx.fillRect(x0, y + 3, w, ROW - 6);
      ctx.globalAlpha = 1;
      if (errs.length || e.bad_request) {
        ctx.strokeStyle = '#d11'; ctx.lineWidth = 2; ctx.strokeRect(x0, y + 3, w, ROW - 6); ctx.lineWidth = 1;
      }
      if (S.selected.has(e.seq)) { ctx.strokeStyle = '#000'; ctx.lineWidth = 2; ctx.strokeRect(x0 - 2, y + 1, w + 4, ROW - 2); ctx.lineWidth = 1; }
      if (e.faults.length) {
        ctx.fillStyle = '#ff6a00';
        ctx.beginPath(); ctx.moveTo(x0 - 4, y); ctx.lineTo(x0 + 4, y); ctx.lineTo(x0, y + 6); ctx.fill();
      }
      if (w > 60) {
        ctx.fillStyle = '#fff';
        const label = e.api + (errs.length ? ' ' + errs.map(errName).join(', ') : '');
        ctx.save(); ctx.beginPath(); ctx.rect(x0, y, w, ROW); ctx.clip();
        ctx.fillText(label, x0 + 3, y + ROW / 2); ctx.restore();
      }
    }
  }

  function drawAxis(ctx, W, h) {
    const span = S.t1 - S.t0;
    const step = Math.pow(10, Math.floor(Math.log10(span / 6)));
    const tick = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 10) || step * 10;
    ctx.fillStyle = '#3b4656'; ctx.strokeStyle = '#c5ccd6';
    for (let t = Math.ceil(S.t0 / tick) * tick; t <= S.t1; t += tick) {
      const x = xOf(t);
      ctx.beginPath(); ctx.moveTo(x, h - 5); ctx.lineTo(x, h); ctx.stroke();
      ctx.fillText(fmtTime(t), x + 2, h / 2);
    }
    ctx.fillStyle = '#1d2430';
    ctx.fillText('time since start · ' + fmtTime(span) + ' shown', 4, h / 2);
  }

  function opLabel(op) {
    const o = op.operation;
    const what = { broker_down: 'broker ' + o.node_id + ' down', broker_up: 'broker ' + o.node_id + ' up',
      move_leader: o.topic + '-' + o.partition + ' leader → ' + o.node_id,
      move_coordinator: 'group ' + o.group_id + ' coordinator → ' + o.node_id,
      move_transaction_coordinator: 'txn ' + o.transactional_id + ' coordinator → ' + o.node_id,
      reset: 'reset' }[o.op];
    return what || o.op;
  }

  function drawSeries() {
    const W = scanvas.clientWidth, H = scanvas.clientHeight;
    const ctx = sizeCanvas(scanvas, W, H);
    ctx.clearRect(0, 0, W, H);
    ctx.font = '11px system-ui, sans-serif'; ctx.textBaseline = 'middle';
    const points = S.series.get(S.seriesKey) || [];
    const commits = S.seriesKey.startsWith('commits');
    $('series-legend').textContent = commits
      ? 'committed offset per OffsetCommit: ■ accepted, □ refused, red ▼ moved backwards'
      : 'base sequence sent (■) and answered (—|): orange □ retry, purple ■ duplicate, red ✕ OUT_OF_ORDER_SEQUENCE_NUMBER, grey ✕ other error';
    if (!points.length) { ctx.fillStyle = '#6b7685'; ctx.fillText('no OffsetCommit or idempotent Produce in this journal', 10, H / 2); return; }
    let lo = Infinity, hi = -Infinity;
    for (const p of points) { lo = Math.min(lo, p.y); hi = Math.max(hi, p.y); }
    if (hi === lo) { hi += 1; lo -= 1; }
    const yOf = (v) => H - 14 - (v - lo) / (hi - lo) * (H - 28);
    ctx.fillStyle = '#3b4656';
    ctx.fillText(String(hi), 4, yOf(hi)); ctx.fillText(String(lo), 4, yOf(lo));
    ctx.fillText(commits ? 'offset' : 'sequence', 4, H / 2);
    ctx.save(); ctx.beginPath(); ctx.rect(LABEL_W, 0, W - LABEL_W, H); ctx.clip();
    if (commits) {
      ctx.strokeStyle = '#e07b00'; ctx.beginPath();
      // The committed offset holds from one accepted commit to the next: a step line.
      let started = false;
      for (const p of points) {
        if (p.err) continue;
        const x = xOf(p.t), y = yOf(p.y);
        if (!started) { ctx.moveTo(x, y); started = true; } else { ctx.lineTo(x, ctx.lastY); ctx.lineTo(x, y); }
        ctx.lastY = y;
      }
      ctx.stroke();
    }
    // Marks as rectangles and short strokes, nearest-first culled: a series may hold tens of
    // thousands of points.
    const mark = (style, fill, width, draw) => {
      ctx.lineWidth = width || 1;
      if (fill) ctx.fillStyle = style; else ctx.strokeStyle = style;
      draw();
    };
    const cross = (x, y) => { ctx.beginPath(); ctx.moveTo(x - 5, y - 5); ctx.lineTo(x + 5, y + 5); ctx.moveTo(x + 5, y - 5); ctx.lineTo(x - 5, y + 5); ctx.stroke(); };
    for (const p of points) {
      const x = xOf(p.t), y = yOf(p.y);
      p.px = x; p.py = y;
      if (x < LABEL_W - 5 || x > W + 5) continue;
      if (S.selected.has(p.e.seq)) mark('#000', false, 1.5, () => ctx.strokeRect(x - 7, y - 7, 14, 14));
      if (commits) {
        if (p.regression) {
          mark('#d11', true, 1, () => { ctx.beginPath(); ctx.moveTo(x - 6, y - 6); ctx.lineTo(x + 6, y - 6); ctx.lineTo(x, y + 4); ctx.fill(); });
        }
        if (p.err) mark('#e07b00', false, 1, () => ctx.strokeRect(x - 3, y - 3, 6, 6));
        else mark(p.regression ? '#d11' : '#e07b00', true, 1, () => ctx.fillRect(x - 3, y - 3, 6, 6));
        continue;
      }
      if (p.ta !== null) {
        const xa = xOf(p.ta);
        mark('#9aa7b8', true, 1, () => { ctx.fillRect(x, y, Math.max(1, xa - x), 1); ctx.fillRect(xa, y - 4, 1, 8); });
      }
      mark('#3b7dd8', true, 1, () => ctx.fillRect(x - 3, y - 3, 6, 6));
      if (p.duplicate) mark('#8e44ad', true, 1, () => ctx.fillRect(x - 4, y - 4, 8, 8));
      else if (p.retry) mark('#ff6a00', false, 2, () => ctx.strokeRect(x - 6, y - 6, 12, 12));
      if (p.err) mark(p.err === 45 ? '#d11' : '#777', false, 2, () => cross(x, y));
    }
    ctx.lineWidth = 1;
    ctx.restore();
  }

  let frame = 0;
  const redraw = () => { if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); }); };

  // ---- details ----
  function describe(e) {
    const head = e.operation
      ? 'seq ' + e.seq + ' · ' + fmtTime(e.at_us) + ' · cluster operation: ' + opLabel(e)
      : 'seq ' + e.seq + ' · ' + e.api + ' v' + e.version + ' · broker ' + e.broker + ' · conn ' + e.conn +
        ' · client ' + (e.client_id || '(none)') + ' · at ' + fmtTime(e.at_us) +
        (e.response ? ' · answered after ' + fmtTime(e.response.at_us - e.at_us) : ' · not answered');
    const lines = [];
    const [kind, s] = summary(e);
    if (kind === 'offset_commit') {
      lines.push('group ' + s.group_id + ' generation ' + s.generation_id + ' member ' + s.member_id);
      for (const p of s.partitions) lines.push('  ' + p.topic + '-' + p.partition + ' → offset ' + p.offset + (p.error_code ? ' ' + errName(p.error_code) : ''));
    } else if (kind === 'produce') {
      lines.push('acks ' + s.acks + (s.transactional_id ? ' transactional id ' + s.transactional_id : ''));
      for (const p of s.partitions) {
        lines.push('  ' + p.topic + '-' + p.partition + ' producer ' + p.producer_id + ' epoch ' + p.producer_epoch +
          ' sequence ' + p.base_sequence + '..' + (p.base_sequence + p.record_count - 1) + ' (' + p.record_count + ' records)' +
          (p.base_offset !== null && p.base_offset !== undefined ? ' → offset ' + p.base_offset : '') + (p.error_code ? ' ' + errName(p.error_code) : ''));
      }
    }
    if (e.response && e.response.error_codes.length) lines.push('errors: ' + e.response.error_codes.map(errName).join(', '));
    if (e.faults.length) lines.push('faults fired: ' + e.faults.join(', '));
    if (e.bad_request) lines.push('bad request: ' + e.bad_request);
    const full = JSON.stringify(e.operation || e.request, null, 1);
    const div = document.createElement('div');
    const h = document.createElement('h3'); h.textContent = head;
    const pre = document.createElement('pre'); pre.textContent = (lines.length ? lines.join('\n') + '\n\n' : '') + full;
    div.append(h, pre);
    return div;
  }
  function show(entries, title) {
    const d = $('detail');
    d.replaceChildren();
    if (title) { const p = document.createElement('p'); p.textContent = title; d.append(p); }
    for (const e of entries) d.append(describe(e));
    S.selected = new Set(entries.map((e) => e.seq));
    redraw();
  }

  function listViolations() {
    const ol = $('violations');
    ol.replaceChildren();
    const r = S.report;
    const verdict = $('verdict');
    if (!r) { verdict.textContent = 'checks not run'; return; }
    const bad = r.violations.filter((v) => v.severity !== 'warning').length;
    const warn = r.violations.length - bad;
    verdict.className = 'verdict ' + (bad ? 'dirty' : warn ? 'warn' : 'clean');
    verdict.textContent = (bad ? bad + ' violation' + (bad > 1 ? 's' : '') : 'no violation') +
      (warn ? ', ' + warn + ' warning' + (warn > 1 ? 's' : '') : '') + ' · ' + r.checks.length + ' checks' +
      (r.skipped && r.skipped.length ? ' · skipped: ' + r.skipped.join('; ') : '') +
      (DATA.evicted ? ' · ' + DATA.evicted + ' entries had left memory before this journal was taken' : '');
    r.violations.forEach((v, i) => {
      if (i >= LISTED) return;
      const li = document.createElement('li');
      li.className = (v.severity === 'warning' ? 'warning' : 'violation') + (i === S.violation ? ' selected' : '');
      const a = document.createElement('a');
      a.href = '#'; a.dataset.violation = String(i);
      const k = document.createElement('span'); k.className = 'kind'; k.textContent = v.kind + ' ' + v.key;
      a.append(k, document.createTextNode(': ' + v.message));
      a.addEventListener('click', (ev) => { ev.preventDefault(); pickViolation(i); });
      li.append(a); ol.append(li);
    });
    const more = r.violations.length - LISTED;
    const note = !r.violations.length ? 'none' : more > 0 ? 'and ' + more + ' more (kmock check lists them all)' : null;
    if (note) { const li = document.createElement('li'); li.className = 'muted'; li.textContent = note; ol.append(li); }
  }
  function pickViolation(i) {
    S.violation = i;
    const v = S.report.violations[i];
    const es = v.entries.map((r) => S.bySeq.get(r.seq)).filter(Boolean);
    listViolations();
    show(es, v.kind + ' (' + v.severity + ') ' + v.key + ': ' + v.message);
    if (es.length) {
      const a = Math.min(...es.map((e) => e.at_us)), b = Math.max(...es.map((e) => end(e) || e.at_us));
      const pad = Math.max(2000, (b - a) * 0.5);
      S.t0 = a - pad; S.t1 = b + pad;
      const lane = S.lanes.get(es[0].conn);
      if (lane) wrap.scrollTop = Math.max(0, lane.row.y - 60);
    }
    const key = 'commits ' + v.key;
    if (S.series.has(key)) { S.seriesKey = key; $('series').value = key; }
    $('follow').checked = false;
    redraw();
  }

  // ---- interaction ----
  function hit(x, y) {
    if (y < AXIS_H + 10 && y >= 0) {
      const op = S.ops.find((o) => Math.abs(xOf(o.at_us) - x) < 6);
      if (op) return op;
    }
    const ry = y - AXIS_H + wrap.scrollTop;
    const row = S.rows.find((r) => !r.head && ry >= r.y && ry < r.y + r.h);
    if (!row) return null;
    let best = null, dist = 4;
    for (const e of row.lane.items) {
      const x0 = xOf(e.at_us), x1 = Math.max(x0 + 1.5, xOf(end(e) === null ? S.tmax : end(e)));
      const d = x < x0 ? x0 - x : x > x1 ? x - x1 : 0;
      if (d < dist || (d === 0 && dist === 0)) { best = e; dist = d; }
    }
    return best;
  }
  canvas.addEventListener('mousedown', (ev) => {
    S.drag = { x: ev.offsetX, y: ev.offsetY, t0: S.t0, t1: S.t1, top: wrap.scrollTop, moved: false };
  });
  window.addEventListener('mousemove', (ev) => {
    const d = S.drag;
    if (!d) return;
    const dx = ev.clientX - canvas.getBoundingClientRect().left - d.x;
    const dy = ev.clientY - canvas.getBoundingClientRect().top - d.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) d.moved = true;
    if (!d.moved) return;
    const dt = dx / plotW() * (d.t1 - d.t0);
    S.t0 = d.t0 - dt; S.t1 = d.t1 - dt;
    wrap.scrollTop = d.top - dy;
    $('follow').checked = false;
    redraw();
  });
  window.addEventListener('mouseup', (ev) => {
    const d = S.drag;
    S.drag = null;
    if (!d || d.moved || ev.target !== canvas) return;
    const e = hit(ev.offsetX, ev.offsetY);
    if (e) show([e]);
  });
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    if (ev.shiftKey) { wrap.scrollTop += ev.deltaY; redraw(); return; }
    const t = tOf(ev.offsetX), k = Math.exp(ev.deltaY * 0.0015);
    S.t0 = t - (t - S.t0) * k; S.t1 = t + (S.t1 - t) * k;
    if (S.t1 - S.t0 < 10) { S.t1 = S.t0 + 10; }
    $('follow').checked = false;
    redraw();
  }, { passive: false });
  scanvas.addEventListener('click', (ev) => {
    const points = S.series.get(S.seriesKey) || [];
    let best = null, dist = 8;
    for (const p of points) {
      if (p.px === undefined || p.px < LABEL_W - 5) continue;
      const d = Math.hypot(p.px - ev.offsetX, p.py - ev.offsetY);
      if (d < dist) { best = p; dist = d; }
    }
    if (best) show([best.e]);
  });
  wrap.addEventListener('scroll', redraw);
  window.addEventListener('resize', redraw);
  $('series').addEventListener('change', (ev) => { S.seriesKey = ev.target.value; redraw(); });
  for (const id of ['f-api', 'f-group', 'f-tp', 'f-pid', 'f-client']) {
    $(id).addEventListener('input', () => { S.dirty = true; redraw(); });
  }
  $('filters').addEventListener('submit', (ev) => ev.preventDefault());
  function fit() { S.t0 = S.tmin - (S.tmax - S.tmin) * 0.02; S.t1 = S.tmax + (S.tmax - S.tmin) * 0.02 + 1; redraw(); }
  $('fit').addEventListener('click', () => { if (S.dirty) rebuild(); fit(); });

  // ---- live: the control API ----
  async function live() {
    $('follow-label').hidden = false;
    const token = new URLSearchParams(location.hash.slice(1)).get('token');
    const headers = token ? { Authorization: 'Bearer ' + token } : {};
    const refused = async (r) => { throw new Error(r.status + ' ' + (await r.text())); };
    // The stream first: what completes after it starts comes through it, what completed
    // before is in the listing read next.
    const stream = await fetch('journal/stream', { headers });
    if (!stream.ok) await refused(stream);
    const listing = await fetch('journal', { headers });
    if (!listing.ok) await refused(listing);
    for (const line of (await listing.text()).split('\n')) if (line.trim()) take(JSON.parse(line));
    await check(headers);
    rebuild(); fit();
    let checking = null;
    const reader = stream.body.getReader(), utf8 = new TextDecoder();
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) { $('status').textContent += ' · the stream ended (kmock stopped)'; return; }
      rest += utf8.decode(value, { stream: true });
      const lines = rest.split('\n');
      rest = lines.pop();
      for (const line of lines) if (line.trim()) take(JSON.parse(line));
      if ($('follow').checked) {
        rebuild();
        const span = S.t1 - S.t0;
        S.t1 = S.tmax + span * 0.02; S.t0 = S.t1 - span;
      }
      redraw();
      if (!checking) checking = setTimeout(() => check(headers).finally(() => { checking = null; }), 1000);
    }
  }
  function take(obj) {
    if (obj.error) { $('status').textContent = obj.error; return; }
    upsert(obj);
  }
  async function check(headers) {
    const r = await fetch('check', { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: '{}' });
    if (!r.ok) throw new Error('POST /check: ' + r.status + ' ' + (await r.text()));
    S.report = await r.json();
    listViolations();
    redraw();
  }

  // For tests and the curious: the state, read-only by convention.
  window.kmockTimeline = { state: S, pickViolation, redraw, ready: false };
  const done = () => { window.kmockTimeline.ready = true; document.body.dataset.ready = 'true'; };
  if (S.live) {
    live().then(() => {}, (e) => { $('verdict').textContent = 'cannot read the control API: ' + e.message; console.error(e); });
    // Ready once the first listing and check are drawn.
    const wait = setInterval(() => { if (S.report) { clearInterval(wait); done(); } }, 50);
  } else {
    for (const e of DATA.entries) upsert(e);
    rebuild(); listViolations(); fit(); draw(); done();
  }
})();
