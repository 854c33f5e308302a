"""Rollouts per second for resampling importance: N seeded rollouts of a prefix through the batched fast path
(the prefix computed once, the rollouts decoded side by side) against the same N rollouts generated one at a
time, on the embedded model.

    .venv/bin/python bench/bench_resample.py                          # 3 prefixes x 8 rollouts, 48 tokens
    .venv/bin/python bench/bench_resample.py --prefixes 4 --rollouts 16 --json .bench_out/bench_resample.json

Workload (fixed): ``--prefixes`` arith questions (``--task``), their chat-templated prompts followed by the
assistant's first line (``We start with S.``: a cut after one reasoning line, as the stage makes), each
repeated ``--rollouts`` times. Both runs sample with T = 0.6, top-p 0.95 and the same row keys
(``prefix|r=J``), so each rollout's random stream is the same in both; ``identical_fraction`` says how many
rollouts came out token-identical (a seeded row does not depend on its batch, up to floating-point noise).
``batched``: one :func:`loadbearing.engine.generation.generate` call over all rollouts (``--batch-size``);
``one_at_a_time``: one call per rollout (``batch_size=1``, the same fast kernels). Prints both rates and their
ratio; ``--json`` writes everything.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def build_parser():
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--prefixes", type=int, default=3, help="distinct prefixes (arith questions)")
    p.add_argument("--rollouts", type=int, default=8, help="rollouts per prefix")
    p.add_argument("--task", default="s2_o5", help="arith level")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--batch-size", type=int, default=16, help="batched run's batch size")
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=44)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--json", default=None, help="write the results here")
    return p


def workload(lm, n_prefixes: int, n_rollouts: int, task: str) -> tuple[list[str], list[str]]:
    import re

    from loadbearing.questions.data import load_questions
    from loadbearing.questions.prompts import build_prompt

    qs = load_questions("arith", task=task, n_per_level=n_prefixes, seed=0)[:n_prefixes]
    texts, keys = [], []
    for q in qs:
        m = re.search(r"with (?:the number )?(\d+)", q.question)
        start = m.group(1) if m else "0"
        text = build_prompt(lm.tokenizer, q) + f"We start with {start}.\n"
        for j in range(n_rollouts):
            texts.append(text)
            keys.append(f"{q.id}|k=1|r={j}")
    return texts, keys


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    from loadbearing.engine.generation import generate
    from loadbearing.engine.models import load_model
    from loadbearing.engine.sampling import Sampling

    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model("smollm2-135m-instruct")
    s = Sampling(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    texts, keys = workload(lm, args.prefixes, args.rollouts, args.task)
    kw = {"max_new_tokens": args.max_new_tokens, "progress": False, "sampling": s}
    generate(lm, texts[:2], batch_size=2, sample_keys=keys[:2], **kw)  # warm-up (packing the linears)

    t0 = time.perf_counter()
    batched = generate(lm, texts, batch_size=args.batch_size, sample_keys=keys, **kw)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = [generate(lm, [t], batch_size=1, sample_keys=[k], **kw)[0] for t, k in zip(texts, keys)]
    t_alone = time.perf_counter() - t0

    n = len(texts)
    res = {
        "model": lm.name, "prefixes": args.prefixes, "rollouts_per_prefix": args.rollouts, "n_rollouts": n,
        "max_new_tokens": args.max_new_tokens, "batch_size": args.batch_size, "sampling": s.to_dict(),
        "threads": torch.get_num_threads(),
        "batched": {"seconds": t_batched, "rollouts_per_s": n / t_batched,
                    "tokens": sum(g.new_tokens for g in batched)},
        "one_at_a_time": {"seconds": t_alone, "rollouts_per_s": n / t_alone,
                          "tokens": sum(g.new_tokens for g in alone)},
        "ratio": t_alone / t_batched,
        "identical_fraction": sum(a.text == b.text for a, b in zip(batched, alone)) / n,
        "distinct_rollouts_per_prefix": sum(len({g.text for g in batched[i:i + args.rollouts]})
                                            for i in range(0, n, args.rollouts)) / args.prefixes,
    }
    print(f"{n} rollouts ({args.prefixes} prefixes x {args.rollouts}), <= {args.max_new_tokens} tokens, "
          f"T={s.temperature}, top-p={s.top_p}, {res['threads']} threads")
    print(f"batched (batch {args.batch_size}, shared prefix): {res['batched']['rollouts_per_s']:.2f} rollouts/s "
          f"({t_batched:.1f} s, {res['batched']['tokens']} tokens)")
    print(f"one at a time:                   {res['one_at_a_time']['rollouts_per_s']:.2f} rollouts/s "
          f"({t_alone:.1f} s, {res['one_at_a_time']['tokens']} tokens)")
    print(f"ratio batched / one at a time: {res['ratio']:.2f}x; token-identical rollouts: "
          f"{100 * res['identical_fraction']:.0f}%; distinct rollouts per prefix: "
          f"{res['distinct_rollouts_per_prefix']:.1f} of {args.rollouts}")
    if args.json:
        from loadbearing.files import write_json

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
