"""The steering audit in the trace browser: a real steered generation (tiny model, real hooks, the sweep's own
record) shows its steered text highlighted and a line with its positions, hook firings and KV cache."""
from __future__ import annotations

import json
import shutil
import time

import numpy as np
import pytest

from activations.synthetic import make_run
from loadbearing.runs import Run
from steering.generate import generate_steered
from steering.sweep.cases import case_dict
from steering.sweep.grid import Setting
from steering.sweep.runner import generation_record
from study.browse.data import collect
from study.browse.page import write_browser


@pytest.fixture(scope="module")
def audited_run(tmp_path_factory, tiny_lm):
    root, _ = make_run(tmp_path_factory.mktemp("audit") / "run", tiny_lm.tokenizer, n_questions=3)
    (root / "baselines.jsonl").write_text("")  # continuations only: the browser shows them without their baselines
    run = Run(root)
    cases = [case_dict(c, {}) for c in run.continuations("perturbed")]
    vec = np.random.default_rng(0).standard_normal(tiny_lm.model.config.hidden_size).astype(np.float32) * 8
    outs = generate_steered(tiny_lm, [c["input_text"] for c in cases], np.stack([vec] * len(cases)), 1.0, layers=[1],
                            max_new_tokens=8, stop_at_answer=False, progress=False)
    s = Setting(key="L1|k1|a1|probe", basis="probe", layer=1, k=1, alpha_rel=1.0, alpha=1.0)
    (root / "steering").mkdir()
    recs = [generation_record(s, c, g, {}) for c, g in zip(cases, outs)]
    with open(root / "steering" / "generations.jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return root, recs


def test_collect_carries_the_audit(audited_run, tmp_path):
    root, recs = audited_run
    st = collect([root])["steer"]
    assert len(st["audit"]) == len(recs)
    for a, r in zip(st["audit"], recs):
        au = r["steer_audit"]
        assert a == [au.get("text_spans"), au["positions"], au["n_positions"], au["prompt_tokens"],
                     au["hook_fires_per_token"], au["kv_cache"]]
        assert au["positions"][0][0] == au["prompt_tokens"] - 1 and au["kv_cache"] is True
    # a sweep written before the audit: no audit column (the page data is what it was)
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "steer_audit"}) + "\n" for r in recs))
    assert "audit" not in collect([root], steering=old)["steer"]


@pytest.mark.integration
def test_audit_shows_in_chromium(audited_run, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    root, recs = audited_run
    page = write_browser(root, tmp_path / "b.html")
    binary, drv = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and drv):
        pytest.fail("chromium and chromedriver are needed: apt-get install -y chromium chromium-driver")
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000", "--disable-gpu"):
        opts.add_argument(a)
    opts.binary_location = binary
    d = webdriver.Chrome(service=Service(drv), options=opts)
    try:
        r = next(x for x in recs if x["steer_audit"].get("text_spans"))
        from urllib.parse import quote

        d.get(page.resolve().as_uri() + "#id=" + quote(r["case_id"], safe=""))
        for _ in range(100):
            if d.execute_script("return document.body && document.body.dataset.ready === '1'"):
                break
            time.sleep(0.05)
        box = d.find_element(By.CSS_SELECTOR, '[data-role="steering"]')
        d.execute_script("for (const e of arguments[0].querySelectorAll('details')) e.open = true;", box)
        text = box.find_element(By.CSS_SELECTOR, '[data-role="steered-text"]')
        assert d.execute_script("return arguments[0].textContent", text) == r["text"]
        marks = [d.execute_script("return arguments[0].textContent", m)
                 for m in text.find_elements(By.CSS_SELECTOR, "mark.steered")]
        assert marks == [r["text"][a:b] for a, b in r["steer_audit"]["text_spans"]]
        line = box.find_element(By.CSS_SELECTOR, '[data-role="steer-audit"]').text
        au = r["steer_audit"]
        assert f"({au['n_positions']}: 1 of the {au['prompt_tokens']} input tokens" in line and "KV cache on" in line
        d.save_screenshot(str(tmp_path / "audit.png"))
    finally:
        d.quit()
