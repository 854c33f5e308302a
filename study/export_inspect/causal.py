"""The causal tests' samples as inspect_ai eval logs, one log per stage (issue #36; :mod:`study.export_inspect`).

    from study.export_inspect.causal import build_stage_logs
    for stage, log in build_stage_logs(Run("runs/demo")):     # early_answer, filler, paraphrase, resample
        write_eval_log(log, f"runs/demo/inspect/{stage}.eval")

``python -m study.export_inspect RUN_DIR`` writes them beside ``continuations.eval`` (``inspect view --log-dir
RUN_DIR/inspect`` lists every log). A stage is exported when its own manifest says it finished. One sample per
record of ``STAGE/records.jsonl`` (one generation):

* ``input``: the question, then the assistant text the test gave the model (the cut, filler-replaced or
  paraphrased chain, or the resampled prefix) where there is one; ``output``: the generation (paraphrase: the
  continuation); ``target``: the gold answer;
* ``scores``: ``correct`` = 1.0 / 0.0 (left out where the answer did not parse), and the ``cell`` grouping score
  (:mod:`study.export_inspect.groups`): ``strategy`` the test and its variant (``early answering``,
  ``filler:dots``, ``paraphrase``, ``resample:rollout``), ``position`` the cut (``k=1/3``; a fraction for filler
  and paraphrase), ``level``, and ``moved``: the answer differs from the unedited chain's (early answering: the
  full chain's forced answer; paraphrase: its reference answer; otherwise the baseline's);
* ``metadata``: the record's own fields (question, cut, variant...), the long texts left to input and output.

The results hold the question-clustered rate of ``correct`` and of ``moved``, pooled and per group.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from loadbearing.files import file_sha256, read_json, read_jsonl
from loadbearing.provenance import now
from loadbearing.runs import MANIFEST, RECORDS, SUMMARY, Run, question_key_of
from study.export_inspect.groups import CELL, cell_score, grouped_score, moved, viewer_config

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

STAGES = ("early_answer", "filler", "paraphrase", "resample")
#: long texts that go to the sample's input/output, not its metadata
_TEXTS = ("assistant_text", "generation", "continuation", "paraphrase_raw", "answer_text")


def _finished(run: Run, stage: str) -> bool:
    d = run.path / stage
    try:
        m = read_json(d / MANIFEST)
    except Exception:  # noqa: BLE001 - absent or unreadable: not exported
        return False
    return m.get("status") == "ok" and (d / RECORDS).is_file() and (d / SUMMARY).is_file()


def _fraction(x: Any) -> str | None:
    return None if x is None else f"{float(x):g}"


def cell_of(stage: str, r: dict[str, Any], reference: str | None) -> dict[str, Any]:
    """The grouping fields of one record of ``stage``."""
    position: str | None
    if stage == "early_answer":
        strategy, position = "early answering", f"k={r.get('k')}/{r.get('n_steps') or r.get('n_lines')}"
    elif stage == "filler":
        strategy, position = f"filler:{r.get('condition')}", _fraction(r.get("fraction"))
    elif stage == "paraphrase":
        strategy, position = "paraphrase", _fraction(r.get("fraction"))
    else:
        strategy, position = f"resample:{r.get('kind')}", f"k={r.get('k')}"
    return {"strategy": strategy, "position": position, "level": r.get("difficulty") or r.get("task"),
            "label": None, "moved": moved(r.get("parsed_answer"), reference)}


def _references(stage: str, rows: list[dict[str, Any]], run: Run) -> list[str | None]:
    """The unedited chain's answer for each row (module docstring)."""
    bases = run.questions()
    if stage == "early_answer":
        full = {r["question_id"]: r.get("parsed_answer") for r in rows
                if r.get("k") is not None and r.get("k") == (r.get("n_steps") or r.get("n_lines"))}
        return [full.get(r["question_id"]) for r in rows]
    if stage == "paraphrase":
        return [r.get("reference_answer") for r in rows]
    return [getattr(bases.get(r["question_id"]), "parsed_answer", None) for r in rows]


def to_sample(stage: str, i: int, r: dict[str, Any], reference: str | None, b: Any, model: str) -> EvalSample:
    """One record as a sample; ``b`` its question's baseline (or None)."""
    from inspect_ai.log import EvalSample  # deferred: inspect_ai is heavy
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput  # deferred: inspect_ai is heavy
    from inspect_ai.scorer import Score  # deferred: inspect_ai is heavy

    question = b.question if b is not None else r["question_id"]
    lead = r.get("assistant_text") or ""
    inp: list[Any] = [ChatMessageUser(content=question)] + ([ChatMessageAssistant(content=lead)] if lead else [])
    text = r.get("generation") if stage != "paraphrase" else r.get("continuation")
    text = text or ""
    cell = cell_of(stage, r, reference)
    scores: dict[str, Any] = {CELL: cell_score(**cell)}
    if r.get("correct") is not None:
        scores["correct"] = Score(value=1.0 if r["correct"] else 0.0, answer=r.get("parsed_answer"),
                                  explanation=f"gold {getattr(b, 'gold', None)}")
    md = {k: v for k, v in r.items() if k not in _TEXTS} | {"stage": stage, "question_key": question_key_of(r),
                                                            "reference_answer": reference}
    return EvalSample(id=str(r.get("id") or f"{r['question_id']}|{i}"), epoch=1, input=inp,
                      target=getattr(b, "gold", "") or "", messages=[*inp, ChatMessageAssistant(content=text)],
                      output=ModelOutput.from_content(model, text), scores=scores, metadata=md,
                      description=f"{cell['strategy']} ({cell['position']}): {question[:80]}")


def build_stage_log(run: Run, stage: str) -> EvalLog:
    """One finished stage as an ``EvalLog`` (nothing written)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalResults, EvalSpec, EvalStats  # deferred: inspect_ai is heavy

    f = run.path / stage / RECORDS
    rows = read_jsonl(f)
    refs = _references(stage, rows, run)
    model = f"loadbearing/{run.model_spec.get('name') or 'unknown'}"
    bases = run.questions()
    samples = [to_sample(stage, i, r, ref, bases.get(r["question_id"]), model) for i, (r, ref) in enumerate(zip(rows, refs))]
    digest = file_sha256(f)
    created = run.manifest.get("created") or now()
    groups = [(r.get("correct"), question_key_of(r), {k: v for k, v in cell_of(stage, r, ref).items()
                                                       if k in ("strategy", "position", "level")})
              for r, ref in zip(rows, refs)]
    moves = [(cell_of(stage, r, ref)["moved"], g[1], g[2]) for (r, ref), g in zip(zip(rows, refs), groups)]
    results = EvalResults(total_samples=len(samples), completed_samples=len(samples),
                          scores=[grouped_score("correct", groups, name="correct_by_group"),
                                  grouped_score("moved", moves, name="moved_by_group")])
    spec = EvalSpec(eval_id=digest[:22], run_id=digest[:22], created=created, task=f"loadbearing/{stage}",
                    dataset=EvalDataset(name=stage, location=str(f), samples=len(samples),
                                        sample_ids=[s.id for s in samples]),
                    model=model, config=EvalConfig(), viewer=viewer_config(["correct"]),
                    metadata={"run_dir": str(run.path), "stage": stage, "records_sha256": digest,
                              "summary": read_json(run.path / stage / SUMMARY).get("definition")})
    return EvalLog(status="success", eval=spec, results=results, samples=samples,
                   stats=EvalStats(started_at=created, completed_at=created))


def build_stage_logs(run: Run) -> Iterator[tuple[str, EvalLog]]:
    """``(stage, EvalLog)`` for every finished causal stage of ``run``, in :data:`STAGES` order."""
    for stage in STAGES:
        if _finished(run, stage):
            yield stage, build_stage_log(run, stage)


__all__ = ["STAGES", "build_stage_log", "build_stage_logs", "cell_of", "to_sample"]
