
(function () {
'use strict';
const D = JSON.parse(document.getElementById('data').textContent);
const S = D.S, C = D.c, Q = D.Q, N = C.id.length, NQ = Q.id.length, ST = D.steer;
const s = (i) => (i === null || i === undefined ? null : S[i]);
const ROWH = 28, QROWH = 26;
const $ = (id) => document.getElementById(id);
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
const runs = D.meta.runs;
$('title').textContent = 'Trace browser';
$('meta').textContent = runs.map((r) => r.path + ' \u00b7 ' + r.model + (r.labelling ? ' \u00b7 labels: ' + r.labelling : ' \u00b7 unlabelled')).join(' | ');

// ---------------------------------------------------------------- facets
const okName = (v) => (v === 1 ? 'correct' : v === 0 ? 'wrong' : 'unparsed');
const steerByRow = new Map();
if (ST) for (let j = 0; j < ST.row.length; j++) {
  const r = ST.row[j];
  if (!steerByRow.has(r)) steerByRow.set(r, []);
  steerByRow.get(r).push(j);
}
const FACETS = [
  ['condition', (i) => s(C.cond[i])],
  ['strategy', (i) => (C.mem[i] ? C.mem[i].map((m) => S[m[0]]) : s(C.strat[i]))],
  ['position', (i) => (C.mem[i] ? C.mem[i].map((m) => S[m[1]]) : s(C.pos[i]))],
  ['label', (i) => s(C.lab[i])],
  ['correct', (i) => okName(C.ok[i])],
  ['task', (i) => s(C.task[i])],
  ['level', (i) => s(C.lvl[i])],
  ['model', (i) => runs[C.run[i]].model],
  ['dataset', (i) => s(C.ds[i])],
];
// the probe's settings apart from the random controls: a case moved only by a random direction is not the probe's
const CONTROL = new Set(['random', 'random_cov', 'none']);
const isProbe = (j) => !CONTROL.has(S[ST.basis[j]]);
const EFFECT_NAME = { moved: 'moved', changed: 'changed, still wrong', broken: 'broken', same: 'same', unparsed: 'unparsed' };
function steeredValue(i) {
  const js = steerByRow.get(i);
  if (!js) return 'not steered';
  const by = (probe, eff) => js.some((j) => isProbe(j) === probe && S[ST.effect[j]] === eff);
  if (by(true, 'moved')) return 'moved by the probe';
  if (by(true, 'changed')) return 'changed by the probe, still wrong';
  if (by(false, 'moved')) return 'moved by a random control only';
  return 'not moved';
}
if (ST) FACETS.push(['steered', steeredValue]);
FACETS.push(['question', (i) => Q.id[C.q[i]]]);
const HIDDEN = new Set(['question']);
const F = FACETS.map(([name, get]) => {
  const vals = [], idx = new Map(), codes = new Array(N);
  for (let i = 0; i < N; i++) {
    let v = get(i);
    const many = Array.isArray(v);
    const list = (many ? v : [v]).map((x) => (x === null || x === undefined ? 'none' : String(x)));
    const cs = [];
    for (const x of list) {
      let c = idx.get(x);
      if (c === undefined) { c = vals.length; vals.push(x); idx.set(x, c); }
      if (!cs.includes(c)) cs.push(c);
    }
    codes[i] = cs.length === 1 ? cs[0] : cs;
  }
  return { name, vals, idx, codes, sel: new Set(), counts: new Int32Array(vals.length) };
});
const FBY = Object.fromEntries(F.map((f) => [f.name, f]));
let query = '', hay = null;
function haystack(i) {
  if (!hay) hay = new Array(N);
  let h = hay[i];
  if (h === undefined) {
    h = hay[i] = [C.id[i], Q.id[C.q[i]], Q.text[C.q[i]], C.text[i], s(C.edit[i]) || '', s(C.orig[i]) || '',
                  s(C.ans[i]) || ''].join('\n').toLowerCase();
  }
  return h;
}
function passes(f, i) {
  if (!f.sel.size) return true;
  const c = f.codes[i];
  if (typeof c === 'number') return f.sel.has(c);
  for (const x of c) if (f.sel.has(x)) return true;
  return false;
}
let visible = [];
function recompute() {
  const q = query.trim().toLowerCase();
  for (const f of F) f.counts.fill(0);
  const out = [];
  const nf = F.length;
  for (let i = 0; i < N; i++) {
    if (q && haystack(i).indexOf(q) < 0) continue;
    let fails = 0, failed = -1;
    for (let k = 0; k < nf; k++) if (!passes(F[k], i)) { fails++; failed = k; if (fails > 1) break; }
    if (fails > 1) continue;
    const bump = (f) => { const c = f.codes[i]; if (typeof c === 'number') f.counts[c]++; else for (const x of c) f.counts[x]++; };
    if (fails === 0) { out.push(i); for (const f of F) bump(f); } else bump(F[failed]);
  }
  visible = out;
  posOf = new Map();
  for (let k = 0; k < out.length; k++) posOf.set(out[k], k);
}
let posOf = new Map();

// ---------------------------------------------------------------- facet panel
const facetBox = $('facets');
const checks = [];
function buildFacets() {
  facetBox.textContent = '';
  for (const f of F) {
    if (HIDDEN.has(f.name) && !f.sel.size) continue;
    if (f.vals.length < 2 && !f.sel.size && f.name !== 'label') continue;
    const box = el('div', 'facet');
    box.dataset.facet = f.name;
    box.append(el('h4', null, f.name));
    const order = f.vals.map((v, c) => c).sort((a, b) => f.vals[a].localeCompare(f.vals[b], undefined, { numeric: true }));
    for (const c of order) {
      if (HIDDEN.has(f.name) && !f.sel.has(c)) continue;
      const lab = el('label');
      const cb = el('input');
      cb.type = 'checkbox';
      cb.checked = f.sel.has(c);
      cb.dataset.facet = f.name; cb.dataset.value = f.vals[c];
      cb.addEventListener('change', () => { if (cb.checked) f.sel.add(c); else f.sel.delete(c); update(true); });
      const n = el('span', 'n');
      lab.append(cb, el('span', null, f.vals[c]), n);
      box.append(lab);
      checks.push([f, c, lab, n]);
    }
    if (f.name === 'steered' && ST && ST.counts) box.append(steerCounts());
    facetBox.append(box);
  }
}
// each probe setting's C cases moved of all its C cases, and the random controls' (the sweep's moved_of_all,
// counted from the same generations: the report's numbers)
function steerCounts() {
  const box = el('div', 'steercounts');
  box.dataset.role = 'steer-counts';
  for (const d of ST.counts) {
    const who = CONTROL.has(d.basis) ? d.basis + ' controls' : 'probe ' + d.setting;
    const line = el('div', null, who + ': moved ' + d.k + '/' + d.n + (d.strongest ? ' (the report\'s strongest)' : ''));
    line.dataset.setting = d.setting; line.dataset.k = d.k; line.dataset.n = d.n;
    box.append(line);
  }
  return box;
}
function refreshFacetCounts() {
  for (const [f, c, lab, n] of checks) {
    n.textContent = String(f.counts[c]);
    lab.classList.toggle('zero', f.counts[c] === 0);
  }
}

// ---------------------------------------------------------------- virtual list
function cell(i) {  // strategy/position, or every cell this generation fills (memberships)
  if (!C.mem[i]) return (s(C.strat[i]) || '') + '/' + (s(C.pos[i]) || '');
  const uniq = (xs) => [...new Set(xs)].join('+');
  return uniq(C.mem[i].map((m) => S[m[0]])) + '/' + uniq(C.mem[i].map((m) => S[m[1]]));
}
const list = $('list'), spacer = $('spacer');
let selected = -1;
function renderList() {
  spacer.style.height = visible.length * ROWH + 'px';
  const top = list.scrollTop, h = list.clientHeight || 600;
  const a = Math.max(0, Math.floor(top / ROWH) - 10), b = Math.min(visible.length, Math.ceil((top + h) / ROWH) + 10);
  const frag = document.createDocumentFragment();
  for (let k = a; k < b; k++) {
    const i = visible[k];
    const r = el('div', 'row' + (i === selected ? ' sel' : ''));
    r.style.top = k * ROWH + 'px';
    r.dataset.id = C.id[i];
    const lab = s(C.lab[i]) || 'none';
    r.append(el('span', 'badge lab-' + lab, lab === 'none' ? '\u2013' : lab),
             el('span', 'ok' + C.ok[i], C.ok[i] === 1 ? '\u2713' : C.ok[i] === 0 ? '\u2717' : '?'),
             el('span', null, (s(C.cond[i]) === 'control' ? 'ctrl ' : '') + cell(i)),
             el('span', 'snip', Q.id[C.q[i]] + ' \u00b7 ' + C.text[i].slice(0, 120)));
    r.addEventListener('click', () => select(i, true));
    frag.append(r);
  }
  spacer.textContent = '';
  spacer.append(frag);
}
let raf = 0;
list.addEventListener('scroll', () => { if (!raf) raf = requestAnimationFrame(() => { raf = 0; renderList(); }); });
window.addEventListener('resize', () => { renderList(); renderQ(); });

// ---------------------------------------------------------------- detail
const pairs = new Map();
for (let i = 0; i < N; i++) {
  const key = C.run[i] + '|' + C.q[i] + '|' + C.li[i];
  let p = pairs.get(key);
  if (!p) pairs.set(key, (p = { control: [], perturbed: [] }));
  (s(C.cond[i]) === 'control' ? p.control : p.perturbed).push(i);
}
const rowById = new Map();
for (let i = 0; i < N; i++) rowById.set(C.id[i], i);

function commonAffix(a, b) {
  let p = 0;
  while (p < a.length && p < b.length && a[p] === b[p]) p++;
  let q = 0;
  while (q < a.length - p && q < b.length - p && a[a.length - 1 - q] === b[b.length - 1 - q]) q++;
  return [p, q];
}
function diffLine(cls, sign, text, p, q) {
  const d = el('div', 'line ' + cls);
  d.append(sign + ' ' + text.slice(0, p));
  if (text.length - q > p) d.append(el('em', null, text.slice(p, text.length - q)));
  d.append(text.slice(text.length - q));
  return d;
}
function marked(text, spans) {
  const box = el('div', 'text');
  if (!spans || !spans.length) { box.textContent = text; return box; }
  const pts = new Set([0, text.length]);
  const ok = spans.filter((x) => x[0] >= 0 && x[1] <= text.length && x[0] < x[1]);
  for (const x of ok) { pts.add(x[0]); pts.add(x[1]); }
  const b = [...pts].sort((u, v) => u - v);
  for (let k = 0; k + 1 < b.length; k++) {
    const a0 = b[k], a1 = b[k + 1], seg = text.slice(a0, a1);
    const cover = ok.filter((x) => x[0] <= a0 && x[1] >= a1);
    if (!cover.length) { box.append(seg); continue; }
    const m = el('mark', 'ev', seg);
    m.title = cover.map((x) => S[x[2]] + ': ' + S[x[3]]).join('\n');
    box.append(m);
  }
  return box;
}
function answerLine(i) {
  const d = el('div', 'ans');
  d.append('answer ', el('b', 'ok' + C.ok[i], s(C.ans[i]) === null ? 'unparsed' : s(C.ans[i])), ' \u00b7 gold ',
           el('b', null, s(C.gold[i])), ' ', el('span', 'ok' + C.ok[i], okName(C.ok[i])));
  d.append(' \u00b7 ' + (s(C.fin[i]) || '') + (C.ntok[i] !== null && C.ntok[i] !== undefined ? ', ' + C.ntok[i] + ' tokens' : ''));
  return d;
}
function contPanel(title, i, withEvidence) {
  const p = el('div', 'panel');
  p.dataset.role = title.split(' ')[0].toLowerCase();
  const lab = s(C.lab[i]) || 'none';
  const h = el('h4', null, title + ' ');
  h.append(el('span', 'badge lab-' + lab, lab));
  p.append(h, marked(C.text[i], withEvidence ? C.ev[i] : null), answerLine(i));
  return p;
}
function originalPanel(i) {
  const p = el('div', 'panel');
  p.dataset.role = 'original';
  const qi = C.q[i], li = C.li[i];
  const lines = (Q.lines[qi] || []).map((x) => S[x]);
  const orig = s(C.orig[i]) || '', edit = s(C.edit[i]) || '';
  p.append(el('h4', null, 'Original trace' + (li !== null ? ' \u2014 edit at line ' + (li + 1) + ' of ' + (C.nl[i] || lines.length) : '')));
  const box = el('div', 'text');
  if (C.prefix[i] !== null || !lines.length) {  // no baseline lines: show the prefix the model saw
    const pl = (C.prefix[i] !== null ? C.prefix[i] : '').replace(/\n$/, '').split('\n');
    for (let k = 0; k < pl.length - 1; k++) box.append(el('div', 'line', '  ' + pl[k]));
  } else {
    for (let k = 0; k < li && k < lines.length; k++) box.append(el('div', 'line', '  ' + lines[k]));
  }
  if (orig === edit) box.append(el('div', 'line edited-same', '= ' + edit + '   (unchanged: control)'));
  else { const [a, b] = commonAffix(orig, edit); box.append(diffLine('diff-del', '-', orig, a, b), diffLine('diff-ins', '+', edit, a, b)); }
  for (let k = li + 1; k < lines.length; k++) box.append(el('div', 'line after', '  ' + lines[k]));
  if (Q.answer[qi] !== null && Q.answer[qi] !== undefined) box.append(el('div', 'line after', '  ' + S[Q.answer[qi]]));
  p.append(box);
  const a = el('div', 'ans');
  a.append('baseline answer ', el('b', 'ok' + Q.ok[qi], s(Q.ans[qi]) === null ? 'unparsed' : s(Q.ans[qi])), ' \u00b7 gold ', el('b', null, s(Q.gold[qi])),
           ' \u00b7 greyed lines were cut (not shown to the model)');
  p.append(a);
  return p;
}
function labelBlock(i) {
  const box = el('div', 'panel');
  box.dataset.role = 'label';
  const lab = s(C.lab[i]) || 'none';
  const h = el('h4', null, 'Label ');
  h.append(el('span', 'badge lab-' + lab, lab), ' ' + (s(C.why[i]) || ''));
  box.append(h);
  const ev = C.ev[i];
  if (ev && ev.length) {
    const t = el('table');
    const hr = el('tr'); hr.append(el('th', null, 'evidence'), el('th', null, 'text'), el('th', null, 'detail')); t.append(hr);
    for (const x of ev) { const r = el('tr'); r.append(el('td', null, S[x[2]]), el('td', 'reply', C.text[i].slice(x[0], x[1])), el('td', null, S[x[3]])); t.append(r); }
    box.append(el('div', 'kv', 'Rule labeller evidence (highlighted in the continuation):'), t);
  } else box.append(el('div', 'kv', 'No rule-labeller evidence of noticing.'));
  const jv = C.judge[i];
  if (jv && jv.length) {
    const t = el('table');
    t.dataset.role = 'judge';
    const hr = el('tr'); hr.append(el('th', null, 'judge'), el('th', null, 'variant'), el('th', null, 'verdict'), el('th', null, 'reply')); t.append(hr);
    for (const x of jv) {
      const r = el('tr');
      r.append(el('td', null, S[x[0]]), el('td', null, S[x[1]]), el('td', null, x[2] === 1 ? 'noticed' : x[2] === 0 ? 'not noticed' : 'null'),
               el('td', 'reply', x[3]));
      t.append(r);
    }
    box.append(el('div', 'kv', 'Judge verdicts per prompt variant:'), t);
  }
  return box;
}
function steerBlock(i) {
  const js = steerByRow.get(i);
  if (!js) return null;
  const box = el('div', 'panel');
  box.dataset.role = 'steering';
  box.append(el('h4', null, 'Steering (' + js.length + ' generations)'));
  let base = null;
  for (const j of js) if (S[ST.basis[j]] === 'none') base = j;
  const baseText = base !== null ? ST.text[base] : C.text[i];
  const baseName = base !== null ? 'unsteered (alpha 0 rerun)' : 'unsteered (the perturbed continuation)';
  for (const j of js) {
    if (j === base) continue;
    const eff = S[ST.effect[j]];
    const d = el('details', 'steer');
    d.dataset.basis = isProbe(j) ? 'probe' : 'control';
    if (eff === 'moved' && isProbe(j)) d.open = true;
    const sm = el('summary');
    sm.append((isProbe(j) ? 'probe ' : 'random control ') + S[ST.setting[j]] + ' \u2014 answer ' +
              (s(ST.ans[j]) === null ? 'unparsed' : s(ST.ans[j])) + ' ');
    const mark = el('span', eff === 'moved' || eff === 'broken' || eff === 'changed' ? eff : 'kv', EFFECT_NAME[eff] || eff);
    mark.dataset.effect = eff;
    sm.append(mark);
    d.append(sm);
    const two = el('div', 'cols2');
    const l = el('div', 'panel'); l.append(el('h4', null, baseName), el('div', 'text', baseText));
    const r = el('div', 'panel'); r.append(el('h4', null, 'steered: ' + S[ST.setting[j]]), auditText(j));
    const au = auditLine(j);
    if (au) r.append(au);
    two.append(l, r);
    d.append(two);
    box.append(d);
  }
  return box;
}
// the steering audit (steering.audit): the generated text whose tokens got the vector, highlighted
function auditText(j) {
  const t = ST.text[j], a = ST.audit ? ST.audit[j] : null, box = el('div', 'text');
  box.dataset.role = 'steered-text';
  if (!a || !a[0]) { box.textContent = t; return box; }
  let at = 0;
  for (const [c0, c1] of a[0]) {
    if (c0 > at) box.append(document.createTextNode(t.slice(at, c0)));
    const m = el('mark', 'steered', t.slice(c0, c1));
    m.title = 'these tokens\' residuals got the steering vector';
    box.append(m);
    at = c1;
  }
  if (at < t.length) box.append(document.createTextNode(t.slice(at)));
  return box;
}
function auditLine(j) {
  const a = ST.audit ? ST.audit[j] : null;
  if (!a) return null;
  const [, pos, n, P, fpt, kv] = a;
  const inPrompt = (pos || []).reduce((acc, [p0, p1]) => acc + Math.max(0, Math.min(p1, P) - p0), 0);
  const where = (pos || []).map(([p0, p1]) => (p1 - p0 > 1 ? p0 + '\u2013' + (p1 - 1) : String(p0))).join(', ');
  const d = el('div', 'kv audit', 'steered positions ' + (where || 'none') + ' (' + n + ': ' + inPrompt +
    ' of the ' + P + ' input tokens, ' + (n - inPrompt) + ' generated) \u00b7 hook fired ' +
    (fpt === null || fpt === undefined ? '?' : fpt.toFixed(2)) + '\u00d7 per layer per token \u00b7 KV cache ' +
    (kv ? 'on' : 'off'));
  d.dataset.role = 'steer-audit';
  return d;
}
// ---------------------------------------------------------------- causal tests (parsed on first use)
let CA;
function causalData() {
  if (CA === undefined) { const e = $('causal'); CA = e ? JSON.parse(e.textContent) : null; document.body.dataset.causal = 'parsed'; }
  return CA;
}
const SVGNS = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}
const fmt = (x, d) => (x === null || x === undefined ? 'n/a' : (x > 0 && d === 2 ? '+' : '') + Number(x).toFixed(d));
function table(head, rows) {
  const t = el('table');
  const hr = el('tr');
  for (const h of head) hr.append(el('th', null, h));
  t.append(hr);
  for (const r of rows) { const tr = el('tr'); for (const c of r) tr.append(c instanceof Node ? (() => { const td = el('td'); td.append(c); return td; })() : el('td', null, c)); t.append(tr); }
  return t;
}
function curveSvg(ea) {
  const W = 260, H = 120, L = 30, R = 8, T = 8, B = 24;
  const px = (x) => L + x * (W - L - R), py = (y) => T + (1 - y) * (H - T - B);
  const svg = svgEl('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, class: 'curve', role: 'img' });
  svg.append(svgEl('title', {}, 'same answer as the full chain vs fraction of the chain kept'));
  svg.append(svgEl('line', { x1: L, y1: py(0), x2: W - R, y2: py(0), stroke: '#999' }),
             svgEl('line', { x1: L, y1: py(0), x2: L, y2: py(1), stroke: '#999' }));
  for (const [y, t] of [[0, 'diff'], [1, 'same']]) svg.append(svgEl('text', { x: 2, y: py(y) + 4, 'font-size': 9 }, t));
  for (const x of [0, 0.5, 1]) svg.append(svgEl('text', { x: px(x) - 6, y: H - 12, 'font-size': 9 }, String(x)));
  svg.append(svgEl('text', { x: L + 40, y: H - 2, 'font-size': 9 }, 'fraction of the chain kept (k/n)'));
  const pts = [];
  ea.k.forEach((k, j) => { if (ea.s[j] !== null) pts.push([px(k / ea.n), py(ea.s[j])]); });
  if (pts.length > 1) svg.append(svgEl('polyline', { points: pts.map((p) => p.join(',')).join(' '), fill: 'none', stroke: '#1565c0', 'stroke-width': 1.5 }));
  ea.k.forEach((k, j) => {
    const y = ea.s[j] === null ? 0.5 : ea.s[j];
    svg.append(svgEl('circle', { cx: px(k / ea.n), cy: py(y), r: 3, fill: ea.s[j] === null ? '#fff' : '#1565c0', stroke: '#1565c0' }));
  });
  return svg;
}
function eaPanel(ea, qi) {
  const p = el('div', 'panel');
  p.dataset.role = 'early-answer';
  p.append(el('h4', null, 'Early answering \u2014 AOC ' + (ea.aoc === null ? 'n/a' : Number(ea.aoc).toFixed(3)) + ', full-chain answer ' + (ea.full === null ? 'unparsed' : ea.full)));
  p.append(curveSvg(ea));
  if (ea.dp !== undefined) {
    const d = el('div', 'kv', 'decision point ' + (ea.dp === null ? 'n/a' : ea.dp + '/' + ea.n) + ' \u00b7 NLDD share ' + (ea.nldd === null ? 'n/a' : Number(ea.nldd).toFixed(3)) +
                 ' (the last cut where the forced answer changes; the share of the chain written after it)');
    d.dataset.role = 'decision-point';
    p.append(d);
  }
  const lines = (Q.lines[qi] || []).map((x) => S[x]);
  p.append(table(['cut', 'last line kept', 'forced answer', 'same as full chain'], ea.k.map((k, j) => [
    k + '/' + ea.n, k === 0 ? '(no chain)' : (lines[k - 1] || ''), ea.a[j] === null ? 'unparsed' : ea.a[j],
    ea.s[j] === 1 ? 'same' : ea.s[j] === 0 ? 'different' : 'n/a'])));
  return p;
}
function rsPanel(rs) {
  const p = el('div', 'panel');
  p.dataset.role = 'resample';
  p.append(el('h4', null, 'Resampling \u2014 ' + rs.rollouts + ' rollouts per prefix, anchor ' + (rs.anchor === null ? 'none' : 'step ' + (rs.anchor + 1))));
  p.append(table(['step', 'original', 'rollouts', 'different', 'cf [95% CI]', 'rank'], rs.steps.map((st) => [
    (st.i + 1) + (rs.edited.includes(st.i) ? ' (edited)' : '') + (rs.anchor === st.i ? ' *' : ''), st.orig || '', String(st.n), String(st.nd),
    fmt(st.cf, 2) + (st.ci && st.ci[0] !== null ? ' [' + fmt(st.ci[0], 2) + ', ' + fmt(st.ci[1], 2) + ']' : ''),
    st.rank === null ? '' : String(st.rank)])));
  for (const st of rs.steps) {
    if (!st.roll.length) continue;
    const d = el('details', 'rollouts');
    d.append(el('summary', null, 'step ' + (st.i + 1) + ': ' + st.roll.length + ' of ' + st.n + ' rollouts (different ones first)'));
    for (const r of st.roll) {
      d.append(el('div', 'kv', 'new step: ' + (r[0] || '(empty)') + ' \u00b7 ' + (r[1] ? 'different' : 'similar') + ' \u00b7 answer ' +
                  (r[2] === null ? 'unparsed' : r[2]) + ' ' + (r[3] === 1 ? '\u2713' : r[3] === 0 ? '\u2717' : '?')),
               el('div', 'text', r[4] || ''));
    }
    p.append(d);
  }
  return p;
}
function ppPanel(pp) {
  const p = el('div', 'panel');
  p.dataset.role = 'paraphrase';
  p.append(el('h4', null, 'Paraphrase of lines 1\u2013' + (pp.li + 1) + ' (by ' + pp.by + ')'));
  p.append(el('div', 'kv', 'original prefix'), el('div', 'text', (pp.orig || []).join('\n')));
  p.append(el('div', 'kv', 'paraphrase' + (pp.same_text ? ' (identical to the original)' : '') + (pp.num ? ' \u00b7 every number kept' : ' \u00b7 numbers changed')),
           el('div', 'text', (pp.para || []).length ? pp.para.join('\n') : '(empty once answer lines were dropped; raw: ' + (pp.raw || '') + ')'));
  if (pp.cont !== null) p.append(el('div', 'kv', 'continuation from the paraphrase'), el('div', 'text', pp.cont));
  const a = el('div', 'ans');
  a.append('answer ', el('b', 'ok' + (pp.ok === null ? 'null' : pp.ok ? 1 : 0), pp.ans === null ? (pp.status === 'ok' ? 'unparsed' : 'none') : pp.ans),
           ' \u00b7 reference (' + pp.src + ') ', el('b', null, pp.ref === null ? 'n/a' : pp.ref),
           ' \u00b7 ' + (pp.same === null ? 'not scored' : pp.same ? 'same answer' : 'answer changed'));
  p.append(a);
  if (pp.fr && pp.fr.length) {
    const t = table(['fraction paraphrased', 'answer retained'], pp.fr.map((f) => [String(f[0]), f[1] === 1 ? 'same' : f[1] === 0 ? 'changed' : 'not scored']));
    t.dataset.role = 'paraphrase-fractions';
    p.append(el('div', 'kv', 'this question at every fraction of the chain paraphrased'), t);
  }
  return p;
}
function flPanel(fl) {
  const p = el('div', 'panel');
  p.dataset.role = 'filler';
  p.append(el('h4', null, 'Filler tokens \u2014 the chain replaced by filler, answer forced'));
  p.append(table(['condition', 'fraction', 'filler tokens', 'forced answer', 'right'], fl.c.map((c) => [
    c[0] === 'none' ? 'no chain' : c[0] === 'full' ? 'full chain' : c[0], c[0] === 'none' ? '0' : c[0] === 'full' ? '(chain)' : String(c[1]),
    String(c[2]), c[3] === null ? 'unparsed' : c[3], c[4] === 1 ? '\u2713' : c[4] === 0 ? '\u2717' : '?'])));
  return p;
}
const MEASURE_HEAD = { propagation: 'propagation of the edited line', resampling: '|cf importance| (resampling)',
                       receiver: 'receiver-head score', suppression: 'suppression effect (mean log KL)' };
function stPanel(st, qi) {
  const p = el('div', 'panel');
  p.dataset.role = 'step-measures';
  p.append(el('h4', null, 'Step-level measures of this question (the agreement table\u2019s inputs; \u25b2 = the measure\u2019s top step)'));
  const ms = Object.keys(MEASURE_HEAD).filter((m) => st.m[m]);
  const lines = (Q.lines[qi] || []).map((x) => S[x]);
  const rows = [];
  for (let i = 0; i < st.n; i++) {
    rows.push([String(i + 1), lines[i] || '', ...ms.map((m) => { const v = st.m[m][i]; return v === null || v === undefined ? 'n/a' : Number(v).toFixed(3) + (st.top[m] === i ? ' \u25b2' : ''); })]);
  }
  p.append(table(['step', 'line', ...ms.map((m) => MEASURE_HEAD[m])], rows));
  return p;
}
const rateTxt = (r) => (!r ? 'n/a' : r.k + '/' + r.n + (r.lo === null || r.lo === undefined ? '' : ' [' + Number(r.lo).toFixed(2) + ', ' + Number(r.hi).toFixed(2) + ']'));
const ppTxt = (c) => (!c || c.v === null ? 'n/a' : (100 * c.v >= 0 ? '+' : '') + (100 * c.v).toFixed(1) + ' pp' + (c.lo === null ? '' : ' [' + (100 * c.lo).toFixed(1) + ', ' + (100 * c.hi).toFixed(1) + ']') + ' (' + c.nq + ' q)');
const ciTxt = (c, d) => (!c || c.v === null ? 'n/a' : Number(c.v).toFixed(d) + (c.lo === null ? '' : ' [' + Number(c.lo).toFixed(d) + ', ' + Number(c.hi).toFixed(d) + ']') + ' (' + c.nq + ' q)');
function sweepSvg(title, series, xlabel) {  // series: [[label, color, [[x, y in 0..1]]]]
  const W = 260, H = 120, L = 30, R = 8, T = 8, B = 24;
  const px = (x) => L + x * (W - L - R), py = (y) => T + (1 - y) * (H - T - B);
  const svg = svgEl('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, class: 'curve', role: 'img' });
  svg.append(svgEl('title', {}, title));
  svg.append(svgEl('line', { x1: L, y1: py(0), x2: W - R, y2: py(0), stroke: '#999' }), svgEl('line', { x1: L, y1: py(0), x2: L, y2: py(1), stroke: '#999' }));
  for (const y of [0, 1]) svg.append(svgEl('text', { x: 2, y: py(y) + 4, 'font-size': 9 }, String(y)));
  for (const x of [0, 0.5, 1]) svg.append(svgEl('text', { x: px(x) - 6, y: H - 12, 'font-size': 9 }, String(x)));
  svg.append(svgEl('text', { x: L + 40, y: H - 2, 'font-size': 9 }, xlabel));
  series.forEach(([label, color], j) => { if (series.length > 1) svg.append(svgEl('text', { x: W - R - 60, y: py(0.5) + 11 * j, 'font-size': 9, fill: color }, label)); });
  for (const [label, color, pts] of series) {
    const ok = pts.filter((q) => q[1] !== null && q[1] !== undefined);
    if (ok.length > 1) svg.append(svgEl('polyline', { points: ok.map((q) => px(q[0]) + ',' + py(q[1])).join(' '), fill: 'none', stroke: color, 'stroke-width': 1.5 }));
    for (const q of ok) svg.append(svgEl('circle', { cx: px(q[0]), cy: py(q[1]), r: 3, fill: color, 'data-series': label }));
  }
  return svg;
}
const val = (r) => (!r || !r.n ? null : r.k / r.n);
function sumPanel(sm, ri) {
  const d = el('details', 'panel');
  d.dataset.role = 'causal-summary';
  d.append(el('summary', null, 'Whole-run results of the causal tests' + (runs.length > 1 ? ' (run ' + ri + ')' : '') + ': ' + sm.stages.join(', ')));
  const sec = (role, head) => { const b = el('div', 'sum'); b.dataset.role = role; b.append(el('h4', null, head)); d.append(b); return b; };
  if (sm.ea) {
    const b = sec('sum-early-answer', 'Early answering: AOC ' + ciTxt(sm.ea.aoc, 3) + ' \u00b7 mean NLDD share ' + ciTxt(sm.ea.nldd, 3) +
                  ' \u00b7 mean decision point at ' + (sm.ea.dfrac === null ? 'n/a' : Number(sm.ea.dfrac).toFixed(3)) + ' of the chain');
    b.append(table(['level', 'mean NLDD share [95% CI]'], Object.entries(sm.ea.by_level).map(([v, c]) => [v, ciTxt(c, 3)])));
  }
  if (sm.fl) {
    for (const [f, pts] of Object.entries(sm.fl.sweep)) {
      const b = sec('sum-filler', 'Filler sweep (' + JSON.stringify(sm.fl.fillers[f] || f) + '): accuracy vs filler length; full chain ' + rateTxt(sm.fl.full));
      b.append(sweepSvg('accuracy vs filler tokens as a fraction of the chain', [[f, '#1565c0', pts.map((q) => [q.x, val(q.acc)])]], 'filler tokens / chain tokens'));
      b.append(table(['fraction', 'mean filler tokens', 'accuracy [95% CI]', 'same answer as full chain'],
                     pts.map((q) => [String(q.x), q.tok === null ? 'n/a' : Number(q.tok).toFixed(1), rateTxt(q.acc), q.same ? rateTxt(q.same) : ''])));
    }
  }
  if (sm.pp) {
    const b = sec('sum-paraphrase', 'Paraphrase (by ' + sm.pp.by + (sm.pp.same_model ? ', the run\u2019s own model' : '') + '): mean gap ' + ppTxt(sm.pp.mean_gap) + ' (reference \u2212 paraphrased accuracy)');
    b.append(sweepSvg('answer retained and accuracy vs fraction paraphrased', [['retained', '#1565c0', sm.pp.curve.map((q) => [q.x, val(q.ret)])],
                                                                                 ['accuracy', '#ef6c00', sm.pp.curve.map((q) => [q.x, val(q.acc)])]], 'fraction of the chain paraphrased'));
    b.append(table(['fraction', 'answer retained [95% CI]', 'accuracy after [95% CI]', 'gap'], sm.pp.curve.map((q) => [String(q.x), rateTxt(q.ret), rateTxt(q.acc), ppTxt(q.gap)])));
  }
  if (sm.rh) sec('sum-receiver', 'Receiver heads: ' + sm.rh.n + ' chains, proximity_ignore ' + sm.rh.pi + '; top heads by mean kurtosis: ' +
                 sm.rh.heads.map((h) => 'L' + h[0] + 'H' + h[1] + ' (' + Number(h[2]).toFixed(2) + ')').join(', '));
  if (sm.sp) sec('sum-suppression', 'Attention suppression: ' + sm.sp.n + ' chains, T = ' + sm.sp.t + ' (log(1e-9) = \u221220.7: masking changed nothing)');
  if (sm.ag) {
    const b = sec('sum-agreement', 'Agreement between the step-level measures (as the report)');
    b.append(table(['measures', 'mean Spearman rho [95% CI]', 'questions', 'same top step', 'chance'], sm.ag.map((a) => [
      a.a + ' vs ' + a.b, a.rho === null ? 'n/a' : fmt(a.rho, 2) + (a.lo === null ? '' : ' [' + fmt(a.lo, 2) + ', ' + fmt(a.hi, 2) + ']'),
      String(a.nq), rateTxt(a.top), a.chance === null ? 'n/a' : Math.round(100 * a.chance) + '%'])));
  }
  return d.childNodes.length > 1 ? d : null;
}
function ptPanel(pt) {
  const p = el('div', 'panel');
  p.dataset.role = 'patching';
  p.append(el('h4', null, 'Activation patching of this C case \u2014 restored fraction (0 = edited run, 1 = clean run)'));
  p.append(table(['layer', ...pt.groups], pt.layers.map((L, j) => [String(L), ...pt.r[j].map((x) => (x === null ? 'n/a' : Number(x).toFixed(2)))])));
  p.append(el('div', 'kv', 'clean \u2212 edited log-probability difference ' + fmt(pt.gap, 2) + ' nats \u00b7 correct ' + pt.gold + ' vs propagated ' + pt.propagated +
              (pt.excluded ? ' \u00b7 excluded from the means (gap too small)' : '')));
  return p;
}
function causalBlock(qi, row) {
  const ca = causalData();
  if (!ca) return null;
  const k = String(qi), ea = ca.ea[k], rs = ca.rs[k], pp = ca.pp[k], pt = row >= 0 ? ca.pt[String(row)] : undefined;
  const fl = (ca.fl || {})[k], st = (ca.st || {})[k], sm = (ca.sm || [])[Q.run[qi]];
  const box = el('div', 'panel causal');
  box.dataset.role = 'causal';
  box.append(el('h4', null, 'Causal tests of this question'));
  const cols = el('div', 'cols');
  if (ea) cols.append(eaPanel(ea, qi));
  if (rs) cols.append(rsPanel(rs));
  if (pp) cols.append(ppPanel(pp));
  if (fl) cols.append(flPanel(fl));
  if (cols.childNodes.length) box.append(cols);
  if (st) box.append(stPanel(st, qi));
  if (pt) box.append(ptPanel(pt));
  const absent = [['early_answer', ea], ['resample', rs], ['paraphrase', pp], ['filler', fl], ['receiver_heads', st && st.m.receiver],
                  ['suppression', st && st.m.suppression]].filter(([n, v]) => ca.stages.includes(n) && !v).map(([n]) => n);
  if (absent.length) box.append(el('div', 'kv', 'Not in ' + absent.join(', ') + ' (the stage tests eligible questions only; resampling a seeded sample of them).'));
  if (ca.stages.includes('patching') && !pt && row >= 0 && s(C.lab[row]) === 'C') box.append(el('div', 'kv', 'This C case was not patched (patching takes a few cases, one per question).'));
  const summ = sm ? sumPanel(sm, Q.run[qi]) : null;
  if (summ && box.childNodes.length > 1) box.append(summ);
  return box.childNodes.length > 1 ? box : null;
}
let partnerPick = 0;
function renderDetail() {
  const det = $('detail');
  det.textContent = '';
  const i = selected;
  if (i < 0) { det.append(el('p', 'hint', 'Select a sample (j/k or arrow keys to step; the URL is its permalink).')); return; }
  const qi = C.q[i];
  const h = el('h3', null, C.id[i]);
  det.append(h);
  const kv = el('div', 'kv');
  kv.textContent = [s(C.cond[i]), 'strategy ' + s(C.strat[i]), 'position ' + s(C.pos[i]),
                    C.mem[i] ? 'shared by ' + C.mem[i].map((m) => S[m[0]] + '/' + S[m[1]]).join(', ') : null,
                    'task ' + s(C.task[i]), 'level ' + s(C.lvl[i]), 'model ' + runs[C.run[i]].model].filter(Boolean).join(' \u00b7 ');
  det.append(kv, el('div', 'panel question', Q.text[qi] || '(question text not recorded)'));
  const key = C.run[i] + '|' + qi + '|' + C.li[i];
  const pr = pairs.get(key) || { control: [], perturbed: [] };
  const isCtrl = s(C.cond[i]) === 'control';
  const ctrl = isCtrl ? i : (pr.control.length ? pr.control[0] : -1);
  let pert = -1;
  const cols = el('div', 'cols');
  cols.append(originalPanel(isCtrl && pr.perturbed.length ? pr.perturbed[Math.min(partnerPick, pr.perturbed.length - 1)] : i));
  if (ctrl >= 0) cols.append(contPanel('Control continuation', ctrl, false));
  else cols.append(el('div', 'panel', 'No control continuation at this cut.'));
  if (!isCtrl) pert = i;
  else if (pr.perturbed.length) pert = pr.perturbed[Math.min(partnerPick, pr.perturbed.length - 1)];
  if (pert >= 0) {
    const p = contPanel('Perturbed continuation', pert, true);
    if (isCtrl && pr.perturbed.length > 1) {
      const pb = el('div', 'partners');
      pr.perturbed.forEach((j, k) => { const b = el('button', null, s(C.strat[j])); b.addEventListener('click', () => { partnerPick = k; renderDetail(); }); pb.append(b); });
      p.prepend(pb);
    }
    cols.append(p);
  } else cols.append(el('div', 'panel', 'No perturbed continuation at this cut.'));
  det.append(cols);
  if (pert >= 0) det.append(labelBlock(pert));
  const sb = pert >= 0 ? steerBlock(pert) : null;
  if (sb) det.append(sb);
  const cb = causalBlock(qi, pert);
  if (cb) det.append(cb);
}
function select(i, fromClick) {
  if (selected !== i) partnerPick = 0;
  selected = i;
  const pos = posOf.get(i);
  if (pos !== undefined && !fromClick) {
    const top = pos * ROWH;
    if (top < list.scrollTop || top + ROWH > list.scrollTop + list.clientHeight) list.scrollTop = Math.max(0, top - list.clientHeight / 2);
  }
  renderList();
  renderDetail();
  writeHash();
}
function step(d) {
  if (!visible.length) return;
  let pos = posOf.get(selected);
  pos = pos === undefined ? (d > 0 ? 0 : visible.length - 1) : Math.max(0, Math.min(visible.length - 1, pos + d));
  select(visible[pos], false);
}

// ---------------------------------------------------------------- questions tab
const qlist = $('qlist'), qspacer = $('qspacer');
const QCOLS = ['question', 'text', 'task', 'level', 'answer', 'gold', 'baseline', 'eligible', 'continuations'];
const qcount = new Int32Array(NQ);
for (let i = 0; i < N; i++) qcount[C.q[i]]++;
for (const c of QCOLS) $('qhead').append(el('span', null, c));
function renderQ() {
  if ($('qpane').hidden) return;
  qspacer.style.height = NQ * QROWH + 'px';
  const top = qlist.scrollTop, h = qlist.clientHeight || 600;
  const a = Math.max(0, Math.floor(top / QROWH) - 10), b = Math.min(NQ, Math.ceil((top + h) / QROWH) + 10);
  const frag = document.createDocumentFragment();
  for (let k = a; k < b; k++) {
    const r = el('div', 'qrow');
    r.style.top = k * QROWH + 'px';
    r.dataset.qid = Q.id[k];
    const elig = Q.elig[k] === 1 ? 'yes' : Q.elig[k] === 0 ? 'no' : '?';
    r.append(el('span', null, Q.id[k]), el('span', null, Q.text[k]), el('span', null, s(Q.task[k])), el('span', null, s(Q.lvl[k])),
             el('span', 'ok' + Q.ok[k], s(Q.ans[k]) === null ? 'unparsed' : s(Q.ans[k])), el('span', null, s(Q.gold[k])),
             el('span', 'ok' + Q.ok[k], okName(Q.ok[k])), el('span', null, elig + (Q.elig[k] === 1 ? '' : ' (' + (s(Q.reason[k]) || '') + ')')),
             el('span', null, String(qcount[k])));
    r.title = Q.text[k];
    r.addEventListener('click', () => { if (!qcount[k]) return; clearFilters(); const f = FBY.question; f.sel.add(f.idx.get(Q.id[k])); showTab('c'); update(true); });
    frag.append(r);
  }
  qspacer.textContent = '';
  qspacer.append(frag);
}
qlist.addEventListener('scroll', () => requestAnimationFrame(renderQ));
function showTab(t) {
  $('tab-c').classList.toggle('on', t === 'c');
  $('tab-q').classList.toggle('on', t === 'q');
  $('qpane').hidden = t !== 'q';
  for (const id of ['facets', 'listpane', 'detail']) $(id).hidden = t === 'q';
  if (t === 'q') renderQ(); else renderList();
}
$('tab-c').addEventListener('click', () => showTab('c'));
$('tab-q').addEventListener('click', () => showTab('q'));

// ---------------------------------------------------------------- state <-> URL fragment
function writeHash() {
  const parts = [];
  const fs = [];
  for (const f of F) for (const c of f.sel) fs.push(f.name + ':' + encodeURIComponent(f.vals[c]));
  if (fs.length) parts.push('f=' + fs.join(','));
  if (query) parts.push('q=' + encodeURIComponent(query));
  if (selected >= 0) parts.push('id=' + encodeURIComponent(C.id[selected]));
  const h = '#' + parts.join('&');
  if (location.hash !== h) history.replaceState(null, '', h === '#' ? location.pathname + location.search : h);
}
function clearFilters() { for (const f of F) f.sel.clear(); }
const ALIAS = { difficulty: 'level', cond: 'condition', correctness: 'correct' };
function readHash() {
  const h = location.hash.replace(/^#/, '');
  clearFilters();
  query = '';
  let id = null;
  if (!h) {
    const f = FBY.condition, c = f.idx.get('perturbed');
    if (c !== undefined) f.sel.add(c);
  } else if (h.indexOf('=') < 0) {
    id = decodeURIComponent(h);
  } else {
    for (const part of h.split('&')) {
      const eq = part.indexOf('=');
      if (eq < 0) continue;
      const k = part.slice(0, eq), v = part.slice(eq + 1);
      if (k === 'q') query = decodeURIComponent(v);
      else if (k === 'id') id = decodeURIComponent(v);
      else if (k === 'f') {
        for (const item of v.split(',')) {
          const c = item.indexOf(':');
          if (c < 0) continue;
          let name = decodeURIComponent(item.slice(0, c));
          name = ALIAS[name] || name;
          const f = FBY[name];
          if (!f) continue;
          const val = decodeURIComponent(item.slice(c + 1));
          let code = f.idx.get(val);
          if (code === undefined) { code = f.vals.length; f.vals.push(val); f.idx.set(val, code); f.counts = new Int32Array(f.vals.length); }
          f.sel.add(code);
        }
      }
    }
  }
  $('search').value = query;
  selected = id !== null && rowById.has(id) ? rowById.get(id) : -1;
  update(true, true);
}
window.addEventListener('hashchange', readHash);

// ---------------------------------------------------------------- wiring
function update(rebuild, keepScroll) {
  recompute();
  if (rebuild) { checks.length = 0; buildFacets(); }
  refreshFacetCounts();
  $('count').textContent = visible.length + ' of ' + N + ' continuations';
  $('count').dataset.visible = String(visible.length);
  if (!keepScroll) list.scrollTop = 0;
  if (selected >= 0 && posOf.has(selected)) {
    const top = posOf.get(selected) * ROWH;
    if (top < list.scrollTop || top + ROWH > list.scrollTop + list.clientHeight) list.scrollTop = Math.max(0, top - list.clientHeight / 2);
  }
  renderList();
  renderDetail();
  writeHash();
}
let timer = 0;
$('search').addEventListener('input', (e) => { clearTimeout(timer); timer = setTimeout(() => { query = e.target.value; update(false); }, 120); });
$('clear').addEventListener('click', () => { clearFilters(); query = ''; $('search').value = ''; update(true); });
document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA')) {
    if (e.key === 'Escape') t.blur();
    return;
  }
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === 'j' || e.key === 'ArrowDown') { e.preventDefault(); step(1); }
  else if (e.key === 'k' || e.key === 'ArrowUp') { e.preventDefault(); step(-1); }
  else if (e.key === '/') { e.preventDefault(); $('search').focus(); }
});
readHash();
document.body.dataset.ready = '1';
document.body.dataset.readyMs = String(Math.round(performance.now()));
requestAnimationFrame(() => setTimeout(() => { document.body.dataset.paintMs = String(Math.round(performance.now())); }, 0));
})();
