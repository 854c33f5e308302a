"""The trace browser (study.browse) and report.html (study.report.html).

Fast tier: the data the page embeds, the JSON escaping, the fragment syntax, the CLI's errors, the report's
objects in HTML (escaping, the rows' browser links).
Integration tier (``-m integration``): the page in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium) on a real small run written by the protocol with a scripted model,
labelled by the rule labeller and a scripted judge, with a steering file; plus a 20,000-continuation
synthetic run for size and time to first paint::

    flock /tmp/cpu.lock .venv/bin/pytest -q -s -m integration tests/test_browse.py -k scale
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import random
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from loadbearing.engine.generation import Generation
from loadbearing.records import Baseline, Continuation
from loadbearing.runs import Run
from study.browse.page import collect, embed_json, fragment, main, render, write_browser

REPO = Path(__file__).resolve().parents[1]
HOSTILE = ("Wait. <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"><b>bold</b> **unbalanced "
           "_markdown `tick [x](javascript:window.__pwned=3) </div></pre></script><!-- ")
LONG = "Z" * 10_000


def _study_html_module():
    """study.report.html, also while ``study`` is still the single study.py module (before the study package exists)."""
    try:
        import study.report.html
        return study.report.html
    except ImportError:
        spec = importlib.util.spec_from_file_location("_study_html", REPO / "study" / "html.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


def _study_html():
    return _study_html_module().write_report_html


# ------------------------------------------------------------------------------------------------ a real small run


def make_small_run(root: Path, tokenizer) -> Path:
    """A real run: the protocol on the arith task with the scripted model (tests/fakes.py), where every
    contradiction edit is repaired with a "Wait" (rule evidence, label B) and the first question's early
    contradiction continuation is hostile text; labelled by the rule labeller and a scripted judge; with a
    steering generations file in the sweep's record format."""
    from fakes import fake_lm, scripted_generate

    from behavioural.labels.labellers import JudgeLabeller, RuleLabeller
    from behavioural.labels.stage import label_run
    from behavioural.protocol import Settings, run_protocol
    from loadbearing.questions.data import load_questions

    hostile_done: list[str] = []

    def gen(lm, texts, **kw):
        outs = scripted_generate(lm, texts, **kw)
        res = []
        for t, g in zip(texts, outs):
            tail = t.rpartition("<|im_start|>assistant\n")[2]
            last = tail.rstrip("\n").split("\n")[-1] if tail else ""
            text = g.text
            if last.startswith("The following claim is false:"):
                if tail.count("\n") == 1 and not hostile_done:
                    hostile_done.append(t)
                    text = HOSTILE + LONG + "\n" + text
                else:
                    text = "Wait, that claim is actually true.\n" + text
            res.append(Generation(text=text, new_tokens=g.new_tokens, finish_reason=g.finish_reason))
        return res

    def judge_gen(lm, texts, **kw):
        return [Generation(text=" NOTICED" if i % 3 else " NOT NOTICED", new_tokens=2, finish_reason="eos")
                for i, _ in enumerate(texts)]

    qs = load_questions("arith", task="s2_o5", n_per_level=30)
    settings = Settings(model="scripted", dataset="arith", strategies=("arithmetic_change", "contradiction"), task="s2_o5",
                        max_examples=None, max_new_tokens=64, n_per_level=30, batch_size=8)
    lm = fake_lm(tokenizer)
    run_protocol(lm, qs, settings, root, generate_fn=gen, echo=None)
    label_run(root, [RuleLabeller(), JudgeLabeller(lm, "scripted-judge", generate_fn=judge_gen)], progress=False)
    run = Run(root)
    cases = [c for c in run.continuations("perturbed") if c.correct is False]
    steer = root / "steering"
    steer.mkdir()
    with open(steer / "generations.jsonl", "w") as f:
        for n, c in enumerate(cases):
            # case 0: moved by the probe; case 1: moved by the random control only; case 2: the probe changed the
            # answer but it is still wrong (issue #32: "moved" is the probe's, "changed, still wrong" a mark of its own)
            for key, basis, ok in (("none|alpha0", "none", False), ("L1|k1|a1|probe", "probe", n == 0),
                                   ("L1|k1|a1|random0", "random", n == 1)):
                text = c.continuation if basis == "none" else (f"Answer: {c.gold}" if ok else c.continuation)
                answer = c.gold if ok else c.parsed_answer
                if n == 2 and basis == "probe":
                    answer = str(int(c.gold) + 100)
                    text = f"Answer: {answer}"
                f.write(json.dumps({
                    "schema_version": 1, "setting": key, "basis": basis, "layer": None if basis == "none" else 1,
                    "k": 0 if basis == "none" else 1, "alpha_rel": 0.0 if basis == "none" else 1.0, "alpha": 1.0, "seed": None,
                    "case_id": c.id, "question_id": c.question_id, "case_label": "C", "strategy": c.strategy,
                    "position": c.position, "text": text, "parsed_answer": answer,
                    "gold": c.gold, "correct": ok, "finish_reason": "eos", "new_tokens": 5}) + "\n")
    add_causal_outputs(root, tokenizer)
    return root


#: what the scripted paraphraser puts before every line it rewrites (markup that must show as text)
PARA_MARK = '<img src=x onerror="window.__pwned=4"><i>In other words</i> '
#: the restored fraction per (layer, group) of the patched case (steering.patching.cli's record format)
PATCHED = {0: [1.0, 0.0, 0.0, 1.0], 1: [0.5, 0.0, 0.25, 0.75]}


def add_causal_outputs(root: Path, tokenizer) -> None:
    """The causal tests on the small run, by their own stage code with scripted models: early answering (the
    answer is known once the chain holds two lines), a paraphrase of every prefix (each line behind
    :data:`PARA_MARK`), resampling of 4 questions (even rollouts replace the step; at step 1 they then answer
    999); and ``patching/patching.json`` in steering.patching.cli's format for one C case of a resampled question."""
    import re

    from fakes import fake_lm, scripted_generate

    from behavioural.causal.common import ANSWER_PREFIX
    from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer
    from behavioural.causal.paraphrase import ParaphraseConfig, run_paraphrase
    from behavioural.causal.resample import ResampleConfig, run_resample

    base = {b.prompt: b for b in Run(root).baselines()}

    def chain_of(t: str):
        p = next(p for p in base if t.startswith(p))
        return base[p], [x for x in t[len(p):].removesuffix(ANSWER_PREFIX).split("\n") if x.strip()]

    def forced(lm, texts, **kw):
        return [Generation(f" {b.gold if len(lines) >= 2 else 999}\n", 2, "eos") for b, lines in map(chain_of, texts)]

    def paraphrase(lm, texts, **kw):
        out = []
        for t in texts:
            m = re.search(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", t, re.S)
            if m and not any(t.startswith(p) for p in base):
                out.append(Generation("\n".join(PARA_MARK + x for x in m.group(1).split("\n")), 9, "eos"))
            else:
                out += scripted_generate(lm, [t], **kw)
        return out

    def sample(lm, texts, *, sample_keys, **kw):
        out = []
        for t, key in zip(texts, sample_keys):
            b, _ = chain_of(t)
            k, j = (int(x) for x in re.search(r"k=(\d+)\|r=(\d+)$", key).groups())
            if t.endswith(ANSWER_PREFIX):
                out.append(Generation(f" {b.gold if k >= 2 else 999}\n", 2, "eos"))
                continue
            rest = list(b.lines[k:])
            if rest and j % 2 == 0:
                rest[0] = f"Something else entirely {j}"
            out.append(Generation("\n".join(rest + [f"Answer: {999 if k == 1 and j % 2 == 0 else b.gold}"]), 9, "eos"))
        return out

    lm = fake_lm(tokenizer)
    run_early_answer(EarlyAnswerConfig(root, n_boot=50, quiet=True), lm, generate_fn=forced, echo=None)
    run_paraphrase(ParaphraseConfig(root, n_boot=50, quiet=True, allow_same_paraphraser=True), lm,
                   generate_fn=paraphrase, echo=None)
    rs = run_resample(ResampleConfig(root, rollouts=4, max_questions=4, n_boot=50, quiet=True), lm,
                      generate_fn=sample, echo=None)
    add_new_stage_outputs(root, tokenizer, forced)
    sampled = {q["question_id"] for q in rs["questions"]}
    case = next(c for c in Run(root).continuations("perturbed") if c.label == "C" and c.question_id in sampled)
    groups = ["edit", "before", "last", "all"]
    results = [{"kind": "sweep", "layer": L, "group": g, "n_positions": 3, "ld": 0.0, "restored": r}
               for L, row in PATCHED.items() for g, r in zip(groups, row)]
    results.append({"kind": "random-layer", "layer": 1, "group": "edit", "n_positions": 3, "ld": 0.0, "restored": 9.0})
    (root / "patching").mkdir()
    (root / "patching" / "patching.json").write_text(json.dumps({
        "schema_version": 1, "kind": "steering.patching.cli", "settings": {"layers": list(PATCHED), "groups": groups},
        "cases": [{"id": case.id, "question_id": case.question_id, "gold": case.gold, "propagated": case.parsed_answer,
                   "ld_edited": 2.0, "ld_clean": -1.0, "gap": -3.0, "excluded": False, "results": results}]}))


def add_new_stage_outputs(root: Path, tokenizer, forced) -> None:
    """The filler sweep (the scripted answerer: right only with two lines or more, so every filler is wrong and
    the full chain right) and the white-box stages by their own code on tests/test_attention.py's scripted
    attention model (later steps read step 1 only), on every eligible chain."""
    from fakes import fake_lm
    from helpers.attention import scripted_lm

    from behavioural.causal.attention import AttentionConfig, run_receiver_heads, run_suppression
    from behavioural.causal.filler import FillerConfig, run_filler

    run_filler(FillerConfig(root, fillers=("dots",), n_boot=50, quiet=True), fake_lm(tokenizer),
               generate_fn=forced, echo=None)
    lm = scripted_lm(root, tokenizer)
    run_receiver_heads(AttentionConfig(root, max_questions=None, quiet=True), lm, echo=None)
    run_suppression(AttentionConfig(root, max_questions=None, quiet=True), lm, echo=None)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, tokenizer) -> Path:
    return make_small_run(tmp_path_factory.mktemp("browse") / "run", tokenizer)


def _strategies(c: dict) -> set[str]:
    return {m[0] for m in c.get("memberships") or []} or {c["strategy"]}


def _labels(run_dir: Path) -> dict[str, dict]:
    d = Run(run_dir).labelling_dir()
    return {json.loads(line)["id"]: json.loads(line) for line in (d / "labels.jsonl").read_text().splitlines()}


# ------------------------------------------------------------------------------------------------ fast tier


def test_collect_matches_the_records(small_run):
    data = collect([small_run])
    run = Run(small_run)
    conts = run.continuation_dicts()
    S, C = data["S"], data["c"]
    assert len(C["id"]) == len(conts) and C["id"] == [c["id"] for c in conts]
    assert len(data["Q"]["id"]) == len(run.baselines())
    labels = _labels(small_run)
    for k, c in enumerate(conts):
        assert C["text"][k] == c["continuation"]
        assert S[C["edit"][k]] == c["edited_line"] and S[C["orig"][k]] == c["original_line"]
        assert S[C["lab"][k]] == (labels[c["id"]]["label"] or "none")
        # the prefix is stored only when it cannot be rebuilt from the baseline's lines
        qi = C["q"][k]
        lines = [S[x] for x in data["Q"]["lines"][qi]]
        rebuilt = "\n".join(lines[:c["line_index"]] + [c["edited_line"]]) + "\n"
        assert (C["prefix"][k] or rebuilt) == c["prefix_text"]
    ev = [(k, e) for k, spans in enumerate(C["ev"]) if spans for e in spans]
    assert ev, "the run has rule evidence"
    for k, (a, b, _t, _d) in ev:
        assert C["text"][k][a:b]
    assert any(C["judge"]), "the judge's per-variant verdicts are embedded"
    st = data["steer"]
    assert st and len(st["row"]) == 3 * len(run.continuations("perturbed")) - 3 * sum(
        1 for c in run.continuations("perturbed") if c.correct is not False)
    effects = [(S[st["basis"][j]], S[e]) for j, e in enumerate(st["effect"])]
    assert effects.count(("probe", "moved")) == 1 and effects.count(("random", "moved")) == 1
    assert effects.count(("probe", "changed")) == 1  # another wrong answer: not "same"
    n_cases = len({r for r in st["row"]})
    assert st["counts"] == [
        {"setting": "L1|k1|a1|probe", "basis": "probe", "k": 1, "n": n_cases, "strongest": False, "n_cases": n_cases, "run": 0},
        {"setting": "random", "basis": "random", "k": 1, "n": n_cases, "strongest": False, "n_cases": n_cases, "run": 0}]


def test_embedded_json_cannot_close_the_script(small_run):
    data = collect([small_run])
    s = embed_json(data)
    assert "<" not in s and ">" not in s and "&" not in s
    assert json.loads(s) == json.loads(json.dumps(data))
    page = render(data)
    main_part = {k: v for k, v in data.items() if k != "causal"}
    for block, want in (("data", main_part), ("causal", data["causal"])):
        body = page.split(f'<script type="application/json" id="{block}">', 1)[1]
        # the first </script> closes the block, nothing earlier; the causal tests are a block of their own
        assert body.index("</script>") == len(embed_json(want)) and json.loads(body[:body.index("</script>")]) == want
    assert HOSTILE[:20] not in page and PARA_MARK[:8] not in page  # the hostile text is only present escaped


def test_placeholder_text_in_the_data_is_left_as_it_is(small_run):
    data = collect([small_run])
    data["c"]["text"][0] = "__CAUSAL__ __DATA__ __JS__"
    page = render(data)
    assert page.count('id="causal"') == 1 and "__CAUSAL__ __DATA__ __JS__" in page


def test_causal_panels_data_come_from_the_runs_files(small_run):
    data = collect([small_run])
    ca, Q, C = data["causal"], data["Q"], data["c"]
    assert ca["stages"] == ["early_answer", "filler", "paraphrase", "patching", "receiver_heads", "resample", "suppression"]
    qrow = {qid: i for i, qid in enumerate(Q["id"])}
    ea = json.loads((small_run / "early_answer" / "summary.json").read_text())["questions"]
    assert len(ca["ea"]) == len(ea) == sum(1 for b in Run(small_run).baselines() if b.eligible)
    for q in ea:
        got = ca["ea"][str(qrow[q["question_id"]])]
        assert (got["k"], got["a"], got["s"], got["n"]) == (q["k"], q["answers"], q["same"], q["n_lines"])
        assert got["s"] == [0, 0] + [1] * (q["n_lines"] - 1)  # the scripted answerer knows it after two lines
    paras = [json.loads(x) for x in (small_run / "paraphrase" / "records.jsonl").read_text().splitlines()]
    for r in (r for r in paras if r["fraction"] == 0.5):  # the browser shows the half-chain rewrite
        got = ca["pp"][str(qrow[r["question_id"]])]
        assert got["orig"] == r["original_lines"] and got["para"] == r["paraphrased_lines"]
        assert got["cont"] == r["continuation"] and (got["ans"], got["ref"], got["same"]) == (
            r["parsed_answer"], r["reference_answer"], r["same_answer"])
        assert all(x.startswith(PARA_MARK) for x in got["para"])
    rs = json.loads((small_run / "resample" / "summary.json").read_text())
    rows = [json.loads(x) for x in (small_run / "resample" / "records.jsonl").read_text().splitlines()]
    assert len(ca["rs"]) == len(rs["questions"]) == 4
    for q in rs["questions"]:
        got = ca["rs"][str(qrow[q["question_id"]])]
        assert got["anchor"] == q["anchor"] == 1 and got["rollouts"] == 4
        for st, g in zip(q["steps"], got["steps"]):
            assert (g["n"], g["nd"], g["rank"]) == (st["n_rollouts"], st["n_different"], st["rank"])
            assert g["cf"] == pytest.approx(st["cf_importance"], abs=1e-4) if st["cf_importance"] is not None else g["cf"] is None
            mine = [r for r in rows if r["question_id"] == q["question_id"] and r["kind"] == "rollout" and r["k"] == st["step"]]
            want = sorted(mine, key=lambda r: (not r["different"], r["rollout"]))[:3]
            assert [x[4] for x in g["roll"]] == [r["generation"] for r in want] and [x[0] for x in g["roll"]] == [
                r["new_step"] for r in want]
        assert got["steps"][1]["roll"][0][0].startswith("Something else entirely")  # different ones first
    patch = json.loads((small_run / "patching" / "patching.json").read_text())["cases"][0]
    (row, pt), = ca["pt"].items()
    assert C["id"][int(row)] == patch["id"] and S_(data, C["lab"][int(row)]) == "C"
    assert pt["layers"] == [0, 1] and pt["groups"] == ["edit", "before", "last", "all"]
    assert pt["r"] == [PATCHED[0], PATCHED[1]]  # the sweep rows only (the random-layer control is left out)


def _propagation_by_step(run_dir: Path) -> dict[tuple[str, int], float]:
    """(question key, edited line) -> C / labelled perturbed continuations, counted here from the records."""
    cells: dict[tuple[str, int], list[int]] = {}
    for c in Run(run_dir).continuations("perturbed"):
        if c.label is not None:
            cell = cells.setdefault((c.question_key or c.question_id, c.line_index), [0, 0])
            cell[0] += c.label == "C"
            cell[1] += 1
    return {k: nc / n for k, (nc, n) in cells.items()}


def _same(got: list, want: list, tol: float = 1e-4) -> bool:
    """Equal lists of numbers (within ``tol``) and Nones."""
    return len(got) == len(want) and all((a is None and b is None) or (a is not None and b is not None and abs(a - b) <= tol)
                                         for a, b in zip(got, want))


def test_new_causal_stages_data_come_from_the_summaries(small_run):
    """The filler rows, the step-level measures and the whole-run summaries equal the stages' files."""
    data = collect([small_run])
    ca, Q = data["causal"], data["Q"]
    qrow = {qid: i for i, qid in enumerate(Q["id"])}
    read = lambda name: json.loads((small_run / name / "summary.json").read_text())  # noqa: E731
    rh, sp, rs, ea, fs, ps = (read(n) for n in ("receiver_heads", "suppression", "resample", "early_answer", "filler",
                                                "paraphrase"))
    prop = _propagation_by_step(small_run)
    cf = {q["question_key"]: {st["step"]: st["cf_importance"] for st in q["steps"]} for q in rs["questions"]}
    spq = {q["question_key"]: q for q in sp["questions"]}
    assert len(ca["st"]) == len(rh["questions"]) == len(sp["questions"]) >= 4
    for q in rh["questions"]:
        got = ca["st"][str(qrow[q["question_id"]])]
        key = q["question_key"]
        assert got["n"] == q["n_lines"] and _same(got["m"]["receiver"], q["receiver_score"])
        assert _same(got["m"]["suppression"], spq[key]["step_effect"])
        assert got["top"]["receiver"] == q["top_step"] == 1 and got["top"]["suppression"] == spq[key]["top_step"] == 1
        assert _same(got["m"]["propagation"], [prop.get((key, i)) for i in range(got["n"])])
        if key in cf:  # resampled: |cf importance| of each step
            assert _same(got["m"]["resampling"], [None if cf[key].get(i) is None else abs(cf[key][i])
                                                  for i in range(got["n"])])
        else:
            assert "resampling" not in got["m"]
        e = next(x for x in ea["questions"] if x["question_id"] == q["question_id"])
        assert (ca["ea"][str(qrow[q["question_id"]])]["dp"], ca["ea"][str(qrow[q["question_id"]])]["nldd"]) == (
            e["decision_point"], pytest.approx(e["nldd_share"], abs=1e-4))
    frows = [json.loads(x) for x in (small_run / "filler" / "records.jsonl").read_text().splitlines()]
    for qid, qi in qrow.items():
        mine = [r for r in frows if r["question_id"] == qid]
        if mine:
            got = ca["fl"][str(qi)]["c"]
            assert [c[0] for c in got] == [c for c in fs["conditions"] if any(r["condition"] == c for r in mine)]
            assert all(c[4] == (1 if c[0] == "full" else 0) for c in got)  # only the full chain answers right
    (sm,) = ca["sm"]
    assert sm["stages"] == ["early_answer", "filler", "paraphrase", "receiver_heads", "suppression"]
    assert sm["ea"]["nldd"]["v"] == pytest.approx(ea["decision_point"]["overall"]["mean_nldd_share"], abs=1e-4)
    assert [(p["x"], p["acc"]["k"], p["acc"]["n"]) for p in sm["fl"]["sweep"]["dots"]] == [
        (p["fraction"], p["accuracy"]["k"], p["accuracy"]["n"]) for p in fs["sweep"]["dots"]]
    assert [(p["x"], p["ret"]["k"], p["ret"]["n"]) for p in sm["pp"]["curve"]] == [
        (p["fraction"], p["retention"]["k"], p["retention"]["n"]) for p in ps["curve"]]
    assert [h[:2] for h in sm["rh"]["heads"]] == [[h["layer"], h["head"]] for h in rh["top_heads"]][:8]
    from behavioural.causal.agreement import step_agreement
    from study.report.causal import N_BOOT, SEED

    ag = step_agreement(small_run, n_boot=N_BOOT, seed=SEED)
    assert [(a["a"], a["b"], a["nq"], a["top"]["k"], a["top"]["n"]) for a in sm["ag"]] == [
        (p["a"], p["b"], p["n_questions_rho"], p["same_top_step"]["k"], p["same_top_step"]["n"]) for p in ag["pairs"]]


def S_(data: dict, i: int | None) -> str | None:
    return None if i is None else data["S"][i]


def test_page_needs_no_network(small_run):
    from study import browse

    for part in (browse.page_file(name) for name in browse.PAGE_FILES):
        assert part.count("'http://www.w3.org/2000/svg'") <= 1  # the SVG namespace: a name, never fetched
        part = part.replace("'http://www.w3.org/2000/svg'", "")
        assert "http://" not in part and "https://" not in part and "//cdn" not in part
        assert "innerHTML" not in part and "insertAdjacentHTML" not in part and "eval(" not in part


def test_page_files_are_package_data():
    """Every file of the page is in study/browser/ and named by pyproject's package-data (so a wheel carries it),
    and the rendered page inlines each one with no placeholder left."""
    import fnmatch
    import re

    from study import browse

    toml = (REPO / "pyproject.toml").read_text()  # (tomllib is Python 3.11+; the toolkit runs on 3.10)
    section = toml.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    globs = json.loads(re.search(r"^study\s*=\s*(\[.*\])\s*$", section, re.M).group(1))
    on_disk = sorted(p.name for p in (REPO / "study" / "browser").iterdir() if p.is_file())
    assert on_disk == sorted(browse.PAGE_FILES)
    assert all(any(fnmatch.fnmatch(f"browser/{name}", g) for g in globs) for name in on_disk)
    page = render({"v": 1, "S": [], "c": {}, "Q": {}}, title="t")
    assert all(browse.page_file(name).strip() in page for name in ("browse.css", "browse.js"))
    assert not any(ph in page for ph in ("__TITLE__", "__CSS__", "__JS__", "__DATA__"))


def test_fragment_syntax():
    assert fragment({"strategy": "contradiction", "label": "C"}) == "#f=strategy:contradiction,label:C"
    assert fragment({"strategy": ["a", "b"]}, q="x y", id="q1|a,b:c") == "#f=strategy:a,strategy:b&q=x%20y&id=q1%7Ca%2Cb%3Ac"
    with pytest.raises(ValueError, match="unknown browser facet"):
        fragment({"colour": "red"})


def test_cli_writes_and_refuses(small_run, tmp_path, capsys):
    out = tmp_path / "b.html"
    assert main([str(small_run), "--output-file", str(out)]) == 0
    assert out.is_file() and out.stat().st_size > 1000
    assert not list(tmp_path.glob("*.tmp"))
    for argv, msg in (([str(tmp_path / "nope")], "does not exist"),
                      ([str(small_run), "--output-file", str(tmp_path / "x.txt")], "does not end in .html"),
                      ([str(small_run), "--output-file", str(tmp_path / "no" / "x.html")], "does not exist"),
                      ([str(small_run), "--labelling", "nope"], "not found"),
                      ([str(small_run), "--steering", str(tmp_path / "g.jsonl")], "not found")):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and msg in err


def test_two_runs_in_one_browser(small_run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(small_run, other)
    m = json.loads((other / "manifest.json").read_text())
    m["model"]["name"] = "other-model"
    (other / "manifest.json").write_text(json.dumps(m))
    data = collect([small_run, other])
    assert data["meta"]["models"] == ["other-model", "scripted"]
    assert len(set(data["c"]["id"])) == len(data["c"]["id"]) == 2 * len(Run(small_run).continuations())


def test_run_without_labels_or_baseline_lines(tmp_path, tokenizer):
    from activations.synthetic import make_run

    rd, recs = make_run(tmp_path / "r", tokenizer, n_questions=4)
    (rd / "baselines.jsonl").write_text("")
    data = collect([rd])
    assert data["meta"]["labelling"] is None and data["steer"] is None and data["causal"] is None
    assert [data["S"][x] for x in data["c"]["lab"]] == [r["label"] or "none" for r in recs]
    assert data["c"]["prefix"] == [r["prefix_text"] for r in recs]  # no baseline: the prefix is embedded


def test_report_tables_and_links(tmp_path):
    from loadbearing.report.blocks import Bullets, Code, Figure, Paragraph, Row, Section, Table, facet_filter, label_cell_filters

    write_report_html = _study_html()
    png = tmp_path / "fig.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    head = ("group", "propagation", "control")
    blocks = (Paragraph("Intro with **bold** and `code` and <script>alert(1)</script> [bad](javascript:alert(1))."),
              Table(head, (Row(("overall", "50%", "0%"), filter=facet_filter()),
                           Row(("strategy=contradiction", "10%", "0%"), filter=facet_filter(strategy="contradiction")),
                           Row(("position=early, C", "1", "2"), filter=facet_filter(position="early", label="C")),
                           Row(("note", "x", "y")))),
              Table(("level", "accuracy"), (Row(("s2_o5", "40%"), filter=facet_filter(difficulty="s2_o5")),)),
              Bullets(("item *one*", "item two")), Code("<b>code</b>"), Figure("fig.png", "fig"),
              Figure("missing.png", "missing"))
    out = write_report_html(tmp_path, [Section("Behaviour", blocks)])
    page = out.read_text()
    assert out.name == "report.html"
    assert "<script>" not in page and "&lt;script&gt;" in page and 'href="javascript' not in page
    assert page.count("<table>") == 2 and "<b>bold</b>" in page and "<code>code</code>" in page
    assert "&lt;b&gt;code&lt;/b&gt;" in page and "<li>item <i>one</i></li>" in page
    assert 'href="browse.html#f=condition:perturbed,strategy:contradiction"' in page
    assert 'href="browse.html#f=condition:perturbed,position:early,label:C"' in page
    assert 'href="browse.html#f=condition:perturbed"' in page  # overall
    assert 'href="browse.html#f=condition:perturbed,level:s2_o5"' in page  # a difficulty group is the level facet
    assert page.count('class="browse"') == 4  # the "note" row carries no filter
    assert page.count("data:image/png;base64,") == 1 and "[missing figure missing.png]" in page
    lab_head = ("perturbed, by", "n", "A", "B", "C")
    cells = ("strategy=contradiction", "5", "2", "0", "3")
    f = facet_filter(strategy="contradiction")
    lab = write_report_html(tmp_path, [Section("Labels", (Table(lab_head, (Row(cells, f, label_cell_filters(f, lab_head,
                                                                                                              cells)),)),))],
                            browse="b.html").read_text()
    assert 'href="b.html#f=condition:perturbed,strategy:contradiction,label:C"' in lab
    assert 'href="b.html#f=condition:perturbed,strategy:contradiction,label:A"' in lab and "label:B" not in lab
    with pytest.raises(ValueError, match="unknown browser facet 'colour'"):
        facet_filter(colour="red")


def test_report_figures_stay_inside_the_study(tmp_path):
    from loadbearing.report.blocks import Figure, Section

    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "acc.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\1" * 20)
    (tmp_path.parent / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    secs = [Section("2. Probes", (Figure("probes/acc.png", "acc"), Figure("../secret.png", "up")))]
    page = _study_html()(tmp_path, secs).read_text()
    assert page.count("data:image/png;base64,") == 1 and "[missing figure ../secret.png]" in page


def test_study_report_rows_carry_their_browser_filters(tmp_path):
    """The behaviour and labels tables of a study's report link each group row (and each non-zero label count)
    to the browser filtered to that group: the filters are set where the rows are built, from the group keys."""
    from behavioural.labels.label_summary import summary_blocks
    from loadbearing.report.blocks import Table
    from study.report.behaviour import behaviour_blocks

    rate = {"k": 1, "n": 2, "rate": 0.5, "lo": 0.1, "hi": 0.9, "method": "wilson", "n_questions": 2}
    row = {"propagation": rate, "control_error": rate, "coverage": rate, "questions": 2, "generations": 4}
    s = {"questions": 2, "baseline_accuracy": rate, "eligible": 2, "continuations": 4, "overall": row,
         "by": {"strategy": {"contradiction": row}, "difficulty": {"s2_o5": row}}}
    t = next(b for b in behaviour_blocks(s) if isinstance(b, Table))
    assert [r.filter for r in t.rows] == [{"condition": "perturbed"}, {"condition": "perturbed", "strategy": "contradiction"},
                                          {"condition": "perturbed", "level": "s2_o5"}]
    counts = {"A": 1, "B": 0, "C": 2, "null": 0}
    cond = {"n": 3, "counts": counts, "propagation": rate, "B_among_correct_labelled": rate}
    lab = {"labelling": "rule", "final_labeller": "rule", "control": cond,
           "perturbed": dict(cond, by={"position": {"early": {"n": 3, "counts": counts}}})}
    by_cond, by_group = [b for b in summary_blocks(lab) if isinstance(b, Table)]
    assert by_cond.rows[1].filter == {"condition": "control"}
    assert dict(by_group.rows[0].cell_filters) == {2: {"condition": "perturbed", "position": "early", "label": "A"},
                                                   4: {"condition": "perturbed", "position": "early", "label": "C"}}


# ------------------------------------------------------------------------------------------------ real browser


def _chromium():
    for b, d in (("/usr/bin/chromium", "/usr/bin/chromedriver"),):
        if Path(b).exists() and Path(d).exists():
            return b, d
    b, d = shutil.which("chromium"), shutil.which("chromedriver")
    if not (b and d):
        pytest.fail("chromium and chromedriver are needed for the browser tests: apt-get update && "
                    "apt-get install -y chromium chromium-driver (make test and .ci/run install them)")
    return b, d


@pytest.fixture(scope="module")
def driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[dev]'")
    binary, drv = _chromium()
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000",
              "--disable-gpu", "--allow-file-access-from-files"):
        opts.add_argument(a)
    opts.binary_location = binary
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(drv), options=opts)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def page(small_run) -> Path:
    return write_browser(small_run)


def _open(driver, path: Path, frag: str = "") -> None:
    driver.get("about:blank")
    driver.get(path.resolve().as_uri() + frag)
    for _ in range(100):
        if driver.execute_script("return document.body && document.body.dataset.ready === '1'"):
            return
        time.sleep(0.05)
    raise AssertionError("the page did not become ready: " + repr(driver.get_log("browser")))


def _visible(driver) -> int:
    return int(driver.execute_script("return document.getElementById('count').dataset.visible"))


def _errors(driver) -> list:
    return [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def _click_facet(driver, facet: str, value: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'#facets input[data-facet="{facet}"][data-value="{value}"]').click()


@pytest.mark.integration
def test_filters_and_counts_in_chromium(driver, page, small_run, tmp_path):
    from selenium.webdriver.common.by import By

    conts = Run(small_run).continuation_dicts()
    labels = _labels(small_run)
    pert = [c for c in conts if c["condition"] == "perturbed"]
    _open(driver, page)
    assert _visible(driver) == len(pert)  # opens on the perturbed continuations
    assert driver.find_element(By.ID, "count").text == f"{len(pert)} of {len(conts)} continuations"
    rows = driver.find_elements(By.CSS_SELECTOR, "#spacer .row")
    assert 0 < len(rows) <= len(pert)
    _click_facet(driver, "strategy", "contradiction")
    want = [c for c in pert if "contradiction" in _strategies(c)]
    assert _visible(driver) == len(want)
    # facet counts: each label's count among the other filters' matches
    for lab in ("B", "A", "C"):
        n = sum(1 for c in want if (labels[c["id"]]["label"] or "none") == lab)
        els = driver.find_elements(By.CSS_SELECTOR, f'#facets input[data-facet="label"][data-value="{lab}"]')
        if els:
            assert int(els[0].find_element(By.XPATH, "..").find_element(By.CSS_SELECTOR, ".n").text) == n
    _click_facet(driver, "label", "B")
    want_b = [c for c in want if labels[c["id"]]["label"] == "B"]
    assert want_b and _visible(driver) == len(want_b)
    assert "f=condition:perturbed,strategy:contradiction,label:B" in driver.current_url
    _click_facet(driver, "strategy", "arithmetic_change")  # OR within a facet
    assert _visible(driver) == sum(1 for c in pert if labels[c["id"]]["label"] == "B")
    driver.find_element(By.ID, "clear").click()
    assert _visible(driver) == len(conts)
    _click_facet(driver, "correct", "wrong")
    assert _visible(driver) == sum(1 for c in conts if c["correct"] is False)
    driver.find_element(By.ID, "clear").click()
    box = driver.find_element(By.ID, "search")
    box.send_keys("claim is false")
    time.sleep(0.4)
    assert _visible(driver) == sum(1 for c in conts if "claim is false" in c["edited_line"].lower())
    # a fragment filter, as report.html links it
    _open(driver, page, fragment({"condition": "perturbed", "strategy": "arithmetic_change", "label": "C"}))
    assert _visible(driver) == sum(1 for c in pert if "arithmetic_change" in _strategies(c) and labels[c["id"]]["label"] == "C")
    # the probe's moves apart from the random controls' (issue #32), and the per-setting counts under the facet
    for value in ("moved by the probe", "moved by a random control only", "changed by the probe, still wrong"):
        _open(driver, page, "#f=steered:" + quote(value, safe=""))
        assert _visible(driver) == 1, value
    counts = driver.find_elements(By.CSS_SELECTOR, '[data-role="steer-counts"] div')
    n_cases = sum(1 for c in pert if c["correct"] is False)
    assert [c.text for c in counts] == [f"probe L1|k1|a1|probe: moved 1/{n_cases}", f"random controls: moved 1/{n_cases}"]
    # the questions tab lists every baseline with eligibility and the reason
    driver.find_element(By.ID, "tab-q").click()
    qrows = driver.find_elements(By.CSS_SELECTOR, "#qspacer .qrow")
    bl = Run(small_run).baselines()
    assert len(qrows) == min(len(bl), len(qrows)) and qrows
    first = qrows[0].text
    assert bl[0].question_id in first and (bl[0].reason in first or bl[0].eligible)
    driver.save_screenshot(str(tmp_path / "questions.png"))
    # clicking a question opens its continuations
    qid = conts[0]["question_id"]
    k = [b.question_id for b in bl].index(qid)
    driver.execute_script("document.getElementById('qlist').scrollTop = arguments[0] * 26", k)
    time.sleep(0.2)
    driver.find_element(By.CSS_SELECTOR, f'#qspacer .qrow[data-qid="{qid}"]').click()
    assert _visible(driver) == sum(1 for c in conts if c["question_id"] == qid)
    assert "f=question:" + quote(qid, safe="") in driver.current_url
    assert _errors(driver) == []


@pytest.mark.integration
def test_permalink_highlights_and_keys(driver, page, small_run, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    labels = _labels(small_run)
    conts = {c["id"]: c for c in Run(small_run).continuation_dicts()}
    cid = next(i for i, r in labels.items() if r["label"] == "B" and r["condition"] == "perturbed"
               and HOSTILE[:5] not in conts[i]["continuation"])
    c = conts[cid]
    _open(driver, page, "#" + quote(cid, safe=""))
    assert driver.find_element(By.CSS_SELECTOR, "#detail h3").text == cid
    assert cid in driver.execute_script("return decodeURIComponent(location.hash)")
    orig = driver.find_element(By.CSS_SELECTOR, '[data-role="original"]')
    assert orig.find_element(By.CSS_SELECTOR, ".diff-del").text.startswith("- " + c["original_line"][:3])
    assert orig.find_element(By.CSS_SELECTOR, ".diff-ins").text == "+ " + c["edited_line"]
    marks = driver.find_elements(By.CSS_SELECTOR, '[data-role="perturbed"] mark.ev')
    spans = labels[cid]["labellers"]["rule"]["evidence"]
    assert marks and {m.text for m in marks} <= {c["continuation"][e["start"]:e["end"]] for e in spans} | {
        c["continuation"][a:b] for e in spans for a in range(e["start"], e["end"]) for b in range(a + 1, e["end"] + 1)}
    bg = driver.execute_script("return getComputedStyle(arguments[0]).backgroundColor", marks[0])
    assert bg not in ("rgba(0, 0, 0, 0)", "transparent")
    ctrl = driver.find_element(By.CSS_SELECTOR, '[data-role="control"]')
    ctrl_rec = next(x for x in conts.values() if x["condition"] == "control" and x["question_id"] == c["question_id"]
                    and x["line_index"] == c["line_index"])
    assert ctrl_rec["continuation"].splitlines()[0] in ctrl.text
    assert driver.find_elements(By.CSS_SELECTOR, '[data-role="label"] table[data-role="judge"] tr')
    driver.save_screenshot(str(tmp_path / "permalink.png"))
    # keyboard: j / k step through the visible samples and the URL follows
    body = driver.find_element(By.TAG_NAME, "body")
    body.send_keys("j")
    after_j = driver.find_element(By.CSS_SELECTOR, "#detail h3").text
    assert after_j != cid and quote(after_j, safe="") in driver.current_url
    body.send_keys(Keys.ARROW_UP)
    assert driver.find_element(By.CSS_SELECTOR, "#detail h3").text == cid
    body.send_keys("k")
    assert driver.find_element(By.CSS_SELECTOR, "#detail h3").text != cid
    # steering: the moved case shows its steered generation beside the unsteered one
    moved = next(json.loads(x)["case_id"] for x in (small_run / "steering" / "generations.jsonl").read_text().splitlines()
                 if json.loads(x)["correct"] is True)
    _open(driver, page, "#id=" + quote(moved, safe=""))
    st = driver.find_element(By.CSS_SELECTOR, '[data-role="steering"]')
    assert st.find_element(By.CSS_SELECTOR, "span.moved").text == "moved"
    opened = st.find_element(By.CSS_SELECTOR, "details[open]")
    assert "unsteered" in opened.text and "steered: L1|k1|a1|probe" in opened.text
    driver.save_screenshot(str(tmp_path / "steering.png"))
    # a probe setting that changed the answer to another wrong one is marked so, not "same"
    changed = [json.loads(x) for x in (small_run / "steering" / "generations.jsonl").read_text().splitlines()]
    changed = next(r["case_id"] for r in changed if r["basis"] == "probe" and r["correct"] is False
                   and r["parsed_answer"] == str(int(r["gold"]) + 100))
    _open(driver, page, "#id=" + quote(changed, safe=""))
    st = driver.find_element(By.CSS_SELECTOR, '[data-role="steering"]')
    assert st.find_element(By.CSS_SELECTOR, 'details[data-basis="probe"] span.changed').text == "changed, still wrong"
    assert (tmp_path / "permalink.png").stat().st_size > 10_000
    assert _errors(driver) == []


@pytest.mark.integration
def test_hostile_text_renders_as_text(driver, page, small_run, tmp_path):
    from selenium.webdriver.common.by import By

    conts = Run(small_run).continuation_dicts()
    bad = next(c for c in conts if c["continuation"].startswith(HOSTILE))
    _open(driver, page, "#" + quote(bad["id"], safe=""))
    assert driver.execute_script("return window.__pwned") is None
    panel = driver.find_element(By.CSS_SELECTOR, '[data-role="perturbed"] .text')
    text = driver.execute_script("return arguments[0].textContent", panel)
    assert text == bad["continuation"]
    assert not driver.find_elements(By.CSS_SELECTOR, "#detail img, #detail script")
    assert driver.execute_script("return [...arguments[0].querySelectorAll('*')].map(e => e.tagName)", panel) == ["MARK"]
    assert not driver.find_elements(By.CSS_SELECTOR, "#detail [onerror]")
    assert len(driver.find_elements(By.TAG_NAME, "script")) == 3  # the data, the causal tests' data, the script
    # 10,000 characters without a newline wrap inside the panel instead of widening the page
    width = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1] + 2
    # the list row shows it as text too, and the evidence mark inside hostile text is plain text
    assert driver.find_elements(By.CSS_SELECTOR, '[data-role="perturbed"] mark.ev')
    driver.find_element(By.ID, "search").send_keys("<script>")
    time.sleep(0.4)
    assert _visible(driver) >= 1 and driver.execute_script("return window.__pwned") is None
    driver.save_screenshot(str(tmp_path / "hostile.png"))
    assert _errors(driver) == []


@pytest.mark.integration
def test_causal_panels_render_as_text(driver, page, small_run, tmp_path):
    from selenium.webdriver.common.by import By

    _open(driver, page)
    assert driver.execute_script("return document.body.dataset.causal") is None  # parsed only when first shown
    patch = json.loads((small_run / "patching" / "patching.json").read_text())["cases"][0]
    _open(driver, page, "#" + quote(patch["id"], safe=""))
    assert driver.execute_script("return document.body.dataset.causal") == "parsed"
    box = driver.find_element(By.CSS_SELECTOR, '[data-role="causal"]')
    # early answering: the curve (one point per cut) and the table of cut -> forced answer, same
    ea = next(q for q in json.loads((small_run / "early_answer" / "summary.json").read_text())["questions"]
              if q["question_id"] == patch["question_id"])
    panel = box.find_element(By.CSS_SELECTOR, '[data-role="early-answer"]')
    assert len(panel.find_elements(By.CSS_SELECTOR, "svg.curve circle")) == len(ea["k"])
    cells = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in panel.find_elements(By.CSS_SELECTOR, "tr")[1:]]
    assert [c[0] for c in cells] == [f"{k}/{ea['n_lines']}" for k in ea["k"]]
    assert [c[2] for c in cells] == ea["answers"] and [c[3] for c in cells] == [
        "same" if x == 1 else "different" for x in ea["same"]]
    # resampling: one row per step (the anchor starred), the rollouts folded until opened
    rs = box.find_element(By.CSS_SELECTOR, '[data-role="resample"]')
    steps = [tr.text for tr in rs.find_elements(By.CSS_SELECTOR, "tr")[1:]]
    assert len(steps) == ea["n_lines"] and steps[1].startswith("2 (edited) *")
    folds = rs.find_elements(By.CSS_SELECTOR, "details.rollouts")
    assert folds and not any(d.get_attribute("open") for d in folds)
    folds[1].find_element(By.TAG_NAME, "summary").click()
    assert "Something else entirely 0" in folds[1].text and "answer 999" in folds[1].text
    # the paraphrase, its markup shown as text
    pp = box.find_element(By.CSS_SELECTOR, '[data-role="paraphrase"]')
    assert PARA_MARK.strip() in pp.text and "reference (control)" in pp.text
    assert not pp.find_elements(By.CSS_SELECTOR, "img, i") and driver.execute_script("return window.__pwned") is None
    # patching of this C case: layer x position group
    pt = box.find_element(By.CSS_SELECTOR, '[data-role="patching"]')
    assert [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in pt.find_elements(By.CSS_SELECTOR, "tr")[1:]] == [
        [str(L)] + [f"{x:.2f}" for x in row] for L, row in PATCHED.items()]
    driver.save_screenshot(str(tmp_path / "causal.png"))
    # a question outside the resampled sample says so, and an unpatched case has no patching panel
    sampled = {q["question_id"] for q in json.loads((small_run / "resample" / "summary.json").read_text())["questions"]}
    other = next(c for c in Run(small_run).continuation_dicts("perturbed") if c["question_id"] not in sampled)
    _open(driver, page, "#" + quote(other["id"], safe=""))
    box = driver.find_element(By.CSS_SELECTOR, '[data-role="causal"]')
    assert "Not in resample" in box.text and not box.find_elements(By.CSS_SELECTOR, '[data-role="patching"]')
    assert box.find_elements(By.CSS_SELECTOR, '[data-role="early-answer"] svg.curve')
    assert _errors(driver) == []


def _cells(elem) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in elem.find_elements(By.CSS_SELECTOR, "tr")[1:]]


def _num_or_none(text: str) -> float | None:
    return None if text == "n/a" else float(text.replace("\u25b2", "").strip())


@pytest.mark.integration
def test_new_causal_stages_render_their_summaries(driver, page, small_run, tmp_path):
    """A resampled question's view: per step the four measures the stages computed, the decision point, the filler
    rows, the paraphrase by fraction, and the run's summaries (filler sweep, paraphrase curve, NLDD, agreement)."""
    from selenium.webdriver.common.by import By

    read = lambda name: json.loads((small_run / name / "summary.json").read_text())  # noqa: E731
    rh, sp, rs, ea, fs, ps = (read(n) for n in ("receiver_heads", "suppression", "resample", "early_answer", "filler",
                                                "paraphrase"))
    q = rs["questions"][0]
    key = q["question_key"]
    case = next(c for c in Run(small_run).continuation_dicts("perturbed") if c["question_id"] == q["question_id"])
    _open(driver, page, "#" + quote(case["id"], safe=""))
    box = driver.find_element(By.CSS_SELECTOR, '[data-role="causal"]')
    # per step: propagation, |cf|, receiver score, suppression effect, as the summaries say (3 decimals shown)
    stp = box.find_element(By.CSS_SELECTOR, '[data-role="step-measures"]')
    heads = [th.text for th in stp.find_elements(By.TAG_NAME, "th")]
    assert heads == ["step", "line", "propagation of the edited line", "|cf importance| (resampling)",
                     "receiver-head score", "suppression effect (mean log KL)"]
    rows = _cells(stp)
    rq = next(x for x in rh["questions"] if x["question_key"] == key)
    sq = next(x for x in sp["questions"] if x["question_key"] == key)
    cf = {st["step"]: st["cf_importance"] for st in q["steps"]}
    prop = _propagation_by_step(small_run)
    assert len(rows) == rq["n_lines"] == len(q["steps"])
    for i, r in enumerate(rows):
        want = [prop.get((key, i)), None if cf.get(i) is None else abs(cf[i]), rq["receiver_score"][i], sq["step_effect"][i]]
        got = [_num_or_none(x) for x in r[2:]]
        assert _same(got, want, 5e-4 + 1e-9), (i, r, want)
    assert "\u25b2" in rows[rq["top_step"]][4] and "\u25b2" in rows[sq["top_step"]][5]
    # early answering's decision point and NLDD share of this question
    e = next(x for x in ea["questions"] if x["question_key"] == key)
    dp = box.find_element(By.CSS_SELECTOR, '[data-role="decision-point"]').text
    assert dp.startswith(f"decision point {e['decision_point']}/{e['n_lines']} \u00b7 NLDD share {e['nldd_share']:.3f}")
    # the filler rows of this question and its paraphrase at each fraction
    frows = [json.loads(x) for x in (small_run / "filler" / "records.jsonl").read_text().splitlines()]
    mine = {r["condition"]: r for r in frows if r["question_key"] == key}
    fl = _cells(box.find_element(By.CSS_SELECTOR, '[data-role="filler"]'))
    assert [r[3] for r in fl] == [mine[c]["parsed_answer"] for c in fs["conditions"]]
    assert [r[2] for r in fl] == [str(mine[c]["filler_tokens"]) for c in fs["conditions"]]
    paras = sorted((json.loads(x) for x in (small_run / "paraphrase" / "records.jsonl").read_text().splitlines()
                    if json.loads(x)["question_key"] == key), key=lambda r: r["fraction"])
    assert _cells(box.find_element(By.CSS_SELECTOR, '[data-role="paraphrase-fractions"]')) == [
        [f"{r['fraction']:g}", "same" if r["same_answer"] else "changed"] for r in paras]
    # the run's summaries, folded until opened
    summ = box.find_element(By.CSS_SELECTOR, '[data-role="causal-summary"]')
    assert not summ.get_attribute("open")
    summ.find_element(By.TAG_NAME, "summary").click()
    d = ea["decision_point"]["overall"]
    eatext = summ.find_element(By.CSS_SELECTOR, '[data-role="sum-early-answer"]').text
    assert f"mean NLDD share {d['mean_nldd_share']:.3f}" in eatext and f"AOC {ea['aoc']['aoc']:.3f}" in eatext
    fsec = summ.find_element(By.CSS_SELECTOR, '[data-role="sum-filler"]')
    assert len(fsec.find_elements(By.CSS_SELECTOR, "svg.curve circle")) == len(fs["sweep"]["dots"])
    assert [[r[0], r[2].split(" ")[0]] for r in _cells(fsec)] == [
        [f"{p['fraction']:g}", f"{p['accuracy']['k']}/{p['accuracy']['n']}"] for p in fs["sweep"]["dots"]]
    psec = summ.find_element(By.CSS_SELECTOR, '[data-role="sum-paraphrase"]')
    assert [[r[0], r[1].split(" ")[0], r[2].split(" ")[0], r[3].split(" [")[0]] for r in _cells(psec)] == [
        [f"{p['fraction']:g}", f"{p['retention']['k']}/{p['retention']['n']}",
         f"{p['paraphrased_accuracy']['k']}/{p['paraphrased_accuracy']['n']}", f"{100 * p['gap']['estimate']:+.1f} pp"]
        for p in ps["curve"]]
    assert f"mean gap {100 * ps['mean_gap']['estimate']:+.1f} pp" in psec.text  # pp, as the report writes it
    assert len(psec.find_elements(By.CSS_SELECTOR, "svg.curve circle")) == 2 * len(ps["curve"])
    h = rh["top_heads"][0]
    assert f"L{h['layer']}H{h['head']} ({h['mean_kurtosis']:.2f})" in summ.find_element(
        By.CSS_SELECTOR, '[data-role="sum-receiver"]').text
    assert f"{sp['n_sampled_questions']} chains" in summ.find_element(By.CSS_SELECTOR, '[data-role="sum-suppression"]').text
    from behavioural.causal.agreement import step_agreement
    from study.report.causal import N_BOOT, SEED

    ag = step_agreement(small_run, n_boot=N_BOOT, seed=SEED)
    assert [[r[0], r[1].split(" ")[0], r[2], r[3].split(" ")[0]]
            for r in _cells(summ.find_element(By.CSS_SELECTOR, '[data-role="sum-agreement"]'))] == [
        [f"{p['a']} vs {p['b']}", "n/a" if p["mean_spearman"] is None else f"{p['mean_spearman']:+.2f}",
         str(p["n_questions_rho"]), f"{p['same_top_step']['k']}/{p['same_top_step']['n']}"] for p in ag["pairs"]]
    driver.execute_script("arguments[0].scrollIntoView()", summ)
    driver.save_screenshot(str(tmp_path / "causal_new.png"))
    assert _errors(driver) == []


@pytest.mark.integration
def test_report_html_links_open_the_browser_filtered(driver, small_run, tmp_path):
    from selenium.webdriver.common.by import By

    out = tmp_path / "study"
    shutil.copytree(small_run, out)
    write_browser(out)
    from loadbearing.report.blocks import Row, Section, Table, facet_filter

    rows = (Row(("overall", "x"), facet_filter()), Row(("strategy=contradiction", "y"), facet_filter(strategy="contradiction")),
            Row(("strategy=arithmetic_change, C", "z"), facet_filter(strategy="arithmetic_change", label="C")))
    rep = _study_html()(out, [Section("Behaviour", (Table(("group", "propagation"), rows),))])
    driver.get(rep.resolve().as_uri())
    links = driver.find_elements(By.CSS_SELECTOR, "a.browse")
    assert len(links) == 3
    links[2].click()
    for _ in range(100):
        if driver.execute_script("return document.body.dataset.ready === '1'"):
            break
        time.sleep(0.05)
    labels = _labels(out)
    pert = Run(out).continuation_dicts("perturbed")
    assert _visible(driver) == sum(1 for c in pert if "arithmetic_change" in _strategies(c) and labels[c["id"]]["label"] == "C")
    assert _errors(driver) == []


# ------------------------------------------------------------------------------------------------ scale


def make_synthetic_run(root: Path, n_continuations: int = 20_000, seed: int = 0) -> Path:
    """A synthetic run with the real record schema (Baseline / Continuation / label records) and varied text:
    3 strategies x 3 positions x (perturbed + control) per question, a rule labelling with evidence spans."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    strategies, positions = ("arithmetic_change", "contradiction", "operation_swap"), ("early", "middle", "late")
    per_q = len(strategies) * len(positions) * 2
    n_q = -(-n_continuations // per_q)
    words = "the of and a to in is you that it he was for on are as with his they at be this have from".split()
    blines, clines, llines = [], [], []
    made = 0
    for q in range(n_q):
        qid = f"synth/{q}"
        n = rng.randint(3, 8)
        lines = [f"We start with {q % 50}."] + [f"{q % 50 + k} + {k} = {q % 50 + 2 * k} " + " ".join(rng.choices(words, k=6))
                                               for k in range(1, n)]
        gold = str(q % 50 + 2 * (n - 1))
        question = f"Start with {q % 50}. " + " ".join(f"Add {k}." for k in range(1, n)) + " What is the result?"
        blines.append(Baseline(question_id=qid, dataset="arith", task=f"s{n}_o5", difficulty=f"s{n}_o5", question=question,
                               prompt="<prompt>", prompt_tokens=40, trace="\n".join(lines + [f"Answer: {gold}"]),
                               lines=tuple(lines), answer_line=len(lines), parsed_answer=gold, gold=gold, correct=True,
                               eligible=True, reason="eligible", finish_reason="answer_line", new_tokens=60).to_dict())
        for s in strategies:
            for p in positions:
                li = {"early": 0, "middle": n // 2, "late": n - 1}[p]
                for cond in ("perturbed", "control"):
                    if made >= n_continuations:
                        break
                    made += 1
                    edited = lines[li] if cond == "control" else f"{lines[li]} (edited by {s} {rng.randint(0, 99)})"
                    body = "\n".join(" ".join(rng.choices(words, k=rng.randint(5, 14))) for _ in range(rng.randint(2, 6)))
                    ok = cond == "control" or rng.random() < 0.6
                    ans = gold if ok else str(int(gold) + 3)
                    text = ("Wait, let me recheck.\n" if ok and rng.random() < 0.3 else "") + body + f"\nAnswer: {ans}"
                    cid = f"{qid}|{s}|{p}|{cond}"
                    prefix = "\n".join(lines[:li] + [edited]) + "\n"
                    clines.append(Continuation(
                        id=cid, question_id=qid, dataset="arith", task=f"s{n}_o5", difficulty=f"s{n}_o5", strategy=s,
                        position=p, line_index=li, n_lines=n, original_line=lines[li], edited_line=edited, condition=cond,
                        prefix_text=prefix, input_text="<prompt>" + prefix, input_tokens=80, edit_span=(8, 8 + len(edited)),
                        continuation=text, new_tokens=40, finish_reason="answer_line", parsed_answer=ans, gold=gold,
                        correct=ok, label="non-C" if ok else "C").to_dict())
                    ev = [{"type": "correction_phrase", "start": 0, "end": 4, "text": "Wait",
                           "detail": "explicit correction phrase"}] if text.startswith("Wait") else []
                    lab = "C" if not ok else ("B" if ev else "A")
                    llines.append({"id": cid, "question_id": qid, "condition": cond, "dataset": "arith", "task": f"s{n}_o5",
                                   "difficulty": f"s{n}_o5", "strategy": s, "position": p, "correct": ok,
                                   "outcome": "non-C" if ok else "C", "label": lab, "reason": "synthetic",
                                   "final_labeller": "rule", "labellers": {"rule": {"noticed": bool(ev), "evidence": ev,
                                                                                     "label": lab}}, "schema_version": 1})
    for name, rows in (("baselines.jsonl", blines), ("continuations.jsonl", clines)):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    ld = root / "labels" / "rule"
    ld.mkdir(parents=True)
    (ld / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in llines))
    (ld / "settings.json").write_text(json.dumps({"status": "ok", "created": "2026-01-01T00:00:00"}))
    (root / "manifest.json").write_text(json.dumps({"status": "ok", "model": {"name": "synthetic", "weights_hash": None}}))
    return root


def test_synthetic_run_has_the_record_schema(tmp_path):
    rd = make_synthetic_run(tmp_path / "s", 200)
    run = Run(rd)
    assert len(run.continuations()) == 200 and run.labels()[0] == "rule"
    assert all(dataclasses.is_dataclass(c) for c in run.continuations())


@pytest.mark.integration
def test_scale_20k_size_and_first_paint(driver, tmp_path):
    from selenium.webdriver.common.by import By

    rd = make_synthetic_run(tmp_path / "big", 20_000)
    t0 = time.perf_counter()
    out = write_browser(rd)
    build_s = time.perf_counter() - t0
    size_mb = out.stat().st_size / 1e6
    _open(driver, out)
    ready_ms = int(driver.execute_script("return document.body.dataset.readyMs"))
    for _ in range(50):
        paint_ms = driver.execute_script("return document.body.dataset.paintMs")
        if paint_ms:
            break
        time.sleep(0.02)
    fcp = driver.execute_script("const e = performance.getEntriesByName('first-contentful-paint')[0]; "
                                "return e ? e.startTime : null")
    n_rows = len(driver.find_elements(By.CSS_SELECTOR, "#spacer .row"))
    t = time.perf_counter()
    _click_facet(driver, "label", "B")
    filter_ms = 1000 * (time.perf_counter() - t)
    t = time.perf_counter()
    body = driver.find_element(By.TAG_NAME, "body")
    for _ in range(20):
        body.send_keys("j")
    step_ms = 1000 * (time.perf_counter() - t) / 20
    driver.find_element(By.ID, "clear").click()
    t = time.perf_counter()
    driver.execute_script("const s = document.getElementById('search'); s.value = 'recheck'; s.dispatchEvent(new Event('input'))")
    want = int(driver.execute_script("return document.getElementById('count').dataset.visible"))
    while int(driver.execute_script("return document.getElementById('count').dataset.visible")) == want and \
            time.perf_counter() - t < 5:
        time.sleep(0.01)
    search_ms = 1000 * (time.perf_counter() - t) - 120  # minus the typing debounce
    text_mb = sum(len(c.continuation) for c in Run(rd).continuations()) / 1e6
    res = {"continuations": 20_000, "file_mb": round(size_mb, 2), "continuation_text_mb": round(text_mb, 2),
           "write_s": round(build_s, 2), "ready_ms": ready_ms, "painted_ms": int(paint_ms),
           "search_ms": round(search_ms),
           "first_contentful_paint_ms": None if fcp is None else round(fcp), "rows_in_dom": n_rows,
           "filter_click_ms": round(filter_ms), "keystep_ms": round(step_ms)}
    print("\nBROWSE_SCALE " + json.dumps(res), file=sys.stderr)
    assert n_rows < 200  # virtualised: only the visible rows exist
    assert size_mb < 20 and ready_ms < 10_000 and _errors(driver) == []
