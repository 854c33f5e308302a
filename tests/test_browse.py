"""The trace browser (study.browse): the data the page embeds, the JSON escaping, the fragment syntax, the CLI's
errors, on a real small run (tests/helpers/browse_runs.py: written by the protocol with a scripted model, labelled
by the rule labeller and a scripted judge, with a steering file and the causal tests' outputs).

The same page in a real headless Chromium: tests/test_browse_chromium.py; report.html's links into it:
tests/test_browse_report_html.py; a 20,000-continuation synthetic run: tests/test_browse_scale.py.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.browse_runs import HOSTILE, PARA_MARK, PATCHED, make_small_run
from helpers.browse_runs import labels_of as _labels
from helpers.browse_runs import propagation_by_step as _propagation_by_step
from helpers.browse_runs import same_numbers as _same

from loadbearing.runs import Run
from study.browse.page import collect, embed_json, fragment, main, render

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, tokenizer) -> Path:
    return make_small_run(tmp_path_factory.mktemp("browse") / "run", tokenizer)


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

