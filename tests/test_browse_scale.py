"""The trace browser on a 20,000-continuation synthetic run with the real record schema: file size, time to first
paint, a filter click, a key step and a search in a real headless Chromium (``-m integration``)::

    flock /tmp/cpu.lock .venv/bin/pytest -q -s -m integration tests/test_browse_scale.py -k scale
"""
from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from pathlib import Path

import pytest
from helpers.browser import browser_errors as _errors
from helpers.browser import click_facet as _click_facet
from helpers.browser import open_page as _open
from helpers.browser import start_driver

from loadbearing.records import Baseline, Continuation
from loadbearing.runs import Run
from study.browse.page import write_browser


@pytest.fixture(scope="module")
def driver():
    d = start_driver()
    yield d
    d.quit()


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
