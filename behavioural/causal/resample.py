"""On-policy resampling importance per reasoning step ("thought anchors", Bogdan et al. 2025).

    from behavioural.causal.resample import ResampleConfig, run_resample
    summary = run_resample(ResampleConfig(run_dir="runs/demo", rollouts=8))

For each eligible chain (a seeded sample of at most ``max_questions``) with reasoning lines ``L[0..n-1]``, and
each cut ``k = 0..n``, ``rollouts`` continuations are *sampled* from the model's own distribution after the
assistant prefix ``L[:k]`` (step ``k`` onwards regenerated), and - for the forced-answer variant - as many
answers are sampled right after ``L[:k]`` + ``Answer:``. The rollouts of one prefix are neighbours in one
call of the batched fast path (:func:`loadbearing.engine.generation.generate` with
:class:`loadbearing.engine.sampling.Sampling`), so the prompt and the shared prefix are computed once and
each rollout only decodes its own tokens. Each rollout has its own seeded random stream, keyed by its id
(``question|k=K|r=J``), so a rollout is reproducible whatever else is in its batch.

Step ``i``'s counterfactual importance is ``acc(rollouts from L[:i] whose new step i differs in meaning from
L[i]) - acc(rollouts from L[:i+1])`` (:mod:`behavioural.causal.resample_summary`; the semantic filter is
:mod:`behavioural.causal.resample_similarity`). Settings from the thought-anchors repository
(``generate_rollouts.py``: ``--num_rollouts 100``, ``--temperature 0.6``, ``--top_p 0.95``, ``--seed 44``;
``analyze_rollouts.py``: ``--similarity_threshold 0.8``); the CPU default is 8 rollouts per prefix.

Writes ``RUN_DIR/resample/`` through :func:`behavioural.causal.common.drive`: ``records.jsonl`` (one row per
rollout, with its row seed and the sampling settings), ``summary.json``, ``summary.md``, ``manifest.json``
(the similarity method under ``extra.similarity_provenance``); resumable, ``--shard``-able.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from behavioural.causal.common import (
    CausalConfig,
    CausalError,
    CausalStage,
    Chain,
    Engine,
    Job,
    command,
    count_or_all,
    drive,
    eligible_chains,
    forced_input,
    is_stage_complete,
    score_forced,
)
from behavioural.causal.resample_matrix import parse_band
from behavioural.causal.resample_similarity import DEFAULT_METHOD, THRESHOLD, load_similarity
from behavioural.causal.resample_summary import format_summary, summarise
from loadbearing.answers import score
from loadbearing.cli import UsageError, check_number
from loadbearing.engine.sampling import Sampling, row_seed
from loadbearing.runs import Run
from loadbearing.stage import option

NAME = "resample"
VERSION = "1"
#: thought-anchors' settings (generate_rollouts.py / analyze_rollouts.py defaults)
PAPER = {"rollouts": 100, "temperature": 0.6, "top_p": 0.95, "seed": 44, "similarity_threshold": 0.8,
         "sentence_model": "all-MiniLM-L6-v2",
         "source": "interp-reasoning/thought-anchors generate_rollouts.py (-nr 100, -t 0.6, -tp 0.95, -s 44), "
                   "analyze_rollouts.py (-st 0.8, -sm all-MiniLM-L6-v2)"}


@dataclass(frozen=True, kw_only=True)
class ResampleConfig(CausalConfig):
    #: rollouts per prefix (the paper: 100)
    rollouts: int = option(8, group="rollouts", help=f"rollouts per prefix (default 8; the paper: {PAPER['rollouts']})")
    temperature: float = option(0.6, group="rollouts", help="sampling temperature")
    top_p: float = option(0.95, group="rollouts", help="nucleus mass")
    #: seeds every rollout's stream (with its id) and the question sample
    sample_seed: int = option(44, group="rollouts", help="seeds each rollout's stream (with its id) and the question "
                              "sample")
    #: a seeded sample of at most this many eligible chains (None: all)
    max_questions: int | None = option(8, group="rollouts", parse=count_or_all, metavar="N",
                                       help="a seeded sample of at most this many eligible chains (default 8; 0 = all)")
    max_new_tokens: int = option(256, group="rollouts", help="tokens per rollout")
    max_answer_tokens: int = option(16, group="rollouts", help="tokens after a forced 'Answer:'")
    #: the forced-answer variant (answers sampled right after the prefix)
    forced: bool = option(True, group="rollouts", negate="--no-forced", help="skip the forced-answer variant")
    similarity: str = option(DEFAULT_METHOD, group="semantic filter",
                             help="tfidf (the lexical fallback, default) or st:MODEL (a cached sentence-transformers "
                                  "model, e.g. st:all-MiniLM-L6-v2 as in the paper)")
    threshold: float = option(THRESHOLD, group="semantic filter",
                              help="a new step differs when similarity < this")
    #: keep only questions whose resample accuracy lies in [lo, hi] in the pooled numbers (thought-anchors: 0.25-0.75);
    #: it changes no rollout, so a stage can be re-summarised with another band (--resume)
    accuracy_band: tuple[float, float] | None = option(
        None, compare=False, group="semantic filter", parse=parse_band, metavar="LO,HI",
        help="pool only questions whose resample accuracy (rollouts from the question alone) is in [LO, HI] "
             "(thought-anchors keeps 0.25,0.75; default: all)")

    @property
    def sampling(self) -> Sampling:
        return Sampling(temperature=self.temperature, top_p=self.top_p, seed=self.sample_seed)


def sample_keys(run: Run, config: ResampleConfig) -> set[str] | None:
    """The question keys of the seeded sample of at most ``max_questions`` eligible chains (None: all).

    Drawn over the whole run (not the shard), by ``row_seed(sample_seed, key)`` order, so every shard holds
    its part of one sample."""
    if config.max_questions is None:
        return None
    chains = eligible_chains(run)
    ranked = sorted({c.key for c in chains}, key=lambda k: row_seed(config.sample_seed, f"question:{k}"))
    return set(ranked[:config.max_questions])


def plan(config: ResampleConfig, chains: list[Chain], run: Run) -> list[Job]:
    keep = sample_keys(run, config)
    jobs = []
    kinds = ("rollout", "forced") if config.forced else ("rollout",)
    for c in chains:
        if keep is not None and c.key not in keep:
            continue
        for kind in kinds:
            for k in range(c.n + 1):
                for j in range(config.rollouts):
                    tag = "" if kind == "rollout" else "forced|"
                    jobs.append(Job(f"{c.baseline.question_id}|{tag}k={k}|r={j}", c,
                                    {"kind": kind, "k": k, "j": j, "assistant": c.prefix(k)}))
    return jobs


def first_line(text: str) -> str:
    """A rollout's new step: its first non-blank line, stripped ("" when it wrote nothing)."""
    return next((s.strip() for s in text.split("\n") if s.strip()), "")


def execute(config: ResampleConfig, jobs: list[Job], engine: Engine) -> list[dict[str, Any]]:
    sim = engine.extras.get("similarity") or load_similarity(config.similarity)
    s = config.sampling
    rows: dict[str, dict] = {}
    for kind in ("rollout", "forced"):
        part = [j for j in jobs if j.data["kind"] == kind]
        if not part:
            continue
        forced = kind == "forced"
        texts = [forced_input(j.chain, j.data["assistant"]) if forced else j.chain.baseline.prompt + j.data["assistant"]
                 for j in part]
        gens = engine.generate(texts, max_new_tokens=config.max_answer_tokens if forced else config.max_new_tokens,
                               desc=f"{NAME} {kind}s ({len(part)})", sampling=s, sample_keys=[j.id for j in part])
        for j, g in zip(part, gens):
            c, k = j.chain, j.data["k"]
            row = {"id": j.id, **c.meta(), "kind": kind, "k": k, "rollout": j.data["j"],
                   "assistant_text": j.data["assistant"], "generation": g.text, "new_tokens": g.new_tokens,
                   "finish_reason": g.finish_reason,
                   "sampling": {"temperature": s.temperature, "top_p": s.top_p, "seed": s.seed},
                   "row_seed": row_seed(s.seed, j.id)}
            if forced:
                answer_text, parsed, correct = score_forced(g.text, c.baseline)
                row.update(answer_text=answer_text, parsed_answer=parsed, correct=correct)
            else:
                parsed, correct = score(g.text, c.baseline)  # the one scorer, on the rollout's own answer line
                original = c.trace.lines[k] if k < c.n else None
                new = first_line(g.text)
                sim_v = None if original is None else sim(c.trace.lines, original, new)
                row.update(original_step=original, new_step=new, similarity=sim_v,
                           different=None if sim_v is None else bool(sim_v < config.threshold),
                           parsed_answer=parsed, correct=correct)
            rows[j.id] = row
    return [rows[j.id] for j in jobs]


def prepare(config: ResampleConfig, run: Run) -> dict[str, Any]:
    sim = load_similarity(config.similarity)
    return {"similarity": sim, "similarity_provenance": sim.provenance(config.threshold),
            "sampling_provenance": config.sampling.to_dict() | {"rollouts_per_prefix": config.rollouts,
                                                               "paper": PAPER}}


DRIVER = CausalStage(NAME, VERSION, plan, execute, summarise, format_summary, prepare,
                     summary_options=("accuracy_band",))


def check_config(config: ResampleConfig) -> None:
    """Refuse bad settings before anything is read or written."""
    if config.rollouts < 1:
        raise UsageError(f"--rollouts must be >= 1, got {config.rollouts}: each prefix needs at least one rollout "
                         f"(the paper uses {PAPER['rollouts']}; 8 is the CPU default)")
    check_number(config.temperature, "--temperature", minimum=0)
    if config.temperature == 0:
        raise UsageError("--temperature 0 is greedy: every rollout of a prefix would be the same; give T > 0 "
                         f"(the paper's is {PAPER['temperature']})")
    check_number(config.top_p, "--top-p", minimum=1e-9, maximum=1)
    check_number(config.threshold, "--threshold", minimum=-1, maximum=1)
    check_number(config.max_new_tokens, "--max-new-tokens", minimum=1)
    check_number(config.max_answer_tokens, "--max-answer-tokens", minimum=1)
    if config.accuracy_band is not None:
        lo, hi = config.accuracy_band
        if not 0 <= lo <= hi <= 1:
            raise UsageError(f"--accuracy-band {lo},{hi}: need 0 <= LO <= HI <= 1 (thought-anchors keeps 0.25,0.75)")
    if config.max_questions is not None and config.max_questions < 1:
        raise UsageError(f"--max-questions must be >= 1, got {config.max_questions} (omit it for all)")


def run_resample(config: ResampleConfig, lm: Any = None, *, generate_fn: Any = None, echo: Any = print) -> dict[str, Any]:
    """Run (or resume) resampling importance on ``config.run_dir``; returns the summary (module docstring)."""
    check_config(config)
    return drive(DRIVER, config, lm=lm, generate_fn=generate_fn, echo=echo)


def is_complete(path: str | Path) -> bool:
    """True when ``path`` (the run directory or its ``resample/``) holds a finished resampling stage."""
    return is_stage_complete(path, NAME)


#: the stage (its command, ``python -m behavioural.causal.resample``, is built from :class:`ResampleConfig`)
STAGE = command(NAME, ResampleConfig, run_resample, format_summary,
                "Resampling importance: which steps anchor the answer (on-policy)?", backend=True)

__all__ = ["build_parser", "main", "ResampleConfig", "run_resample", "is_complete", "format_summary", "summarise", "plan",
           "execute", "CausalError", "PAPER", "DRIVER", "STAGE"]


# ------------------------------------------------------------------------------------------------ the command
#: ``python -m behavioural.causal.resample``'s ``--help`` description
COMMAND_DOC = """Resampling importance per reasoning step on a run's eligible chains ("thought anchors"; docs/causal-tests.md).

    python -m behavioural.causal.resample runs/demo                           # writes runs/demo/resample/
    python -m behavioural.causal.resample runs/demo --rollouts 100 --max-questions 50 --device cuda   # the paper's N
    python -m behavioural.causal.resample runs/demo --resume                  # continue; a complete stage writes nothing
    python -m behavioural.causal.resample runs/demo --shard 0/2               # one shard (an unsharded run merges them)

For each sampled chain and each cut k = 0..n, N rollouts are sampled (seeded, T and top-p) after the first k
reasoning lines, and N answers right after them + "Answer:"; step i's importance is the accuracy of the
rollouts whose new step i differs in meaning from the original, minus that of the rollouts from step i+1.
Prints the per-step table and whether the steps the paper edits (early/middle/late) are the important ones.
The library call is :func:`behavioural.causal.resample.run_resample`.
"""

#: the command: ``STAGE`` with :data:`COMMAND_DOC` as its ``--help`` description; its options are ResampleConfig's fields
COMMAND = dataclasses.replace(STAGE, description=COMMAND_DOC)
build_parser, main = COMMAND.build_parser, COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
