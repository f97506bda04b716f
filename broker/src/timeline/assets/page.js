// kmock's timeline, 3/3: details, findings list, mouse and filters, the live feed, start.
// The page's scripts (data.js, draw.js, page.js) are concatenated, in that order, into one
// function body by broker/src/timeline/mod.rs: they share its constants and functions.

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
  // The token as typed after '#token=' (to the end: a token may hold '&' or '+'), only
  // percent-decoded; then out of the address bar, history and bookmarks.
  const raw = /(?:^#|&)token=(.*)$/.exec(location.hash);
  let token = null;
  if (raw) {
    try { token = decodeURIComponent(raw[1]); } catch (_) { token = raw[1]; }
    history.replaceState(null, '', location.pathname);
  }
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const refused = async (r) => {
    const hint = r.status === 401 ? ' (open /ui#token=TOKEN, TOKEN the --control-token kmock was started with)' : '';
    throw new Error(r.status + ' ' + (await r.text()) + hint);
  };
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
      const span = S.t1 - S.t0;
      S.t1 = S.tmax + span * 0.02; S.t0 = S.t1 - span;
    }
    redraw();
    // Checks copy and read the whole journal: spaced by their measured cost, at least 1 s
    // and ten times the last one's time apart.
    if (!checking) checking = setTimeout(() => check(headers).finally(() => { checking = null; }), Math.max(1000, 10 * S.checkCost));
  }
}
function take(obj) {
  if (obj.error) { $('status').textContent = obj.error; return; }
  upsert(obj);
}
async function check(headers) {
  const started = performance.now();
  const r = await fetch('check', { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: '{}' });
  if (!r.ok) throw new Error('POST /check: ' + r.status + ' ' + (await r.text()));
  S.report = await r.json();
  S.checkCost = performance.now() - started;
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
