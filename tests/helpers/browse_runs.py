"""The trace browser's tests' runs (tests/test_browse*.py): a real small run written by the protocol with the
scripted model, labelled, with a steering file and the causal tests' outputs; what the tests read back from its
records; and study.report.html's writer."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from loadbearing.engine.generation import Generation
from loadbearing.runs import Run

REPO = Path(__file__).resolve().parents[2]
HOSTILE = ("Wait. <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"><b>bold</b> **unbalanced "
           "_markdown `tick [x](javascript:window.__pwned=3) </div></pre></script><!-- ")
LONG = "Z" * 10_000


def study_html_module():
    """study.report.html, also while ``study`` is still the single study.py module (before the study package exists)."""
    try:
        import study.report.html
        return study.report.html
    except ImportError:
        spec = importlib.util.spec_from_file_location("_study_html", REPO / "study" / "html.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


def study_html():
    return study_html_module().write_report_html


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

    from behavioural.causal.attention import AttentionConfig, run_receiver_heads, run_suppression
    from behavioural.causal.filler import FillerConfig, run_filler
    from helpers.attention import scripted_lm

    run_filler(FillerConfig(root, fillers=("dots",), n_boot=50, quiet=True), fake_lm(tokenizer),
               generate_fn=forced, echo=None)
    lm = scripted_lm(root, tokenizer)
    run_receiver_heads(AttentionConfig(root, max_questions=None, quiet=True), lm, echo=None)
    run_suppression(AttentionConfig(root, max_questions=None, quiet=True), lm, echo=None)


def strategies_of(c: dict) -> set[str]:
    return {m[0] for m in c.get("memberships") or []} or {c["strategy"]}


def labels_of(run_dir: Path) -> dict[str, dict]:
    d = Run(run_dir).labelling_dir()
    return {json.loads(line)["id"]: json.loads(line) for line in (d / "labels.jsonl").read_text().splitlines()}


def propagation_by_step(run_dir: Path) -> dict[tuple[str, int], float]:
    """(question key, edited line) -> C / labelled perturbed continuations, counted here from the records."""
    cells: dict[tuple[str, int], list[int]] = {}
    for c in Run(run_dir).continuations("perturbed"):
        if c.label is not None:
            cell = cells.setdefault((c.question_key or c.question_id, c.line_index), [0, 0])
            cell[0] += c.label == "C"
            cell[1] += 1
    return {k: nc / n for k, (nc, n) in cells.items()}


def same_numbers(got: list, want: list, tol: float = 1e-4) -> bool:
    """Equal lists of numbers (within ``tol``) and Nones."""
    return len(got) == len(want) and all((a is None and b is None) or (a is not None and b is not None and abs(a - b) <= tol)
                                         for a, b in zip(got, want))
