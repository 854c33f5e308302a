"""Measure the embedded model's baseline accuracy and eligibility on each arith level, with and without
the few-shot turns (the numbers quoted in the README).

    python bench/arith_ladder.py --n 24
"""
from __future__ import annotations

import argparse

from loadbearing.answers import extract_answer, is_correct
from loadbearing.engine.generation import generate
from loadbearing.engine.models import load_model
from loadbearing.questions.data import ARITH_LEVELS, load_questions
from loadbearing.questions.prompts import build_prompt, split_trace
from loadbearing.stats import rate


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=24, help="questions per level")
    ap.add_argument("--levels", default=",".join(ARITH_LEVELS), help="comma list of arith levels")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--min-lines", type=int, default=3)
    args = ap.parse_args(argv)
    lm = load_model(args.model)
    print(f"{'level':<8} {'few-shot':<9} {'accuracy (95% Wilson)':<30} eligible")
    for level in args.levels.split(","):
        qs = load_questions("arith", task=level, n_per_level=args.n)
        for shots in (True, False):
            outs = generate(lm, [build_prompt(lm.tokenizer, q, few_shot=shots) for q in qs], max_new_tokens=96,
                            batch_size=16, progress=False)
            correct = [is_correct(extract_answer(o.text, "arith"), q) for q, o in zip(qs, outs)]
            elig = sum(bool(c) and len(split_trace(o.text, "arith").lines) >= args.min_lines for c, o in zip(correct, outs))
            r = rate(sum(bool(c) for c in correct), len(qs))
            lo, hi = r["wilson"]
            acc = f"{r['k']:>2}/{r['n']} = {100 * r['rate']:4.1f}% [{100 * lo:.0f}, {100 * hi:.0f}]"
            print(f"{level:<8} {str(shots):<9} {acc}{'':<6} {elig}/{len(qs)}", flush=True)


if __name__ == "__main__":
    main()
