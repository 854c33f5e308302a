"""Filler tokens (Lanham et al. 2023): replace each eligible chain with filler tokens, force the answer, and
compare the accuracy with no chain at all and with the full chain, over a sweep of filler lengths.

    from behavioural.causal.filler import FillerConfig, run_filler
    summary = run_filler(FillerConfig(run_dir="runs/demo", fillers=("dots", "dashes")))

Conditions per chain: ``none`` (the answer forced at once), per filler (``dots``: ``... ... ...``, ``dashes``:
``- - -``, ``underscores``: ``_ _ _``; units joined by spaces, which the embedded tokenizer reads as one token
each) and per fraction ``f`` of :attr:`FillerConfig.fractions` the filler at ``round(f * chain tokens)``
tokens (condition ``dots@0.5``; ``f = 1``, the chain's own token count, is plain ``dots``; both counts are
recorded), and ``full`` (the whole chain). Lanham et al. sweep the number of filler tokens from 0 up to the
chain's length; here the sweep is in fractions of each chain's own length, so chains of different lengths
pool at the same x. If filler alone lifted accuracy to the full chain's, the chain's *content* would not be
what helps; if accuracy with filler stays at no-chain level at every length, the extra tokens alone do not.
The summary's ``sweep`` is the accuracy curve per filler (x = 0 is ``none``).
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
    drive,
    forced_input,
    is_stage_complete,
    score_forced,
    with_note,
)
from loadbearing.cli import UsageError, check_number
from loadbearing.engine.generation import encode
from loadbearing.options import parse_fractions, split_list
from loadbearing.results.check import RateJSON
from loadbearing.runs import Run
from loadbearing.stage import option
from loadbearing.stats import clustered_rate, format_rate, paired_difference_ci
from loadbearing.tables import render_table

NAME = "filler"
VERSION = "2"
#: the default sweep: fractions of each chain's token count (0 is the no-chain condition)
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: filler name -> the unit repeated (joined by single spaces)
FILLERS = {"dots": "...", "dashes": "-", "underscores": "_"}


def _fillers(text: str) -> tuple[str, ...]:
    return tuple(split_list(text))


def _fractions(text: str) -> tuple[float, ...]:
    return parse_fractions(text, error=CausalError)


@dataclass(frozen=True, kw_only=True)
class FillerConfig(CausalConfig):
    fillers: tuple[str, ...] = option(("dots", "dashes"), parse=_fillers, metavar="LIST",
                                      help=f"comma list of {', '.join(FILLERS)}")
    #: filler lengths as fractions of the chain's token count (1.0: matched to the chain)
    fractions: tuple[float, ...] = option(FRACTIONS, parse=_fractions, metavar="LIST",
                                          help="filler lengths as fractions of each chain's token count, 1 included "
                                               "(default 0.25,0.5,0.75,1; 0 is the no-chain condition, always run)")
    max_answer_tokens: int = option(16, help="tokens generated after 'Answer:'")


def n_tokens(tokenizer: Any, text: str) -> int:
    return len(encode(tokenizer, text))


def filler_text(tokenizer: Any, unit: str, count: int) -> str:
    """``unit`` repeated (space-joined) so that the text is ``count`` tokens long (or as near as the tokenizer allows)."""
    if count <= 0:
        return ""

    def make(r: int) -> str:
        return " ".join([unit] * r)

    r = count
    for _ in range(4 * count + 8):  # the count is monotone in r; walk to it
        c = n_tokens(tokenizer, make(r))
        if c > count and r > 1:
            r -= 1
        elif c < count and n_tokens(tokenizer, make(r + 1)) <= count:
            r += 1
        else:
            break
    return make(r)


def condition(filler: str, fraction: float) -> str:
    """A condition's name: the filler at the chain's own length is the filler's name, else ``name@fraction``."""
    return filler if fraction == 1.0 else f"{filler}@{fraction:g}"


def plan(config: FillerConfig, chains: list[Chain], run: Run) -> list[Job]:
    jobs = []
    for c in chains:
        qid = c.baseline.question_id
        jobs.append(Job(f"{qid}|none", c, {"condition": "none"}))
        jobs += [Job(f"{qid}|{condition(f, x)}", c, {"condition": condition(f, x), "filler": f, "fraction": x})
                 for f in config.fillers for x in config.fractions]
        jobs.append(Job(f"{qid}|full", c, {"condition": "full"}))
    return jobs


def execute(config: FillerConfig, jobs: list[Job], engine: Engine) -> list[dict[str, Any]]:
    tok = engine.lm.tokenizer
    assistants, counts = [], []
    for j in jobs:
        chain_text = j.chain.prefix(j.chain.n)
        chain_tokens = n_tokens(tok, chain_text.rstrip("\n"))
        cond = j.data["condition"]
        if cond == "none":
            a = ""
        elif cond == "full":
            a = chain_text
        else:
            want = int(round(j.data["fraction"] * chain_tokens))
            a = filler_text(tok, FILLERS[j.data["filler"]], want) + "\n" if want > 0 else ""
        assistants.append(a)
        counts.append((chain_tokens, n_tokens(tok, a.rstrip("\n")) if a else 0))
    gens = engine.generate([forced_input(j.chain, a) for j, a in zip(jobs, assistants)],
                           max_new_tokens=config.max_answer_tokens, desc=f"{NAME} ({len(jobs)} inputs)")
    rows = []
    for j, a, (ct, ft), g in zip(jobs, assistants, counts, gens):
        answer_text, parsed, correct = score_forced(g.text, j.chain.baseline)
        rows.append({"id": j.id, **j.chain.meta(), "condition": j.data["condition"], "assistant_text": a,
                     "filler": j.data.get("filler"), "fraction": j.data.get("fraction"),
                     "chain_tokens": ct, "filler_tokens": ft, "generation": g.text, "answer_text": answer_text,
                     "parsed_answer": parsed, "correct": correct, "new_tokens": g.new_tokens})
    return rows


def summarise(config: FillerConfig, rows: list[dict], chains: list[Chain], run: Run) -> dict[str, Any]:
    kw = {"n_boot": config.n_boot, "seed": config.seed}
    conds = ["none", *(condition(f, x) for f in config.fillers for x in config.fractions), "full"]
    by_q: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_q.setdefault(r["question_key"], {})[r["condition"]] = r
    acc: dict[str, dict] = {}
    same_full: dict[str, RateJSON] = {}
    vs: dict[str, dict[str, dict]] = {}
    for cnd in conds:
        scored = [r for r in rows if r["condition"] == cnd and r["correct"] is not None]
        acc[cnd] = clustered_rate([bool(r["correct"]) for r in scored], [r["question_key"] for r in scored],
                                  **kw).to_dict() | {"unparsed": sum(r["condition"] == cnd and r["parsed_answer"] is None
                                                                     for r in rows)}
    for f in conds[1:-1]:
        pairs = [(k, d[f]["parsed_answer"] == d["full"]["parsed_answer"]) for k, d in by_q.items()
                 if f in d and "full" in d and d[f]["parsed_answer"] is not None and d["full"]["parsed_answer"] is not None]
        same_full[f] = clustered_rate([s for _, s in pairs], [k for k, _ in pairs], **kw).to_dict()
        vs[f] = {}
        for ref in ("none", "full"):
            trip = [(k, _num(d[f]["correct"]), _num(d[ref]["correct"])) for k, d in by_q.items() if f in d and ref in d]
            vs[f][ref] = paired_difference_ci(trip, **kw)
    tokens = [(r["chain_tokens"], r["filler_tokens"]) for r in rows if r["condition"] in config.fillers]
    sweep = {f: [{"fraction": 0.0, "condition": "none", "accuracy": acc["none"], "mean_filler_tokens": 0.0}] +
             [{"fraction": x, "condition": condition(f, x), "accuracy": acc[condition(f, x)],
               "same_as_full_chain": same_full[condition(f, x)], "vs_full": vs[condition(f, x)]["full"],
               "mean_filler_tokens": _mean([float(r["filler_tokens"]) for r in rows
                                            if r["condition"] == condition(f, x)])}
              for x in sorted(config.fractions)] for f in config.fillers}
    return {"conditions": conds, "fillers": {f: FILLERS[f] for f in config.fillers}, "accuracy": acc,
            "fractions": list(config.fractions), "sweep": sweep, "full_accuracy": acc["full"],
            "same_as_full_chain": same_full, "difference": vs,
            "token_count_matched": sum(a == b for a, b in tokens), "n_filler_rows": len(tokens),
            "mean_chain_tokens": sum(a for a, _ in tokens) / len(tokens) if tokens else None}


def _mean(v: list[float]) -> float | None:
    return sum(v) / len(v) if v else None


def _num(b: bool | None) -> float | None:
    return None if b is None else float(b)


def _diff(d: dict) -> str:
    e, ci = d.get("estimate"), d.get("ci") or [None, None]
    if e is None:
        return "n/a"
    s = f"{100 * e:+.1f} pp"
    return s + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci[0] is not None else "") + f" ({d['n_pairs']} q)"


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    fs = "md" if style == "md" else "text"
    rows = []
    for c in summary["conditions"]:
        name, _, frac = c.partition("@")
        what = {"none": "no chain", "full": "full chain"}.get(
            c, f"filler {summary['fillers'].get(name, name)!r} x {frac or '1'} of the chain's tokens")
        same = summary["same_as_full_chain"].get(c)
        d = summary["difference"].get(c, {})
        rows.append([what, format_rate(summary["accuracy"][c], fs), summary["accuracy"][c]["unparsed"],
                     format_rate(same, fs) if same else "", _diff(d["none"]) if d else "", _diff(d["full"]) if d else ""])
    head = ("Filler tokens: the chain replaced by filler, swept over fractions "
            f"{', '.join(f'{x:g}' for x in summary.get('fractions', [1.0]))} of its token count, answer forced "
            f"({summary['token_count_matched']}/{summary['n_filler_rows']} filler inputs at fraction 1 with exactly the "
            "chain's token count); 95% intervals clustered by question")
    table = render_table(["condition", "accuracy", "unparsed", "same answer as full chain", "vs no chain",
                          "vs full chain"], rows, style)
    return with_note(head + ("\n" if style == "text" else "\n\n") + table)


DRIVER = CausalStage(NAME, VERSION, plan, execute, summarise, format_summary)


def run_filler(config: FillerConfig, lm: Any = None, *, generate_fn: Any = None, echo: Any = print) -> dict[str, Any]:
    """Run (or resume) the filler test on ``config.run_dir``; returns the summary (see the module docstring)."""
    check_number(config.max_answer_tokens, "--max-answer-tokens", minimum=1)
    bad = [f for f in config.fillers if f not in FILLERS]
    if bad or not config.fillers:
        raise UsageError(f"--fillers {','.join(config.fillers)!r}: choose one or more of {', '.join(FILLERS)}")
    if not config.fractions or any(not 0 < x <= 1 for x in config.fractions) or 1.0 not in config.fractions:
        raise UsageError(f"--fractions {','.join(f'{x:g}' for x in config.fractions)!r}: give fractions in (0, 1] of "
                         "the chain's token count, including 1 (the matched length), e.g. 0.25,0.5,0.75,1")
    return drive(DRIVER, config, lm=lm, generate_fn=generate_fn, echo=echo)


def is_complete(path: str | Path) -> bool:
    """True when ``path`` (the run directory or its ``filler/``) holds a finished filler stage."""
    return is_stage_complete(path, NAME)


#: the stage (its command, ``python -m behavioural.causal.filler``, is built from :class:`FillerConfig`)
STAGE = command(NAME, FillerConfig, run_filler, format_summary,
                "Filler tokens: does the chain's content matter, or only its length?", backend=True)


# ------------------------------------------------------------------------------------------------ the command
#: ``python -m behavioural.causal.filler``'s ``--help`` description
COMMAND_DOC = """Filler tokens in place of a run's eligible chains (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.causal.filler runs/demo                        # writes runs/demo/filler/
    python -m behavioural.causal.filler runs/demo --fillers dots,underscores --resume

Each chain is replaced by as many filler tokens ("... ... ..." and "- - -" by default), the answer forced
with ``Answer:`` and scored; prints the accuracy beside no chain and the full chain (question-bootstrap
intervals). The library call is :func:`behavioural.causal.filler.run_filler`.
"""

#: the command: ``STAGE`` with :data:`COMMAND_DOC` as its ``--help`` description; its options are FillerConfig's fields
COMMAND = dataclasses.replace(STAGE, description=COMMAND_DOC)
build_parser, main = COMMAND.build_parser, COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
