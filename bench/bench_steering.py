"""python bench/bench_steering.py [--tiny] [--cases 8] [--settings 8] [--batch 32] [--new-tokens 48] [--json OUT]
.venv-vllm/bin/python bench/bench_steering.py --backend vllm [--cases 8] [--settings 8] [--json OUT]

Steering benchmark on the embedded model (SmolLM2-135M-Instruct; ``--tiny``: a random 2-layer Llama over its
tokenizer, seconds). The workload is a sweep's: ``--cases`` arith case inputs (chat prompt + a one-line
assistant prefix), each generated under ``--settings`` steering settings (alphas x random orthonormal bases,
dose-matched, per-row vectors), greedy, stop at the answer line or ``--new-tokens``.

1. ``steered_over_unsteered`` (the headline; target >= 0.9): tokens/s of the steered fast path
   (:func:`steering.generate.generate_steered`: shared prefix, per-row vectors, several alphas and bases per
   batch) over tokens/s of the unsteered fast path (:func:`loadbearing.engine.generation.generate`, continuous
   batching) on the same rows (``dedupe=False``);
2. ``same_work_ratio``: the steered path with every alpha 0 (identical outputs, identical work) against the
   unsteered path, as unsteered time / steered time;
3. ``fast_over_hooked``: the steered fast path against the previous steering path (hooks around
   ``model.generate`` batches, :func:`loadbearing.engine.generation.generate_simple`), tokens/s over tokens/s.

``--backend vllm`` (in the vLLM environment, ``make vllm``) measures instead, in one run and on the same rows:
``vllm_over_hf``, steered vLLM (:class:`steering.vllm.engine.VLLMSteering`, per-request vectors in vLLM's
workers) tokens/s over steered HF fast path tokens/s; and ``vllm_steered_over_unsteered``, steered over
unsteered tokens/s on the same (eager) vLLM engine; with how many records are identical.

Timings alternate (a, b, a, b...) after one warm-up so load drift hits both alike; medians over
``--repeats``. Prints each ratio and one JSON line; ``--json PATH`` also writes it to a file.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--tiny", action="store_true", help="random 2-layer Llama instead of the embedded model (quick)")
    p.add_argument("--cases", type=int, default=8, help="distinct case inputs (default %(default)s)")
    p.add_argument("--settings", type=int, default=8, help="steering settings per case (default %(default)s)")
    p.add_argument("--batch", type=int, default=32, help="rows per batch (default %(default)s)")
    p.add_argument("--new-tokens", type=int, default=48, help="generation budget per row (default %(default)s)")
    p.add_argument("--alphas", default="0.1,0.25,0.5,1", help="alphas relative to the mean residual norm (default %(default)s)")
    p.add_argument("--layer", type=int, default=None, help="hidden_states layer to steer (default: middle)")
    p.add_argument("--k", type=int, default=4, help="directions combined per basis (default %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats (median; default %(default)s)")
    p.add_argument("--skip-hooked", action="store_true", help="skip the (slow) hooked model.generate comparison")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the results JSON here")
    p.add_argument("--backend", choices=("hf", "vllm"), default="hf",
                   help="vllm: steered vLLM vs steered HF, and steered vs unsteered vLLM (default %(default)s)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="vLLM: memory fraction (default %(default)s)")
    return p


def _prompts(tok, n: int) -> list[str]:
    rows = []
    sys_msg = "Write one calculation per line. End with a line 'Answer: N'."
    for i in range(n):
        a, b, c = i % 5 + 1, i % 3 + 2, i % 4 + 1
        q = f"Start with {a}. Add {b}. Subtract {c}. What is the result?"
        msgs = [{"role": "system", "content": sys_msg}, {"role": "user", "content": q}]
        rows.append(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
                    + f"We start with {a}.\n{a} + {b} = {2 * (a + b) + 3}\n")
    return rows


def _tiny_lm():
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from loadbearing.engine.models import dequantised_gguf_dir, embedded_gguf_path, wrap_model

    d, _ = dequantised_gguf_dir(embedded_gguf_path())
    tok = AutoTokenizer.from_pretrained(str(d))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    return wrap_model(LlamaForCausalLM(cfg).eval(), tok, name="tiny-llama")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import numpy as np
    import torch

    from loadbearing.engine.generation import generate, generate_simple
    from steering.generate import generate_steered
    from steering.hooks import combine_directions, d_model, n_layers, steer_vectors
    from steering.norms import mean_resid_norm
    from steering.sweep.grid import random_basis

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tiny:
        lm = _tiny_lm()
    else:
        from loadbearing.engine.models import load_model

        lm = load_model("smollm2-135m-instruct")
    model, tok = lm.model, lm.tokenizer
    layer = args.layer if args.layer is not None else n_layers(model) // 2
    width = d_model(model)
    cases = _prompts(tok, args.cases)
    norm = mean_resid_norm(lm, cases, layer)
    alphas_rel = [float(a) for a in args.alphas.split(",")]
    # settings: alpha x basis seed, cycling, as the sweep's grid does (probe basis + random controls)
    settings = [(alphas_rel[i % len(alphas_rel)], i // len(alphas_rel)) for i in range(args.settings)]
    vec = {s: combine_directions(random_basis(args.k, width, seed=s)).numpy() for _, s in settings}
    texts = [c for c in cases for _ in settings]
    V = np.stack([vec[s] for _ in cases for _, s in settings]).astype(np.float32)  # [n, d_model]
    A = np.array([a * norm for _ in cases for a, _ in settings], dtype=np.float32)  # [n]
    kw = dict(max_new_tokens=args.new_tokens, batch_size=args.batch, progress=False)
    out: dict = {}

    def unsteered():
        out["u"] = generate(lm, texts, dedupe=False, **kw)

    def steered():
        out["s"] = generate_steered(lm, texts, V, A, layers=[layer], **kw)

    def steered_zero():
        out["z"] = generate_steered(lm, texts, V, 0.0, layers=[layer], **kw)

    def hooked():
        def ctx(ix):
            return steer_vectors(model, V[ix], layers=[layer], alpha=A[ix])

        out["h"] = generate_simple(lm, texts, batch_context=ctx, dedupe=False, **kw)

    def timed(fa, fb):
        fa(), fb()  # warm-up
        ta, tb = [], []
        for _ in range(args.repeats):
            for fn, ts in ((fa, ta), (fb, tb)):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
        return statistics.median(ta), statistics.median(tb)

    def toks(key):
        return sum(g.new_tokens for g in out[key])

    print(f"model {lm.name}, layer {layer}, k={args.k}, {args.cases} cases x {args.settings} settings = {len(texts)} "
          f"rows, batch {args.batch}, <= {args.new_tokens} new tokens, {torch.get_num_threads()} threads", flush=True)
    if args.backend == "vllm":
        res = _vllm(args, lm, texts, V, A, layer, kw, out, steered, timed, toks)
        res.update(model=lm.name, layer=layer, k=args.k, rows=len(texts), new_tokens=args.new_tokens,
                   threads=torch.get_num_threads(), device=str(next(model.parameters()).device))
        line = json.dumps(res)
        print(line)
        if args.json:
            Path(args.json).write_text(line + "\n")
        return 0
    t_u, t_s = timed(unsteered, steered)
    tps_u, tps_s = toks("u") / t_u, toks("s") / t_s
    ratio = tps_s / tps_u
    print(f"steered fast path {tps_s:.1f} tok/s ({toks('s')} tokens, {t_s:.2f}s) / unsteered fast path {tps_u:.1f} tok/s "
          f"({toks('u')} tokens, {t_u:.2f}s) = {ratio:.3f} ({'meets' if ratio >= 0.9 else 'BELOW'} the 0.9 target)",
          flush=True)
    t_u2, t_z = timed(unsteered, steered_zero)
    same = [a == b for a, b in zip(out["u"], out["z"])]
    print(f"same work (alpha 0, {sum(same)}/{len(same)} outputs identical): unsteered {t_u2:.2f}s / steered {t_z:.2f}s "
          f"= {t_u2 / t_z:.3f}", flush=True)
    res = {
        "model": lm.name, "layer": layer, "k": args.k, "cases": args.cases, "settings": args.settings,
        "rows": len(texts), "batch": args.batch, "new_tokens": args.new_tokens, "alphas_rel": alphas_rel,
        "resid_norm": norm, "threads": torch.get_num_threads(),
        "unsteered_s": t_u, "unsteered_tokens": toks("u"), "unsteered_tok_s": tps_u,
        "steered_s": t_s, "steered_tokens": toks("s"), "steered_tok_s": tps_s,
        "steered_over_unsteered": ratio,
        "same_work_ratio": t_u2 / t_z, "same_work_identical": sum(same),
    }
    if not args.skip_hooked:
        t_h, t_s2 = timed(hooked, steered)
        tps_h = toks("h") / t_h
        res.update(hooked_s=t_h, hooked_tok_s=tps_h, fast_over_hooked=(toks("s") / t_s2) / tps_h)
        print(f"steered fast path {toks('s') / t_s2:.1f} tok/s / hooked model.generate path {tps_h:.1f} tok/s = "
              f"{res['fast_over_hooked']:.2f}x", flush=True)
    line = json.dumps(res)
    print(line)
    if args.json:
        Path(args.json).write_text(line + "\n")
    return 0


def _vllm(args, lm, texts, V, A, layer, kw, out, steered, timed, toks) -> dict:
    """Steered vLLM vs steered HF, and steered vs unsteered vLLM, on the same rows."""
    from steering.vllm.engine import VLLMSteering

    vs = VLLMSteering(gpu_memory_utilization=args.gpu_memory_utilization)
    try:
        def v_steered():
            out["v"] = vs.add(lm, texts, V, A, layers=[layer], **kw)

        def v_plain():
            out["p"] = vs.generate(lm, texts, dedupe=False, **kw)  # one request per row, as the steered call

        t_h, t_v = timed(steered, v_steered)
        tps_h, tps_v = toks("s") / t_h, toks("v") / t_v
        same = sum(a == b for a, b in zip(out["s"], out["v"]))
        print(f"steered vLLM {tps_v:.1f} tok/s ({toks('v')} tokens, {t_v:.2f}s) / steered HF fast path {tps_h:.1f} tok/s "
              f"({toks('s')} tokens, {t_h:.2f}s) = {tps_v / tps_h:.2f}x; {same}/{len(texts)} records identical", flush=True)
        t_p, t_v2 = timed(v_plain, v_steered)
        tps_p, tps_v2 = toks("p") / t_p, toks("v") / t_v2
        print(f"steered vLLM {tps_v2:.1f} tok/s / unsteered vLLM (same eager engine) {tps_p:.1f} tok/s = "
              f"{tps_v2 / tps_p:.3f}", flush=True)
        return {"backend": "vllm", "vllm": vs.record(), "hf_steered_s": t_h, "hf_steered_tokens": toks("s"),
                "hf_steered_tok_s": tps_h, "vllm_steered_s": t_v, "vllm_steered_tokens": toks("v"),
                "vllm_steered_tok_s": tps_v, "vllm_over_hf": tps_v / tps_h, "identical_records": same,
                "vllm_unsteered_s": t_p, "vllm_unsteered_tok_s": tps_p, "vllm_steered_over_unsteered": tps_v2 / tps_p,
                "repeats": args.repeats}
    finally:
        vs.shutdown()


if __name__ == "__main__":
    sys.exit(main())
