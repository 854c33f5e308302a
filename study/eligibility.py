"""Which tasks give eligible traces on a model: greedy baselines only, counted, no edits.

    python -m study.eligibility --data-dir ../shared/data --n 8 \\
        --bbh navigate,date_understanding,boolean_expressions --mmlu high_school_geography --gsm8k

Per task: questions, parseable answers, correct, eligible (correct with >= ``--min-lines`` reasoning lines)
and the median line count of the correct traces, with the few-shot setting the study would use for the model
(``study.settings``). The table is markdown (docs/paper-datasets.md holds one). It reads the same prompt
builder, scorer and splitter as the behavioural stage, so a task eligible here is eligible there.
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from loadbearing.answers import score
from loadbearing.cli import OneLineParser, run_cli
from loadbearing.engine.generation import generate
from loadbearing.questions.data import load_questions, sample
from loadbearing.questions.prompts import build_prompt, split_trace
from loadbearing.tables import render_table


def measure(lm, tasks: list[tuple[str, str | None]], *, data_dir: str, n: int, seed: int, few_shot: bool | None,
            max_new_tokens: int, min_lines: int, batch_size: int, log=None) -> list[dict[str, Any]]:
    rows = []
    for dataset, task in tasks:
        t0 = time.perf_counter()
        qs = sample(load_questions(dataset, task=task, data_dir=data_dir), n, seed)
        prompts = [build_prompt(lm.tokenizer, q, few_shot=few_shot) for q in qs]
        gens = generate(lm, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size, progress=False)
        parsed = correct = eligible = 0
        lines = []
        for q, g in zip(qs, gens):
            sc = score(g.text, q)
            n_lines = len(split_trace(g.text, q.dataset, q.task).lines)
            parsed += sc.parsed is not None
            if sc.correct:
                correct += 1
                lines.append(n_lines)
                eligible += n_lines >= min_lines
        rows.append({"dataset": dataset, "task": task or "-", "n": len(qs), "parseable": parsed, "correct": correct,
                     "eligible": eligible, "median_lines": statistics.median(lines) if lines else None,
                     "seconds": round(time.perf_counter() - t0)})
        if log:
            log(rows[-1])
    return rows


def table(rows: list[dict]) -> str:
    header = ["dataset", "task", "n", "parseable", "correct", "eligible (>= 3 lines)", "median lines (correct)", "s"]
    body = [[r["dataset"], r["task"], r["n"], r["parseable"], r["correct"], r["eligible"],
             "-" if r["median_lines"] is None else r["median_lines"], r["seconds"]] for r in rows]
    return render_table(header, body, style="md")


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="python -m study.eligibility", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m-instruct", help="model (default: the embedded one)")
    p.add_argument("--data-dir", required=True, help="folder holding gsm8k/, mmlu/, bbh/")
    p.add_argument("--bbh", default="", help="BBH tasks, a comma list")
    p.add_argument("--mmlu", default="", help="MMLU subjects, a comma list")
    p.add_argument("--gsm8k", action="store_true", help="also GSM8K")
    p.add_argument("--n", type=int, default=8, help="questions per task (default 8)")
    p.add_argument("--max-new-tokens", type=int, default=160, help="generation budget (default 160)")
    p.add_argument("--min-lines", type=int, default=3, help="reasoning lines an eligible trace needs (default 3)")
    p.add_argument("--batch-size", type=int, default=8, help="generation batch size (default 8)")
    p.add_argument("--no-few-shot", action="store_true", help="zero-shot (default: the study's rule for the model)")
    p.add_argument("--seed", type=int, default=42, help="sampling seed (default 42)")
    args = p.parse_args(argv)

    def body() -> int:
        from loadbearing.engine.models import load_model  # deferred: tests monkeypatch loadbearing.engine.models.load_model
        from study.settings import is_embedded  # deferred: study.settings loads numpy

        tasks = [("bbh", t) for t in args.bbh.split(",") if t] + [("mmlu", t) for t in args.mmlu.split(",") if t]
        tasks += [("gsm8k", None)] if args.gsm8k else []
        few = False if args.no_few_shot else (True if is_embedded(args.model) else None)
        lm = load_model(args.model)
        rows = measure(lm, tasks, data_dir=args.data_dir, n=args.n, seed=args.seed, few_shot=few,
                       max_new_tokens=args.max_new_tokens, min_lines=args.min_lines, batch_size=args.batch_size,
                       log=lambda r: print(r, file=sys.stderr, flush=True))
        print(table(rows), flush=True)
        return 0

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
