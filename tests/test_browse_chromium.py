"""The trace browser (study.browse) in a real headless Chromium (``-m integration``; Debian's ``chromium`` and
``chromium-driver``, driven by Selenium) on a real small run (tests/helpers/browse_runs.py): filters and counts,
permalinks and keys, hostile text rendered as text, the causal tests' panels, and report.html's links opening the
browser filtered.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers.browse_runs import HOSTILE, PARA_MARK, PATCHED, make_small_run
from helpers.browse_runs import labels_of as _labels
from helpers.browse_runs import propagation_by_step as _propagation_by_step
from helpers.browse_runs import same_numbers as _same
from helpers.browse_runs import strategies_of as _strategies
from helpers.browse_runs import study_html as _study_html
from helpers.browser import browser_errors as _errors
from helpers.browser import click_facet as _click_facet
from helpers.browser import open_page as _open
from helpers.browser import start_driver
from helpers.browser import visible as _visible

from loadbearing.runs import Run
from study.browse.page import fragment, write_browser


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, tokenizer) -> Path:
    return make_small_run(tmp_path_factory.mktemp("browse") / "run", tokenizer)


@pytest.fixture(scope="module")
def driver():
    d = start_driver()
    yield d
    d.quit()


@pytest.fixture(scope="module")
def page(small_run) -> Path:
    return write_browser(small_run)


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
