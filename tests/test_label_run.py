"""The labelling stage on a run (behavioural.labels.stage): labels and summaries of a fake run, the never-overwrite
CLI, the judge end to end with real models, and reliability (refusals, resume to identical records)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.label_runs import B_PHRASE, fake_run

from behavioural.labels.labellers import JUDGE_VARIANTS, JudgeLabeller, RuleLabeller
from behavioural.labels.stage import FINAL_RULE, LabelRecord, label_run, load_labels, main
from loadbearing.files import file_sha256, read_jsonl

# ----------------------------------------------------------------------------------------------------
# labelling a run


def test_label_run_rule(tmp_path):
    rd, conts = fake_run(tmp_path)
    before = file_sha256(rd / "continuations.jsonl")
    out = label_run(rd, [RuleLabeller()], progress=False)
    assert out == rd / "labels" / "rule"
    assert file_sha256(rd / "continuations.jsonl") == before  # generation records untouched
    recs = {r["id"]: LabelRecord.from_dict(r) for r in read_jsonl(out / "labels.jsonl")}
    assert set(recs) == {c["id"] for c in conts}
    got = [recs[c["id"]].label for c in conts]
    assert got == ["A", "B", "B", "B", "C", "C", None, "A", "A"]
    assert recs[conts[6]["id"]].reason == "unparseable answer"
    ev1 = recs[conts[1]["id"]].labellers["rule"]["evidence"]
    assert ev1[0]["type"] == "correction_phrase" and B_PHRASE[ev1[0]["start"]:ev1[0]["end"]] == ev1[0]["text"]
    settings = json.loads((out / "settings.json").read_text())
    assert settings["status"] == "ok" and settings["final_labeller"] == "rule" and settings["final_rule"] == FINAL_RULE
    s = json.loads((out / "summary.json").read_text())
    p = s["perturbed"]
    assert p["n"] == 7 and p["counts"] == {"A": 1, "B": 3, "C": 2, "null": 1}
    assert p["rates"]["C"]["k"] == 2 and p["rates"]["C"]["n"] == 6 and p["rates"]["C"]["wilson"][0] is not None
    assert p["propagation"]["n"] == 6
    assert p["B_among_correct_labelled"]["k"] == 3 and p["B_among_correct_labelled"]["n"] == 4
    assert p["by"]["position"]["early"]["counts"] == {"A": 1, "B": 1, "C": 0, "null": 0}
    assert p["by"]["position"]["late"]["counts"] == {"A": 0, "B": 1, "C": 1, "null": 0}
    assert set(p["by"]) == {"position", "strategy", "task", "difficulty"}
    assert s["control"]["counts"] == {"A": 2, "B": 0, "C": 0, "null": 0}
    assert s["control"]["rates"]["C"]["rate"] == 0.0
    assert s["labellers"]["rule"]["perturbed"]["counts"] == p["counts"]


def test_cli_never_overwrites(tmp_path, capsys):
    rd, _ = fake_run(tmp_path)
    assert main([str(rd), "--quiet"]) == 0
    first = (rd / "labels" / "rule" / "labels.jsonl").read_bytes()
    assert main([str(rd), "--labeller", "rule", "--quiet"]) == 0
    assert (rd / "labels" / "rule-2" / "labels.jsonl").is_file()
    assert (rd / "labels" / "rule" / "labels.jsonl").read_bytes() == first
    assert main([str(rd), "--labelling", "rule", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "never overwritten" in err and err.count("\n") == 1
    assert sorted(p.name for p in (rd / "labels").iterdir()) == ["rule", "rule-2"]
    name, labels = load_labels(rd)
    assert name in ("rule", "rule-2") and len(labels) == 9 and set(labels.values()) == {"A", "B", "C", None}
    assert load_labels(rd, "rule")[1] == labels
    assert main([str(rd), "--final", "judge", "--quiet"]) == 2
    assert main([str(rd), "--labeller", "bogus"]) == 2
    assert main([str(tmp_path / "nope")]) == 2



# ----------------------------------------------------------------------------------------------------
# the judge end to end with real models


def test_judge_end_to_end_tiny_model_via_cli(tmp_path, tiny_lm, capsys):
    """A random tiny Llama saved as a local model directory: the CLI loads it with load_model, asks every
    variant, records every reply, and its garbage verdicts give null A/B (never A)."""
    rd, conts = fake_run(tmp_path)
    mdir = tmp_path / "tiny-judge"
    tiny_lm.model.save_pretrained(mdir)
    tiny_lm.tokenizer.save_pretrained(mdir)
    assert main([str(rd), "--labeller", "rule", "--labeller", f"judge:{mdir}", "--final", "judge",
                 "--judge-max-new-tokens", "3", "--judge-batch-size", "16", "--quiet", "--device", "cpu"]) == 0
    out = rd / "labels" / "rule+judge-tiny-judge_final-judge-tiny-judge"
    recs = read_jsonl(out / "labels.jsonl")
    jn = f"judge:{mdir}"
    assert [r["id"] for r in recs] == [c["id"] for c in conts]
    for r, c in zip(recs, conts):
        j = r["labellers"][jn]
        if c["correct"] is True:
            assert set(j["variants"]) == {v.name for v in JUDGE_VARIANTS}
            assert all(isinstance(v["reply"], str) and v["noticed"] in (True, False, None) for v in j["variants"].values())
            if j["noticed"] is None:
                assert r["label"] is None
        else:
            assert j["noticed"] is None and r["label"] == ("C" if c["correct"] is False else None)
        assert r["labellers"]["rule"]["label"] in ("A", "B", "C", None)
    s = json.loads((out / "summary.json").read_text())
    agr = s["judge_variant_agreement"][jn]["perturbed"]
    assert agr["n_items"] == 4 and len(agr["pairwise_kappa"]) == 10
    assert s["labeller_agreement"][0]["a"] == "rule"
    settings = json.loads((out / "settings.json").read_text())
    assert settings["final_labeller"] == jn
    assert len(settings["labellers"][1]["variants"]) == len(JUDGE_VARIANTS)


@pytest.mark.integration
def test_judge_smol_plumbing(tmp_path, smol):
    """The embedded model as a judge on three continuations (one correct, judged; one wrong; one unparseable):
    plumbing, not accuracy."""
    rd, conts = fake_run(tmp_path)
    keep = [conts[1], conts[4], conts[6]]
    with open(rd / "continuations.jsonl", "w") as f:
        for c in keep:
            f.write(json.dumps(c) + "\n")
    judge = JudgeLabeller(smol, "smollm2-135m-instruct", max_new_tokens=4, batch_size=8)
    out = label_run(rd, [judge, RuleLabeller()], progress=False)
    assert out.name == "judge-smollm2-135m-instruct+rule"
    recs = read_jsonl(out / "labels.jsonl")
    assert [r["id"] for r in recs] == [c["id"] for c in keep]
    j = recs[0]["labellers"]["judge:smollm2-135m-instruct"]
    assert set(j["variants"]) == {v.name for v in JUDGE_VARIANTS}
    assert all(isinstance(v["reply"], str) and v["noticed"] in (True, False, None) for v in j["variants"].values())
    assert sum(j["votes"].values()) == len(JUDGE_VARIANTS)
    assert recs[0]["label"] in ("A", "B", None) and recs[0]["labellers"]["rule"]["label"] == "B"
    assert recs[1]["label"] == "C" and recs[2]["label"] is None
    s = json.loads((out / "summary.json").read_text())
    assert s["judge_variant_agreement"]["judge:smollm2-135m-instruct"]["perturbed"]["n_items"] == 1


# ----------------------------------------------------------------------------------------------------
# reliability: refusals and resume


class _Dies(RuleLabeller):
    """The rule labeller, killed (KeyboardInterrupt) on its ``after``-th call."""

    def __init__(self, after: int):
        self.after, self.calls = after, 0

    def label(self, conts, questions=None, *, progress=True):
        self.calls += 1
        if self.calls >= self.after:
            raise KeyboardInterrupt
        return super().label(conts, questions, progress=progress)


def _strip_times(p: Path) -> list[dict]:
    return read_jsonl(p / "labels.jsonl")


def test_interrupted_labelling_resumes_to_identical_records(tmp_path):
    rd, conts = fake_run(tmp_path)
    ref = label_run(rd, [RuleLabeller()], name="ref", progress=False)
    with pytest.raises(KeyboardInterrupt):
        label_run(rd, [_Dies(3)], name="cut", progress=False, chunk=2)
    cut = rd / "labels" / "cut"
    assert json.loads((cut / "settings.json").read_text())["status"] == "interrupted"
    assert len(read_jsonl(cut / "labels.jsonl")) == 4
    with open(cut / "labels.jsonl", "a") as f:  # and a half-written record, as a SIGKILL leaves it
        f.write('{"id": "arith/s2_o5/2|arith')
    # a fresh labelling with that name is refused, naming --resume
    with pytest.raises(Exception, match="--resume"):
        label_run(rd, [RuleLabeller()], name="cut", progress=False)
    out = label_run(rd, [RuleLabeller()], name="cut", progress=False, resume=True, chunk=2)
    assert out == cut and _strip_times(cut) == _strip_times(ref)
    s = json.loads((cut / "settings.json").read_text())
    assert s["status"] == "ok" and s["resumed"] == 1 and "error" not in s
    summ = [json.loads((d / "summary.json").read_text())["perturbed"] for d in (cut, ref)]
    assert summ[0] == summ[1]
    # resuming a finished labelling is a no-op
    assert label_run(rd, [RuleLabeller()], name="cut", progress=False, resume=True) == cut


def test_cli_resume_alone_uses_stored_labellers(tmp_path, capsys):
    rd, _ = fake_run(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        label_run(rd, [_Dies(1)], name="x", progress=False, specs=["rule"])
    assert main([str(rd), "--resume", "--quiet"]) == 0
    assert json.loads((rd / "labels" / "x" / "settings.json").read_text())["status"] == "ok"
    assert main([str(rd), "--resume", "--quiet"]) == 2  # nothing left to resume
    assert "no unfinished labelling" in capsys.readouterr().err


def test_unfinished_or_damaged_run_is_refused(tmp_path, capsys):
    rd, _ = fake_run(tmp_path)
    m = json.loads((rd / "manifest.json").read_text())
    (rd / "manifest.json").write_text(json.dumps(dict(m, status="running")))
    assert main([str(rd), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "behavioural.run --resume" in err and err.count("\n") == 1
    assert not (rd / "labels").exists()
    assert main([str(rd), "--quiet", "--allow-incomplete"]) == 0
    (rd / "manifest.json").write_text(json.dumps(m))
    with open(rd / "continuations.jsonl", "a") as f:
        f.write('{"id": "half')
    assert main([str(rd), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "half-written" in err and "behavioural.run --resume" in err and err.count("\n") == 1


def test_format_summary_styles(tmp_path):
    from behavioural.labels.stage import format_summary

    rd, _ = fake_run(tmp_path)
    s = json.loads((label_run(rd, progress=False) / "summary.json").read_text())
    assert "perturbed: n=7" in format_summary(s)
    md = format_summary(s, style="md")
    assert "| perturbed | 7 | 1 | 3 | 2 | 1 |" in md
