"""python -m study.browse RUN_DIR [RUN_DIR ...] [--output FILE.html] [--labelling NAME] [--steering FILE]

The trace browser: one self-contained HTML file (data and script inline; no server, CDN or network) to read
what the model wrote. Open it from disk in any browser (default ``RUN_DIR/browse.html``).

* **Questions** tab: each question's baseline answer against gold, eligibility and, when not eligible, why.
* **Continuations** tab: a virtualised list (only the visible rows exist in the page, so 20,000 continuations
  stay responsive) with facet filters - condition, strategy, position, label, correctness, task, level,
  model, dataset, steered - and a free-text search, with counts that update as filters change. The selected
  sample shows, side by side: the original trace with the edited line as a diff (original -> edited, the
  lines after the cut dimmed), the control continuation (same question, same cut), the perturbed one, the
  parsed answers against gold, the label with the rule labeller's evidence spans highlighted in the text, the
  judge's per-variant verdicts, and - when ``RUN_DIR/steering/generations.jsonl`` exists - every steered
  generation of the case beside its unsteered one, "moved" (a C case now correct) marked.
* Keys: ``j``/``k`` or the arrow keys step through the visible samples, ``/`` focuses the search.

**URL fragment** (permalinks and links from ``report.html``): ``#ID`` selects one sample (clearing filters),
or ``#f=FACET:VALUE,FACET:VALUE&q=TEXT&id=ID`` with each part optional and each VALUE/TEXT/ID URL-encoded
(``encodeURIComponent``). Values of one facet are OR-ed, facets are AND-ed. Facets: ``condition``
(perturbed|control), ``strategy``, ``position``, ``label`` (A|B|C|non-C|none), ``correct``
(correct|wrong|unparsed), ``task``, ``level``, ``model``, ``dataset``, ``steered`` (moved|not moved),
``question`` (a question id). Example: ``browse.html#f=condition:perturbed,strategy:contradiction,label:C``.
:func:`fragment` builds one. Without a fragment the page opens on the perturbed continuations.

Every piece of text is put in the page with ``textContent`` (never parsed as HTML) and the embedded JSON
escapes ``<``, ``>`` and ``&``, so a continuation that contains ``<script>`` shows as text and never runs.
The data is columnar with one string table (repeated strings - labels, strategies, lines, answers - stored
once), so the file stays compact.
"""
# ruff: noqa: E501  (the page's CSS and JavaScript below are embedded strings)
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from loadbearing.errors import LoadBearingError
from loadbearing.files import RunDirError, read_jsonl
from loadbearing.runs import LABELS_FILE, Run

SCHEMA_VERSION = 1
DEFAULT_NAME = "browse.html"
FACETS = ("condition", "strategy", "position", "label", "correct", "task", "level", "model", "dataset", "steered",
          "question")


class BrowseError(LoadBearingError, ValueError):
    """A user mistake (bad arguments); the message names the problem and the fix."""


def fragment(filters: dict[str, str | Sequence[str]] | None = None, *, q: str | None = None, id: str | None = None) -> str:
    """The URL fragment (with ``#``) that opens the browser filtered: ``fragment({"strategy": "x", "label": "C"})``."""
    parts = []
    if filters:
        items = []
        for k, v in filters.items():
            if k not in FACETS:
                raise BrowseError(f"unknown browser facet {k!r}; use one of {', '.join(FACETS)}")
            for one in ([v] if isinstance(v, str) else list(v)):
                items.append(f"{k}:{quote(str(one), safe='')}")
        parts.append("f=" + ",".join(items))
    if q:
        parts.append("q=" + quote(q, safe=""))
    if id:
        parts.append("id=" + quote(id, safe=""))
    return "#" + "&".join(parts)


# ------------------------------------------------------------------------------------------------ data


class _Strings:
    """One string table: every repeated string is stored once and referred to by index."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: Any) -> int | None:
        if s is None:
            return None
        s = str(s)
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


def _tri(v: Any) -> int | None:
    return None if v is None else (1 if v else 0)


def _model_name(run: Run) -> str:
    return str(run.model_spec.get("name") or "?")


def _label_records(run: Run, name: str | None) -> tuple[str | None, dict[str, dict]]:
    d = run.labelling_dir(name)
    if d is None:
        return None, {}
    out: dict[str, dict] = {}
    for r in read_jsonl(d / LABELS_FILE):
        if isinstance(r, dict) and "id" in r:
            out[str(r["id"])] = r
    return d.name, out


def _evidence(lrec: dict | None) -> tuple[list | None, list | None]:
    """(rule evidence spans [[start, end, type, detail]], judge [[labeller, variant, noticed, reply]])."""
    if not lrec:
        return None, None
    spans, judge = [], []
    for lname, res in (lrec.get("labellers") or {}).items():
        if not isinstance(res, dict):
            continue
        for e in res.get("evidence") or []:
            try:
                spans.append([int(e["start"]), int(e["end"]), str(e.get("type", "")), str(e.get("detail", ""))])
            except (KeyError, TypeError, ValueError):
                continue
        for vname, v in (res.get("variants") or {}).items():
            if isinstance(v, dict):
                judge.append([lname, vname, v.get("noticed"), str(v.get("reply", ""))[:2000]])
    return spans or None, judge or None


def _steering(run: Run, path: str | os.PathLike[str] | None = None) -> list[dict]:
    p = Path(path) if path is not None else run.path / "steering" / "generations.jsonl"
    if path is not None and not p.is_file():
        raise BrowseError(f"--steering {str(p)!r} not found; pass the generations.jsonl written by python -m steering.sweep")
    return [r for r in read_jsonl(p) if isinstance(r, dict)] if p.is_file() else []


def _effect(r: dict) -> str:
    """moved (a C case now correct) | broken (a non-C case now wrong) | same | unparsed."""
    if "moved" in r and isinstance(r["moved"], bool):
        return "moved" if r["moved"] else ("unparsed" if r.get("correct") is None else "same")
    ok = r.get("correct")
    if ok is None:
        return "unparsed"
    if r.get("case_label") == "C":
        return "moved" if ok else "same"
    return "broken" if not ok else "same"


def collect(run_dirs: Sequence[str | os.PathLike[str]], *, labelling: str | None = None,
            steering: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The browser's data for one or more runs: compact columnar JSON with one string table ``S``.
    ``steering``: a ``generations.jsonl`` (default ``RUN_DIR/steering/generations.jsonl`` of each run, if any)."""
    runs = [Run(p) for p in run_dirs]
    if steering is not None and len(runs) > 1:
        raise BrowseError("--steering names one sweep's generations but several runs were given; browse one run")
    S = _Strings()
    C: dict[str, list] = {k: [] for k in ("id", "run", "q", "cond", "strat", "pos", "mem", "li", "nl", "orig", "edit",
                                         "prefix", "text", "ans", "gold", "ok", "lab", "why", "fin", "ntok", "task",
                                         "lvl", "ds", "ev", "judge")}
    Q: dict[str, list] = {k: [] for k in ("id", "run", "text", "task", "lvl", "ds", "gold", "ans", "ok", "elig", "reason",
                                         "lines", "answer", "key")}
    steer: dict[str, list] = {k: [] for k in ("row", "setting", "basis", "layer", "k", "alpha", "text", "ans", "ok",
                                             "effect")}
    meta_runs, labellings = [], []
    multi = len(runs) > 1
    for ri, run in enumerate(runs):
        model = _model_name(run)
        lname, lrecs = _label_records(run, labelling)
        labellings.append(lname)
        meta_runs.append({"path": str(run.path), "model": model, "labelling": lname, "status": run.status})
        qindex: dict[str, int] = {}
        for b in run.baselines():
            d = b.to_dict()
            qindex[d["question_id"]] = len(Q["id"])
            Q["id"].append(d["question_id"])
            Q["run"].append(ri)
            Q["text"].append(d.get("question") or "")
            Q["task"].append(S(d.get("task")))
            Q["lvl"].append(S(d.get("difficulty")))
            Q["ds"].append(S(d.get("dataset")))
            Q["gold"].append(S(d.get("gold")))
            Q["ans"].append(S(d.get("parsed_answer")))
            Q["ok"].append(_tri(d.get("correct")))
            Q["elig"].append(_tri(d.get("eligible")))
            Q["reason"].append(S(d.get("reason")))
            Q["lines"].append([S(x) for x in d.get("lines") or []])
            trace_lines = (d.get("trace") or "").splitlines()
            al = d.get("answer_line")
            Q["answer"].append(S(trace_lines[al]) if isinstance(al, int) and 0 <= al < len(trace_lines) else None)
            Q["key"].append(d.get("question_key"))
        rows: dict[str, int] = {}
        for d in run.continuation_dicts():
            qid = str(d.get("question_id"))
            if qid not in qindex:  # a continuation whose baseline is missing still shows (question text unknown)
                qindex[qid] = len(Q["id"])
                for k, v in (("id", qid), ("run", ri), ("text", ""), ("task", S(d.get("task"))), ("lvl", S(d.get("difficulty"))),
                             ("ds", S(d.get("dataset"))), ("gold", S(d.get("gold"))), ("ans", None), ("ok", None),
                             ("elig", None), ("reason", S("no baseline record")), ("lines", []), ("answer", None),
                             ("key", d.get("question_key"))):
                    Q[k].append(v)
            qi = qindex[qid]
            cid = str(d.get("id"))
            rows[cid] = len(C["id"])
            C["id"].append(f"{ri}:{cid}" if multi else cid)
            C["run"].append(ri)
            C["q"].append(qi)
            C["cond"].append(S(d.get("condition")))
            C["strat"].append(S(d.get("strategy")))
            C["pos"].append(S(d.get("position")))
            mem = d.get("memberships")
            C["mem"].append([[S(m[0]), S(m[1])] for m in mem if isinstance(m, (list, tuple)) and len(m) >= 2]
                            if isinstance(mem, list) and len(mem) > 1 else None)
            li = d.get("line_index")
            C["li"].append(li if isinstance(li, int) else None)
            C["nl"].append(d.get("n_lines"))
            C["orig"].append(S(d.get("original_line")))
            C["edit"].append(S(d.get("edited_line")))
            # the prefix is rebuilt from the baseline's lines when it matches, so it is stored only when it does not
            lines = Q["lines"][qi] or []
            prefix = d.get("prefix_text")
            rebuilt = None
            if isinstance(li, int) and lines and li <= len(lines):
                rebuilt = "\n".join([S.table[x] for x in lines[:li]] + [d.get("edited_line") or ""]) + "\n"
            C["prefix"].append(None if prefix is None or prefix == rebuilt else prefix)
            C["text"].append(d.get("continuation") or "")
            C["ans"].append(S(d.get("parsed_answer")))
            C["gold"].append(S(d.get("gold")))
            C["ok"].append(_tri(d.get("correct")))
            lrec = lrecs.get(cid)
            lab = lrec.get("label") if lrec else d.get("label")
            C["lab"].append(S(lab if lab is not None else "none"))
            C["why"].append(S(lrec.get("reason")) if lrec else None)
            C["fin"].append(S(d.get("finish_reason")))
            C["ntok"].append(d.get("new_tokens"))
            C["task"].append(S(d.get("task")))
            C["lvl"].append(S(d.get("difficulty")))
            C["ds"].append(S(d.get("dataset")))
            ev, judge = _evidence(lrec)
            C["ev"].append([[a, b, S(t), S(x)] for a, b, t, x in ev] if ev else None)
            C["judge"].append([[S(a), S(b), _tri(c), e] for a, b, c, e in judge] if judge else None)
        for r in _steering(run, steering):
            row = rows.get(str(r.get("case_id")))
            if row is None:
                continue
            steer["row"].append(row)
            steer["setting"].append(S(r.get("setting")))
            steer["basis"].append(S(r.get("basis")))
            steer["layer"].append(r.get("layer"))
            steer["k"].append(r.get("k"))
            steer["alpha"].append(r.get("alpha_rel"))
            steer["text"].append(r.get("text") or "")
            steer["ans"].append(S(r.get("parsed_answer")))
            steer["ok"].append(_tri(r.get("correct")))
            steer["effect"].append(S(_effect(r)))
    return {
        "v": SCHEMA_VERSION,
        "meta": {"runs": meta_runs, "models": sorted({m["model"] for m in meta_runs}),
                 "labelling": labellings[0] if len(set(labellings)) == 1 else None},
        "S": S.table,
        "c": C,
        "Q": Q,
        "steer": steer if steer["row"] else None,
    }


def embed_json(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` and the JS line
    separators are written as ``\\uXXXX`` escapes, so no text can close the script element."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render(data: dict[str, Any], *, title: str = "trace browser") -> str:
    """The whole HTML page for :func:`collect`'s data."""
    from html import escape

    return (_PAGE.replace("__TITLE__", escape(title))
            .replace("__CSS__", _CSS)
            .replace("__JS__", _JS)
            .replace("__DATA__", embed_json(data)))


def write_browser(run_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], output: str | os.PathLike[str] | None = None,
                  *, labelling: str | None = None, steering: str | os.PathLike[str] | None = None) -> Path:
    """Write the browser for ``run_dirs`` (default ``RUN_DIR/browse.html``) atomically; returns its path."""
    dirs = [run_dirs] if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)
    if not dirs:
        raise BrowseError("no run directory given; pass RUN_DIR (a directory written by python -m behavioural.run)")
    out = Path(output) if output is not None else Path(dirs[0]) / DEFAULT_NAME
    if out.suffix.lower() not in (".html", ".htm"):
        raise BrowseError(f"--output {str(out)!r} does not end in .html; name an .html file")
    if out.exists() and out.is_dir():
        raise BrowseError(f"--output {str(out)!r} is a directory; name an .html file")
    if not out.parent.is_dir():
        raise BrowseError(f"--output directory {str(out.parent)!r} does not exist; create it first")
    data = collect(dirs, labelling=labelling, steering=steering)
    title = "trace browser: " + ", ".join(Path(d).name or str(d) for d in dirs)
    page = render(data, title=title)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m study.browse", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory written by python -m behavioural.run "
                   "(several: one browser over all, with a model filter)")
    p.add_argument("--output", "-o", default=None, help=f"the HTML file to write (default RUN_DIR/{DEFAULT_NAME})")
    p.add_argument("--labelling", default=None, help="labels/<NAME> to show (default: the newest complete labelling)")
    p.add_argument("--steering", default=None, metavar="GENERATIONS_JSONL",
                   help="a steering sweep's generations.jsonl (default RUN_DIR/steering/generations.jsonl when present)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out = write_browser(args.run_dirs, args.output, labelling=args.labelling, steering=args.steering)
    except (BrowseError, RunDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB); open it in a browser")
    return 0


# ------------------------------------------------------------------------------------------------ page

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>__TITLE__</title>
<style>__CSS__</style>
</head><body>
<header id="top"><b id="title"></b> <span id="meta"></span>
<nav><button id="tab-c" class="tab on">Continuations</button><button id="tab-q" class="tab">Questions</button></nav>
<input id="search" type="search" placeholder="search text, ids... ( / )" autocomplete="off">
<span id="count"></span><button id="clear">clear filters</button></header>
<main><aside id="facets"></aside>
<section id="listpane"><div id="list" tabindex="0"><div id="spacer"></div></div></section>
<section id="detail"><p class="hint">Select a sample (j/k or arrow keys to step; the URL is its permalink).</p></section>
<section id="qpane" hidden><div id="qhead" class="qrow head"></div><div id="qlist"><div id="qspacer"></div></div></section>
</main>
<script type="application/json" id="data">__DATA__</script>
<script>__JS__</script>
</body></html>
"""

_CSS = r"""
*{box-sizing:border-box}[hidden]{display:none!important}body{margin:0;font:13px/1.4 system-ui,sans-serif;color:#1d1d1f;background:#fafafa;height:100vh;
display:flex;flex-direction:column}header{display:flex;gap:10px;align-items:center;padding:6px 10px;background:#24292f;color:#fff;
flex-wrap:wrap}header #meta{color:#bbb;font-size:12px}nav{display:flex;gap:2px}.tab{background:#444;color:#ddd;border:0;
padding:4px 10px;cursor:pointer;border-radius:3px}.tab.on{background:#fff;color:#000}#search{flex:1;min-width:180px;padding:4px 6px}
#count{font-weight:600}#clear{padding:3px 8px}main{flex:1;display:flex;min-height:0}#facets{width:210px;overflow:auto;
padding:6px 8px;border-right:1px solid #ddd;background:#fff}.facet h4{margin:8px 0 2px;font-size:11px;text-transform:uppercase;
color:#666}.facet label{display:flex;gap:4px;align-items:center;cursor:pointer;white-space:nowrap;overflow:hidden}
.facet label.zero{color:#aaa}.facet .n{margin-left:auto;color:#666;font-variant-numeric:tabular-nums}#listpane{width:360px;
border-right:1px solid #ddd;display:flex;flex-direction:column;min-height:0}#list{flex:1;overflow-y:auto;position:relative;
outline:none}#spacer{position:relative}.row{position:absolute;left:0;right:0;height:28px;padding:4px 6px;display:flex;gap:6px;
align-items:center;border-bottom:1px solid #eee;cursor:pointer;white-space:nowrap;overflow:hidden}.row:hover{background:#f0f4ff}
.row.sel{background:#dbe7ff}.row .snip{color:#555;overflow:hidden;text-overflow:ellipsis}.badge{display:inline-block;
min-width:18px;text-align:center;border-radius:3px;padding:0 4px;font-weight:700;font-size:11px;color:#fff;background:#888}
.lab-A{background:#2e7d32}.lab-B{background:#1565c0}.lab-C{background:#c62828}.lab-non-C{background:#558b2f}.lab-none{background:#999}
.ok1{color:#2e7d32}.ok0{color:#c62828}.oknull{color:#999}#detail{flex:1;overflow:auto;padding:8px 12px;min-width:0}
#detail h3{margin:6px 0}.kv{color:#555}.cols{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:10px}
.panel{background:#fff;border:1px solid #ddd;border-radius:4px;padding:6px 8px;min-width:0}.panel h4{margin:0 0 4px;font-size:12px}
.text{white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word;font:12px/1.45 ui-monospace,monospace;max-height:60vh;
overflow:auto}.line{white-space:pre-wrap;overflow-wrap:anywhere}.after{color:#aaa}.diff-del{background:#ffebe9;
text-decoration:line-through}.diff-ins{background:#dafbe1}.diff-del em{font-style:normal;background:#ffb3ad}.diff-ins em{font-style:normal;
background:#8ce99a}mark.ev{background:#ffe58f;border-bottom:2px solid #d48806}.ans{margin-top:4px;font-size:12px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
.reply{max-width:600px;white-space:pre-wrap;overflow-wrap:anywhere;font:11px ui-monospace,monospace}details.steer{margin:4px 0}
details.steer summary{cursor:pointer}.moved{background:#2e7d32;color:#fff;padding:0 4px;border-radius:3px}.broken{background:#c62828;
color:#fff;padding:0 4px;border-radius:3px}.cols2{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:10px}
#qpane{flex:1;display:flex;flex-direction:column;min-height:0}#qlist{flex:1;overflow:auto;position:relative}#qspacer{position:relative}
.qrow{display:grid;grid-template-columns:90px minmax(0,3fr) 80px 70px 80px 50px 60px 140px 70px;gap:6px;height:26px;
align-items:center;padding:0 6px;border-bottom:1px solid #eee;white-space:nowrap;overflow:hidden;cursor:pointer}
.qrow>span{overflow:hidden;text-overflow:ellipsis}.qrow.head{font-weight:700;background:#eee;cursor:default}#qlist .qrow{position:absolute;
left:0;right:0}.hint{color:#777}.partners button{margin-right:4px}
"""

_JS = r"""
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
if (ST) FACETS.push(['steered', (i) => { const js = steerByRow.get(i); if (!js) return 'not steered';
  return js.some((j) => S[ST.effect[j]] === 'moved') ? 'moved' : 'not moved'; }]);
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
    facetBox.append(box);
  }
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
    if (eff === 'moved') d.open = true;
    const sm = el('summary');
    sm.append(S[ST.setting[j]] + ' \u2014 answer ' + (s(ST.ans[j]) === null ? 'unparsed' : s(ST.ans[j])) + ' ');
    if (eff === 'moved' || eff === 'broken') sm.append(el('span', eff, eff));
    else sm.append(el('span', 'kv', eff));
    d.append(sm);
    const two = el('div', 'cols2');
    const l = el('div', 'panel'); l.append(el('h4', null, baseName), el('div', 'text', baseText));
    const r = el('div', 'panel'); r.append(el('h4', null, 'steered: ' + S[ST.setting[j]]), el('div', 'text', ST.text[j]));
    two.append(l, r);
    d.append(two);
    box.append(d);
  }
  return box;
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
"""

if __name__ == "__main__":
    sys.exit(main())
