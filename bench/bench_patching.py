"""python bench/bench_patching.py [--tiny] [--layers 8] [--batch 32] [--repeats 3] [--json OUT]

Activation-patching benchmark on the embedded model (SmolLM2-135M-Instruct; ``--tiny``: a random 2-layer Llama
over its tokenizer). The workload is one case of ``python -m steering.patching``: an arith few-shot prompt with an
edited assistant prefix and its clean control, scored rows ``prefix + "Answer:" + answer`` for the correct and
the propagated answer, one patch per (layer, group) for ``--layers`` layers x the 4 groups (two rows a patch).

``patched_over_plain`` (the headline; target >= 0.8): patched runs per second (:func:`score_rows` with the
per-row patches, batched by ``--batch``) over plain forwards of the same rows in the same batches (no hooks).
Also reported: the one recording forward of the clean rows, and rows/s of both. Timings alternate (plain,
patched, ...) after one warm-up; medians over ``--repeats``. Prints one JSON line; ``--json PATH`` writes it too.
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
    p.add_argument("--layers", type=int, default=8, help="layers swept (spread over the model; default %(default)s)")
    p.add_argument("--batch", type=int, default=32, help="rows per forward (default %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats of each side (default %(default)s)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the results JSON here")
    return p


def _case(tok):
    from loadbearing.questions.data import arith_few_shot

    msgs = [{"role": "system", "content": "Write one calculation per line. End with a line 'Answer: N'"}]
    for q, a in arith_few_shot():
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": "Start with 3 stickers. Add 3. Subtract 2. How many stickers are there now?"})
    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) + "We start with 3.\n"
    e_text, c_text = prompt + "3 + 3 = 9\n", prompt + "3 + 3 = 6\n"
    span = (len(prompt), len(prompt) + len("3 + 3 = 9"))
    return e_text, span, c_text, span, "4", "7"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    from loadbearing.engine.layers import n_layers
    from steering.patching.align import GROUPS, align_texts, answer_tokens
    from steering.patching.engine import Patch, record, score_rows

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tiny:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from conftest import make_tiny_lm
        from transformers import AutoTokenizer

        from loadbearing.engine.models import dequantised_gguf_dir, embedded_gguf_path

        tok = AutoTokenizer.from_pretrained(str(dequantised_gguf_dir(embedded_gguf_path())[0]))
        lm = make_tiny_lm(tok)
    else:
        from loadbearing.engine.models import load_model

        lm = load_model("smollm2-135m-instruct")
    model, tok = lm.model, lm.tokenizer
    e_text, e_span, c_text, c_span, gold, wrong = _case(tok)
    e_ids, c_ids, al = align_texts(tok, e_text, e_span, c_text, c_span)
    head, a_ok = answer_tokens(tok, gold)
    _, a_bad = answer_tokens(tok, wrong)
    answers = [a_ok, a_bad]
    nh = n_layers(model)
    layers = sorted({round(i * nh / max(1, args.layers - 1)) for i in range(args.layers)})
    groups, clean_of = al.groups(), al.clean_of()
    clean_pos = sorted(clean_of.values())
    col = {p: i for i, p in enumerate(clean_pos)}
    t0 = time.perf_counter()
    with record(model, layers, clean_pos) as rec:
        score_rows(model, [c_ids + head + a for a in answers], answers, len(c_ids) + len(head) - 1, batch_size=2)
    t_record = time.perf_counter() - t0
    patches, rows, row_answers = [], [], []
    for lay in layers:
        for g in GROUPS:
            p = Patch(lay, groups[g], rec.values[lay][[col[clean_of[q]] for q in groups[g]]])
            for a in answers:
                patches.append(p)
                rows.append(e_ids + head + a)
                row_answers.append(a)
    offset = len(e_ids) + len(head) - 1

    def plain():
        return score_rows(model, rows, row_answers, offset, batch_size=args.batch)

    def patched():
        return score_rows(model, rows, row_answers, offset, patches=patches, batch_size=args.batch)

    plain()
    patched()
    tp, tq = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        plain()
        tp.append(time.perf_counter() - t)
        t = time.perf_counter()
        patched()
        tq.append(time.perf_counter() - t)
    mp, mq = statistics.median(tp), statistics.median(tq)
    res = {"bench": "patching", "model": lm.name, "n_rows": len(rows), "row_tokens": len(rows[0]), "layers": layers,
           "batch": args.batch, "threads": torch.get_num_threads(), "plain_rows_s": len(rows) / mp,
           "patched_rows_s": len(rows) / mq, "patched_over_plain": mp / mq, "record_forward_s": t_record,
           "plain_s": tp, "patched_s": tq, "target": 0.8}
    print(f"patched runs/s {res['patched_rows_s']:.1f} vs plain {res['plain_rows_s']:.1f}: "
          f"ratio {res['patched_over_plain']:.3f} (target >= 0.8)")
    line = json.dumps(res)
    print(line)
    if args.json:
        Path(args.json).write_text(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
