"""python bench/bench_steering.py [--tiny] [--batch 8] [--new-tokens 32] [--alphas 0,0.5,1,2] [--repeats 3]

Steering benchmark on the embedded model (SmolLM2-135M-Instruct; ``--tiny``: a random 2-layer Llama over its
tokenizer, seconds):

1. hook overhead: the same batch generated greedily with and without a steering hook (fixed number of new
   tokens, so both runs do the same work); ratio steered / unsteered (target <= 1.10);
2. alpha grid: one batched generate over batch x len(alphas) rows with per-row alphas, vs one generate per
   alpha; ratio batched / per-alpha (below 1 means the batched sweep is faster).

Prints both ratios (and a JSON line with all timings). Medians over ``--repeats`` runs after one warm-up.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--tiny", action="store_true", help="random 2-layer Llama instead of the embedded model (quick)")
    p.add_argument("--batch", type=int, default=8, help="rows per batch (default %(default)s)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens generated per row (default %(default)s)")
    p.add_argument("--alphas", default="0,0.5,1,2", help="alpha grid, relative to the mean residual norm (default %(default)s)")
    p.add_argument("--layer", type=int, default=None, help="hidden_states layer to steer (default: middle)")
    p.add_argument("--k", type=int, default=8, help="directions combined (random orthonormal; default %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats (median; default %(default)s)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    return p


def _prompts(tok, n):
    rows = []
    for i in range(n):
        q = f"Start with {i % 5 + 1}. Add {i % 3 + 2}. Subtract {i % 4 + 1}. What is the result?"
        rows.append(tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
                    + "Start = %d\n" % (i % 5 + 1))
    return rows


def _tiny_lm():
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from behavioural.models import dequantised_gguf_dir, embedded_gguf_path, wrap_model

    d, _ = dequantised_gguf_dir(embedded_gguf_path())
    tok = AutoTokenizer.from_pretrained(str(d))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    return wrap_model(LlamaForCausalLM(cfg).eval(), tok, name="tiny-llama")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import numpy as np
    import torch

    from steering.hooks import combine_directions, d_model, mean_resid_norm, n_layers, steer, steer_vectors

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tiny:
        lm = _tiny_lm()
    else:
        from behavioural.models import load_model

        lm = load_model("smollm2-135m-instruct")
    model, tok = lm.model, lm.tokenizer
    layer = args.layer if args.layer is not None else n_layers(model) // 2
    width = d_model(model)
    texts = _prompts(tok, args.batch)
    norm = mean_resid_norm(lm, texts, layer)
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((width, args.k)))
    basis = q.T
    alphas = [float(a) * norm for a in args.alphas.split(",")]

    def gen(batch_texts):
        enc = tok(batch_texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")
        with torch.inference_mode():
            return model.generate(**enc, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                  do_sample=False, temperature=None, top_p=None, top_k=None,
                                  pad_token_id=tok.pad_token_id)

    def timed_pair(fa, fb):
        """Medians of fa and fb timed alternately (a, b, a, b, ...), so load drift hits both alike."""
        fa(), fb()  # warm-up
        ta, tb = [], []
        for _ in range(args.repeats):
            for fn, ts in ((fa, ta), (fb, tb)):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
        return statistics.median(ta), statistics.median(tb)

    def steered():
        with steer(model, basis, layers=[layer], alpha=alphas[-1]):
            gen(texts)

    print(f"model {lm.name}, layer {layer}, k={args.k}, batch {args.batch} x {args.new_tokens} new tokens, "
          f"{torch.get_num_threads()} threads", flush=True)
    t_plain, t_steer = timed_pair(lambda: gen(texts), steered)

    print(f"hook overhead: steered {t_steer:.3f}s / unsteered {t_plain:.3f}s = {t_steer / t_plain:.3f} "
          f"({'within' if t_steer / t_plain <= 1.10 else 'ABOVE'} the 1.10 target)", flush=True)
    vec = combine_directions(basis)
    grid_texts = [t for _ in alphas for t in texts]
    grid_alpha = [a for a in alphas for _ in texts]

    def batched():
        with steer_vectors(model, vec, layers=[layer], alpha=grid_alpha):
            gen(grid_texts)

    def per_alpha():
        for a in alphas:
            with steer_vectors(model, vec, layers=[layer], alpha=a):
                gen(texts)

    t_batched, t_per_alpha = timed_pair(batched, per_alpha)
    res = {
        "model": lm.name, "layer": layer, "k": args.k, "batch": args.batch, "new_tokens": args.new_tokens,
        "alphas_rel": args.alphas, "resid_norm": norm, "threads": torch.get_num_threads(),
        "unsteered_s": t_plain, "steered_s": t_steer, "overhead_ratio": t_steer / t_plain,
        "alpha_grid_batched_s": t_batched, "alpha_grid_per_alpha_s": t_per_alpha,
        "alpha_grid_ratio": t_batched / t_per_alpha,
    }
    print(f"alpha grid ({len(alphas)} alphas): one batched pass {t_batched:.3f}s / one pass per alpha "
          f"{t_per_alpha:.3f}s = {res['alpha_grid_ratio']:.3f}")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
