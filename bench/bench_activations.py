"""Benchmark activation caching: overhead vs a plain forward pass, peak memory vs N, store size and read time.

    python bench/bench_activations.py            # embedded SmolLM2-135M-Instruct, synthetic continuations
    python bench/bench_activations.py --tiny     # quick: tiny random 2-layer Llama, a few rows

Prints, for the same right-padded batches:

1. **Overhead**: time of the engine's capture pass (every layer, all requested positions, reduced in the
   hook) and of the whole stage (tokenise + capture + HDF5 append), each divided by a plain forward pass of
   the causal LM without hooks (target <= 1.15x). Capture stops after the last block, so it skips the final
   norm and the LM head; the ratio against the base model's forward (no LM head) is printed too.
2. **Peak memory** (peak RSS above the RSS of the model-loaded, warmed-up process - the kernel's peak mark
   is reset first via /proc/self/clear_refs - in a fresh subprocess per N) at two N (default 16 and 256):
   flat in N (it depends on the batch size, not on the number of rows). ``rss_growth_mib`` (``--json``) is
   the peak at the larger N minus the peak at the smaller one (target <= 50 MiB).
3. **Store size** per row (and per row per layer) and the time to read one layer vs every layer.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="quick mode: tiny random model, few rows")
    ap.add_argument("--engine", default="nnsight", choices=("nnsight", "transformer-lens", "hf"))
    ap.add_argument("--questions", type=int, default=None, help="synthetic questions (2 rows each; default 8, tiny 4)")
    ap.add_argument("--pad-lines", type=int, default=None, help="filler sentences per prompt (default 20, tiny 4)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats (median reported)")
    ap.add_argument("--memory-n", default=None, help="two row counts for the memory test, e.g. 16,64")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    # internal: one memory measurement in a fresh process
    ap.add_argument("--_memory-child", dest="memory_child", type=int, default=None, help=argparse.SUPPRESS)
    return ap


def _load(tiny: bool):
    if tiny:
        from transformers import AutoTokenizer

        from loadbearing.engine.models import dequantised_gguf_dir, embedded_gguf_path

        sys.path.insert(0, str(REPO / "tests"))
        from conftest import make_tiny_lm

        d, _ = dequantised_gguf_dir(embedded_gguf_path())
        tok = AutoTokenizer.from_pretrained(str(d))
        lm = make_tiny_lm(tok, layers=2, hidden=64)
        lm.weights_hash = "tiny-weights-hash"
        return lm
    from loadbearing.engine.models import load_model

    return load_model("smollm2-135m-instruct")


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _proc_status_mb(key: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) so the load's peak does not mask the caching's (Linux)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    return _proc_status_mb("VmHWM") or _maxrss_mb()


def _rss_mb() -> float:
    return _proc_status_mb("VmRSS") or _maxrss_mb()


def _batches(lm, run_dir, positions, batch_size):
    from activations.inputs import prepare_item
    from loadbearing.runs import Run

    items = [prepare_item(r, lm.tokenizer, positions) for r in Run(run_dir).continuation_dicts()]
    return [items[i : i + batch_size] for i in range(0, len(items), batch_size)]


def _padded(batch, pad_id):
    from activations.inputs import pad_right

    return pad_right(batch, pad_id)


def _median_time(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def overhead(lm, run_dir: Path, args, positions) -> dict:
    import torch

    from activations.cache import CacheConfig, cache_activations
    from activations.engines import make_engine, run_batch
    from loadbearing.engine.layers import n_layers
    from loadbearing.options import parse_layers

    layers = parse_layers("all", n_layers=n_layers(lm.model)) or []
    batches = _batches(lm, run_dir, positions, args.batch_size)
    pad = lm.tokenizer.pad_token_id
    padded = [_padded(b, pad) for b in batches]
    model = lm.model

    def plain():
        with torch.no_grad():
            for ids, mask in padded:
                model(input_ids=ids, attention_mask=mask, use_cache=False)

    def plain_base():
        with torch.no_grad():
            for ids, mask in padded:
                model.model(input_ids=ids, attention_mask=mask, use_cache=False)

    eng = make_engine(args.engine, lm, layers)
    try:
        def capture():
            for b in batches:
                run_batch(eng, b, pad, positions)

        plain(), capture()  # warm-up
        # interleave repeats so background load hits all three alike
        t_plain, t_base, t_cap = [], [], []
        for _ in range(args.repeats):
            t_plain.append(_median_time(plain, 1))
            t_base.append(_median_time(plain_base, 1))
            t_cap.append(_median_time(capture, 1))
    finally:
        eng.close()
    t_plain, t_base, t_cap = (statistics.median(x) for x in (t_plain, t_base, t_cap))
    tmp = Path(tempfile.mkdtemp())
    t_stage = []
    for i in range(args.repeats):
        t = time.perf_counter()
        cache_activations(CacheConfig(run_dir, layers="all", positions=positions, engine=args.engine,
                                      batch_size=args.batch_size, output=tmp / f"s{i}.h5", progress=False,
                                      labels="none"), lm)
        t_stage.append(time.perf_counter() - t)
    t_stage = statistics.median(t_stage)
    n_rows = sum(len(b) for b in batches)
    tokens = sum(len(it.ids) for b in batches for it in b)
    return {
        "engine": args.engine, "rows": n_rows, "tokens": tokens, "layers": len(layers), "positions": positions,
        "batch_size": args.batch_size, "plain_forward_s": t_plain, "base_forward_no_lm_head_s": t_base,
        "capture_s": t_cap, "stage_s": t_stage,
        "capture_over_plain": t_cap / t_plain, "capture_over_base": t_cap / t_base, "stage_over_plain": t_stage / t_plain,
        "store": str(tmp / "s0.h5"),
    }


def store_numbers(path: str, repeats: int) -> dict:
    import numpy as np

    from activations import open_store

    size = os.path.getsize(path)
    # open = the integrity check (sha256 of the whole file against its sidecar) + the HDF5 header
    opened = _median_time(lambda: open_store(path).close(), max(repeats, 3))
    with open_store(path) as st:
        n, nl = st.n_rows, len(st.layers)
        mid = st.layers[nl // 2]
        one = _median_time(lambda: st.read(mid, "prefix_last"), max(repeats, 5))
        allv = _median_time(lambda: st.read_all("prefix_last"), max(repeats, 5))
        x = st.read(mid)
        assert x.shape == (n, st.d_model) and np.isfinite(x).all()
        n_pos = len(st.positions)
        d = st.d_model
    raw = n * nl * d * 4 * n_pos
    return {"store_bytes": size, "bytes_per_row": size / n, "bytes_per_row_per_layer_per_position": size / n / nl / n_pos,
            "raw_float32_bytes_per_row": raw / n, "compression_ratio": raw / size,
            "open_s": opened, "read_one_layer_s": one, "read_all_layers_s": allv, "read_all_over_one": allv / one,
            "open_over_read_one": opened / one}


def memory_child(args) -> None:
    """In a fresh process: load, warm up, then cache N rows; print JSON with max RSS before/after."""
    from activations.cache import CacheConfig, cache_activations
    from activations.synthetic import make_run

    lm = _load(args.tiny)
    tmp = Path(tempfile.mkdtemp())
    warm, _ = make_run(tmp / "warm", lm.tokenizer, n_questions=args.batch_size // 2, pad_lines=args.pad_lines,
                       weights_hash=lm.weights_hash, name=lm.name)
    cache_activations(CacheConfig(warm, positions="prefix_last,edit_mean,edit_last", engine=args.engine,
                                  batch_size=args.batch_size, progress=False, labels="none"), lm)
    _reset_peak()
    base = _rss_mb()
    run, _ = make_run(tmp / "run", lm.tokenizer, n_questions=args.memory_child // 2, pad_lines=args.pad_lines,
                      weights_hash=lm.weights_hash, name=lm.name)
    cache_activations(CacheConfig(run, positions="prefix_last,edit_mean,edit_last", engine=args.engine,
                                  batch_size=args.batch_size, progress=False, labels="none"), lm)
    print(json.dumps({"n": args.memory_child, "baseline_mb": base, "peak_mb": _peak_mb()}))


def memory(args) -> list[dict]:
    ns = [int(x) for x in (args.memory_n or ("16,64" if args.tiny else "16,256")).split(",")]
    out = []
    for n in ns:
        cmd = [sys.executable, __file__, "--_memory-child", str(n), "--engine", args.engine,
               "--batch-size", str(args.batch_size), "--pad-lines", str(args.pad_lines)] + (["--tiny"] if args.tiny else [])
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        if res.returncode != 0:
            raise RuntimeError(f"memory child failed: {res.stderr[-2000:]}")
        d = json.loads(res.stdout.strip().splitlines()[-1])
        d["growth_mb"] = d["peak_mb"] - d["baseline_mb"]
        out.append(d)
    return out


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.questions is None:
        args.questions = 4 if args.tiny else 8
    if args.pad_lines is None:
        args.pad_lines = 4 if args.tiny else 20
    if args.memory_child is not None:
        memory_child(args)
        return 0
    import torch

    from activations.synthetic import make_run

    positions = ["prefix_last", "edit_mean", "edit_last"]
    lm = _load(args.tiny)
    run_dir, _ = make_run(Path(tempfile.mkdtemp()) / "run", lm.tokenizer, n_questions=args.questions,
                          pad_lines=args.pad_lines, weights_hash=lm.weights_hash, name=lm.name)
    print(f"model {lm.name} ({'tiny' if args.tiny else 'embedded'}), torch threads {torch.get_num_threads()}, "
          f"engine {args.engine}, batch {args.batch_size}")
    o = overhead(lm, run_dir, args, positions)
    print(f"overhead: {o['rows']} rows, {o['tokens']} tokens, {o['layers']} layers x {len(positions)} positions")
    print(f"  plain forward (causal LM, no hooks) {o['plain_forward_s']:.3f}s | base model, no LM head "
          f"{o['base_forward_no_lm_head_s']:.3f}s")
    print(f"  capture pass {o['capture_s']:.3f}s -> {o['capture_over_plain']:.3f}x plain "
          f"({o['capture_over_base']:.3f}x base)   target <= 1.15x")
    print(f"  whole stage (tokenise + capture + HDF5) {o['stage_s']:.3f}s -> {o['stage_over_plain']:.3f}x plain")
    s = store_numbers(o["store"], args.repeats)
    print(f"store: {s['bytes_per_row'] / 1024:.1f} KiB/row ({s['bytes_per_row_per_layer_per_position']:.0f} B per "
          f"row-layer-position; raw float32 {s['raw_float32_bytes_per_row'] / 1024:.1f} KiB/row, lzf "
          f"{s['compression_ratio']:.2f}x)")
    print(f"  read one layer {s['read_one_layer_s'] * 1e3:.2f} ms vs all layers {s['read_all_layers_s'] * 1e3:.2f} ms "
          f"({s['read_all_over_one']:.1f}x); open (sha256 check + header) {s['open_s'] * 1e3:.2f} ms")
    mem = []
    if not args.skip_memory:
        mem = memory(args)
        print("peak memory (peak RSS growth over the model-loaded, warmed-up process):")
        for d in mem:
            print(f"  N={d['n']:>4}: +{d['growth_mb']:.1f} MiB (peak {d['peak_mb']:.0f} MiB)")
        rss_growth = mem[-1]["peak_mb"] - mem[0]["peak_mb"]
        print(f"  RSS growth N={mem[0]['n']} -> N={mem[-1]['n']}: {rss_growth:+.1f} MiB (peak vs peak; the batch "
              f"buffers are in both)   target <= 50 MiB")
    else:
        rss_growth = None
    if args.json:
        Path(args.json).write_text(json.dumps({"rss_growth_mib": rss_growth, "overhead": o, "store": s,
                                               "memory": mem}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
