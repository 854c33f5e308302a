"""The conformance checks beyond generation (see :mod:`study.conformance`): capture engines, steering and
ablation hooks, activation patching and the forced-answer causal tests, each against an independent reference.

* ``capture:<engine>``: :func:`activations.engines.run_batch` (right-padded batch, as the cache runs it) at
  every hidden-state layer and at stored positions (last input token, last and mean of an inner span) equals
  a forward with ``output_hidden_states`` on each row alone; the last layer, which the toolkit takes before
  the final norm, is compared after the model's own final norm with HF's last hidden state.
* ``steer:alpha0``: steering with alpha 0 gives the unsteered records; ``steer:batch``: steering a batch
  (each row its own vector and alpha) equals steering each row alone.
* ``hooks-restored``: a steering and an ablation context left by an exception leave no hook on any module.
Per-layer checks visit every layer of a small model and four layers of a big one (:func:`spread_layers`).

* ``ablation``: under :func:`steering.ablation.ablate` the residual at the steered positions has no component
  along the ablated directions (read by a hook registered after it on the same module).
* ``patching``: patching a run's own clean activations into itself at every layer and position gives its
  logits exactly (bitwise).
* ``early-answer`` / ``filler``: the rows of the forced-answer tests are the same batched as one at a time.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from behavioural.causal.common import Chain, Engine
from loadbearing.engine.generation import encode, generate
from loadbearing.engine.hookpoints import block_hidden, layer_hooks
from loadbearing.engine.layers import d_model, n_layers, unwrap_model
from loadbearing.questions.prompts import split_trace
from loadbearing.records import Baseline
from study.conformance.matrix import NotApplicable, first_difference, records

#: tolerance of a hidden state against the reference, relative to the largest absolute value of that row/layer
CAPTURE_RTOL = 1e-4
#: modules that hold the final norm HF applies to its last ``hidden_states`` entry
FINAL_NORMS = ("model.norm", "model.language_model.norm", "gpt_neox.final_layer_norm", "transformer.ln_f",
               "model.decoder.final_layer_norm", "transformer.norm_f", "model.final_layernorm")


def spread_layers(n: int, first: int = 0) -> list[int]:
    """Hidden-state layers a per-layer check visits: all of them on a small model, else the first, a middle
    and the last two (a 30-block model runs 4 forwards, not 31)."""
    return list(range(first, n + 1)) if n - first < 5 else sorted({first, (first + n) // 2, n - 1, n})


def _final_norm(model):
    mods = dict(unwrap_model(model).named_modules())
    for name in FINAL_NORMS:
        if name in mods:
            return mods[name]
    return None


def _items(lm, texts: Sequence[str]):
    from activations.inputs import Item  # deferred: activations.inputs loads numpy

    items = []
    for t in texts[:4]:
        ids = encode(lm.tokenizer, t)
        n = len(ids)
        a, b = n // 3, max(n // 3 + 2, 2 * n // 3)
        items.append(Item({}, ids, {"prefix_last": (n - 1, n), "edit_last": (b - 1, b), "edit_mean": (a, b)}))
    return items


def capture_check(lm, texts: Sequence[str], engine: str) -> str:
    import torch  # deferred: torch is heavy to import

    from activations.engines import make_engine, run_batch  # deferred: activations.engines loads numpy

    n = n_layers(lm.model)
    layers = list(range(n + 1))
    items = _items(lm, texts)
    positions = ["prefix_last", "edit_last", "edit_mean"]
    eng = make_engine(engine, lm, layers)
    try:
        got = run_batch(eng, items, lm.tokenizer.pad_token_id or 0, positions)  # {pos: [b, n+1, d]}
    finally:
        eng.close()
    norm = _final_norm(lm.model)
    device = next(lm.model.parameters()).device
    for r, it in enumerate(items):
        with torch.inference_mode():
            hs = lm.model(input_ids=torch.tensor([it.ids], device=device), output_hidden_states=True,
                          use_cache=False).hidden_states
        for p in positions:
            s, e = it.spans[p]
            for layer in layers:
                g = torch.as_tensor(got[p][r, layer])
                if layer == n:  # the toolkit's last layer is before the final norm; HF's is after it
                    if e - s != 1 or norm is None:
                        continue
                    with torch.inference_mode():
                        g = norm(g.to(device, hs[-1].dtype)[None, None])[0, 0].float().cpu()
                want = hs[layer][0, s:e].float().mean(0).cpu()
                tol = CAPTURE_RTOL * max(float(want.abs().max()), 1.0)
                err = float((g - want).abs().max())
                if not err <= tol:
                    return f"row {r} layer {layer} position {p}: max |difference| {err:.3g} > {tol:.3g}"
    return ""


def _vectors(lm, n: int, seed: int = 0):
    import numpy as np  # deferred: numpy is heavy to import

    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, d_model(lm.model))).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def steer_checks(lm, texts: Sequence[str], batch_size: int) -> dict[str, Callable[[], str]]:
    import numpy as np  # deferred: numpy is heavy to import

    from steering.generate import generate_steered  # deferred: steering.generate loads numpy

    layer = max(1, n_layers(lm.model) // 2)
    kw: dict[str, Any] = dict(layers=[layer], max_new_tokens=8, progress=False)
    texts = texts[:3]
    v = _vectors(lm, len(texts))
    alphas = np.linspace(2.0, 8.0, len(texts)).astype(np.float32)

    def alpha0() -> str:
        want = records(generate(lm, texts, max_new_tokens=8, batch_size=batch_size, progress=False))
        return first_difference(records(generate_steered(lm, texts, v, 0.0, batch_size=batch_size, **kw)), want)

    def per_row() -> str:
        batched = records(generate_steered(lm, texts, v, alphas, batch_size=batch_size, **kw))
        alone = [records(generate_steered(lm, [t], v[i:i + 1], alphas[i:i + 1], batch_size=1, **kw))[0]
                 for i, t in enumerate(texts)]
        return first_difference(batched, alone)

    return {"steer:alpha0": alpha0, "steer:batch": per_row}


def _hook_count(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def hooks_check(lm, texts: Sequence[str]) -> str:
    from steering.ablation import ablate  # deferred: steering.ablation loads numpy
    from steering.hooks import steer  # deferred: steering.hooks loads numpy

    model = lm.model
    before = _hook_count(model)
    v = _vectors(lm, 2)
    for name, ctx in (("steer", lambda: steer(model, v[0], layers=[1], alpha=2.0)),
                      ("ablate", lambda: ablate(model, v, layers=[1]))):
        try:
            with ctx():
                if _hook_count(model) == before:
                    return f"{name} registered no hook"
                raise KeyError("planted")
        except KeyError:
            pass
        if _hook_count(model) != before:
            return f"{name}: {_hook_count(model) - before} hooks left after an exception"
    return ""


def ablation_check(lm, texts: Sequence[str]) -> str:
    import torch  # deferred: torch is heavy to import

    from steering.ablation import ablate, orthonormal_rows  # deferred: steering.ablation loads numpy

    model = lm.model
    basis = torch.as_tensor(orthonormal_rows(_vectors(lm, 3)))
    seen: list[torch.Tensor] = []
    device = next(model.parameters()).device
    for layer in spread_layers(n_layers(model), first=1):
        with ablate(model, basis.numpy(), layers=[layer], positions="all"), \
                layer_hooks(model, {layer: lambda m, a, o: seen.append(block_hidden(o))}):
            ids = torch.tensor([encode(lm.tokenizer, texts[0])], device=device)
            with torch.inference_mode():
                model(input_ids=ids, use_cache=False)
        out = seen[-1][0].float().cpu()  # [pos, d_model]
        left = float((out @ basis.T).abs().max())
        tol = 1e-4 * max(float(out.abs().max()), 1.0)
        if not left <= tol:
            return f"layer {layer}: component {left:.3g} left along the ablated directions (> {tol:.3g})"
    return ""


def patching_check(lm, texts: Sequence[str]) -> str:
    import torch  # deferred: torch is heavy to import

    # deferred: steering.patching.engine loads numpy, torch
    from steering.patching.engine import Patch, forward_logits, patched, record

    model = lm.model
    clean_ids, other_ids = encode(lm.tokenizer, texts[0]), encode(lm.tokenizer, texts[2 % len(texts)])
    width = min(len(clean_ids), len(other_ids))
    clean_ids, other_ids = clean_ids[:width], other_ids[:width]
    everywhere = list(range(width))
    layers = spread_layers(n_layers(model))
    with record(model, layers, everywhere) as rec:
        clean = forward_logits(model, [clean_ids], 0)
    for layer in layers:
        with patched(model, [Patch(layer, everywhere, rec.values[layer])]):
            again = forward_logits(model, [clean_ids], 0)
        if not torch.equal(again, clean):
            return f"layer {layer}: patching the clean run into itself changed its logits by " \
                   f"{float((again - clean).abs().max()):.3g}"
    if layers[-1] > 0:  # and the last layer's clean states restore the clean logits on another input
        with patched(model, [Patch(layers[-1], everywhere, rec.values[layers[-1]])]):
            moved = forward_logits(model, [other_ids], 0)
        if not torch.allclose(moved, clean, atol=1e-4 * max(float(clean.abs().max()), 1.0), rtol=0):
            return "patching the last layer's clean states into another input did not give the clean logits"
    return ""


def forced_checks(lm, texts: Sequence[str], batch_size: int) -> dict[str, Callable[[], str]]:
    from behavioural.causal import early_answer, filler  # deferred: behavioural.causal loads numpy

    traces = ["Start = 4\n4 + 3 = 7\n7 - 2 = 5\nAnswer: 5", "We start with 7.\n7 + 5 = 12\nAnswer: 12"]
    chains = []
    for i, tr in enumerate(traces):
        prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": f"question {i}"}], tokenize=False,
                                                  add_generation_prompt=True)
        t = split_trace(tr, "arith", None)
        b = Baseline(question_id=f"q{i}", dataset="arith", task=None, difficulty=None, question=f"question {i}",
                     prompt=prompt, prompt_tokens=0, trace=tr, lines=tuple(t.lines), answer_line=t.answer_line,
                     parsed_answer=tr.rsplit(" ", 1)[1], gold=tr.rsplit(" ", 1)[1], correct=True, eligible=True,
                     reason="eligible", finish_reason="answer_line", new_tokens=0)
        chains.append(Chain(b, t))
    cfgs = {early_answer: early_answer.EarlyAnswerConfig(run_dir="", max_answer_tokens=4),
            filler: filler.FillerConfig(run_dir="", fillers=("dots",), fractions=(0.5, 1.0), max_answer_tokens=4)}

    def same(mod) -> str:
        cfg = cfgs[mod]
        jobs = mod.plan(cfg, chains, None)
        rows = mod.execute(cfg, jobs, Engine(lm, batch_size=batch_size, progress=False))
        alone = [mod.execute(cfg, [j], Engine(lm, batch_size=1, progress=False))[0] for j in jobs]
        return first_difference(rows, alone)

    return {"early-answer": lambda: same(early_answer), "filler": lambda: same(filler)}


def model_checks(lm, texts: Sequence[str], batch_size: int) -> dict[str, Callable[[], str]]:
    """Every non-generation check as ``{path: check}`` (see the module docstring)."""
    def capture(engine: str) -> Callable[[], str]:
        return lambda: _capture(lm, texts, engine)

    checks = {f"capture:{e}": capture(e) for e in ("hf", "nnsight", "transformer-lens")}
    checks |= steer_checks(lm, texts, batch_size)
    checks["hooks-restored"] = lambda: hooks_check(lm, texts)
    checks["ablation"] = lambda: ablation_check(lm, texts)
    checks["patching"] = lambda: patching_check(lm, texts)
    return checks | forced_checks(lm, texts, batch_size)


def _capture(lm: Any, texts: Sequence[str], engine: str) -> str:
    from activations.inputs import CacheError  # deferred: activations.inputs loads numpy

    try:
        return capture_check(lm, texts, engine)
    except CacheError as e:
        if "does not support" in str(e):
            raise NotApplicable(str(e)) from None
        raise
