// kmock's timeline, 1/3: the data: the journal's own JSON (embedded in a report, or read from the
// control API when live), the lanes and the per-partition series made of it.
// The page's scripts (data.js, draw.js, page.js) are concatenated, in that order, into one
// function body by broker/src/timeline/mod.rs: they share its constants and functions.

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
  series: new Map(), seriesKey: '', dirty: true, seriesDirty: true, rebuiltAt: 0, rebuildCost: 0, checkCost: 0, live: DATA.mode === 'live', drag: null,
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
  S.tmax = Math.max(S.tmax, end(e) || e.at_us);
  S.dirty = true;
  S.seriesDirty = true;
}

// Lanes (and, when entries came, the series) made afresh: on new entries and on a filter's
// change. Its cost is measured, so that a live page rebuilds at most a fifth of the time.
function rebuild() {
  const started = performance.now();
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
      lane = { conn: e.conn, broker: e.broker, client: e.client_id || '', peer: e.peer, items: [], longest: 0, open: Infinity };
      lanes.set(e.conn, lane);
    }
    if (!lane.client && e.client_id) lane.client = e.client_id;
    lane.items.push(e);
    e.$lane = lane;
    // Answered bars by their length; an unanswered one reaches S.tmax, which grows after
    // this (the running tmax here, and live entries later): its arrival is kept instead.
    const stop = end(e);
    if (stop === null) lane.open = Math.min(lane.open, e.at_us);
    else lane.longest = Math.max(lane.longest, stop - e.at_us);
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
  if (S.seriesDirty) buildSeries();
  S.dirty = S.seriesDirty = false;
  S.rebuiltAt = performance.now();
  S.rebuildCost = S.rebuiltAt - started;
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
  const labels = new Map();
  const count = (points, what) => points.filter((p) => p[what]).length;
  for (const [key, points] of series) {
    if (key.startsWith('commits')) {
      let last = null;
      for (const p of points) {
        p.regression = last !== null && p.y < last;
        if (p.err === 0) last = p.y;
      }
      labels.set(key, points.length + ' commits, ' + count(points, 'regression') + ' moved backwards');
    } else {
      const sent = new Map();
      for (const p of points) {
        const id = p.epoch + ':' + p.y;
        const before = sent.get(id);
        p.retry = before !== undefined;
        p.duplicate = p.retry && before.some((b) => b.answered && b.err === 0);
        if (!before) sent.set(id, [p]); else before.push(p);
      }
      const oosn = points.filter((p) => p.err === 45).length;
      labels.set(key, points.length + ' batches, ' + count(points, 'retry') + ' retries, ' +
        count(points, 'duplicate') + ' duplicates, ' + oosn + ' OUT_OF_ORDER_SEQUENCE_NUMBER');
    }
  }
  S.series = series;
  const sel = $('series');
  const keys = [...series.keys()].sort();
  sel.length = 0;
  for (const k of keys) sel.add(new Option(k + ' — ' + labels.get(k), k));
  if (!series.has(S.seriesKey)) S.seriesKey = keys[0] || '';
  sel.value = S.seriesKey;
}
