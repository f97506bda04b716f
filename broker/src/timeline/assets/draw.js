// kmock's timeline, 2/3: drawing the lanes, the findings and the per-partition view on canvases
// (plain canvas, no library; only what is in view is drawn).
// The page's scripts (data.js, draw.js, page.js) are concatenated, in that order, into one
// function body by broker/src/timeline/mod.rs: they share its constants and functions.

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
// A tick's time with as many decimals as the tick's size needs (3816.5 ms, not 3.817 s twice).
function fmtTick(t, tick) {
  const [unit, scale] = tick >= 1e5 ? ['s', 1e6] : tick >= 100 ? ['ms', 1e3] : ['µs', 1];
  const decimals = Math.max(0, Math.min(3, Math.ceil(-Math.log10(tick / scale) - 1e-9)));
  return (t / scale).toFixed(decimals) + ' ' + unit;
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
  if (S.dirty) {
    const wait = S.live ? S.rebuiltAt + 4 * S.rebuildCost - performance.now() : 0;
    if (wait <= 0) rebuild(); else setTimeout(redraw, wait);
  }
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
  // First item that may reach into view: arrivals are sorted, answered bars last at most
  // `longest`, unanswered ones (the first arrived at `open`) reach the end.
  let lo = 0, hi = items.length;
  const from = Math.min(S.t0 - lane.longest, lane.open);
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
    ctx.fillText(fmtTick(t, tick), x + 2, h / 2);
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
    retention: o.topic + '-' + o.partition + ' retention → log start ' + o.log_start_offset,
    group_converted: 'group ' + o.group_id + ' converted to ' + o.to,
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
  // The values range of the points in the time shown (of all, when none is).
  let lo = Infinity, hi = -Infinity;
  for (const p of points) if (p.t >= S.t0 && p.t <= S.t1) { lo = Math.min(lo, p.y); hi = Math.max(hi, p.y); }
  if (!isFinite(lo)) for (const p of points) { lo = Math.min(lo, p.y); hi = Math.max(hi, p.y); }
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
