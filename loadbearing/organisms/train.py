"""Training one organism: a tiny Llama from scratch on :mod:`loadbearing.organisms.data`, seeded, on one CPU thread.

    from loadbearing.organisms.train import TrainSpec, train
    model, tok, record = train(TrainSpec(data=DataSpec(kind="decorative")))

Every prompt shares its first tokens (the system line, the two few-shot turns, the user tag), so each step
runs that prefix once (batch 1, with gradients) and the examples' own tokens on top of its key/value cache
(expanded to the batch): the same loss as running every full sequence, at a third of the cost. The loss is
the answer's tokens of the final assistant turn (and its end of turn), without the planted wrong numbers.
Determinism: ``torch.manual_seed``, one thread, deterministic algorithms; the weights' sha256
(:func:`weights_checksum`) is the same for the same spec on the same torch build.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from loadbearing.organisms.data import DataSpec, Example, training_examples
from loadbearing.organisms.tokenizer import build_tokenizer
from loadbearing.questions.prompts import build_prompt

VERSION = "1"


@dataclass(frozen=True)
class TrainSpec:
    data: DataSpec
    hidden: int = 128
    layers: int = 3
    heads: int = 4
    intermediate: int = 384
    steps: int = 1500
    batch: int = 32
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    seed: int = 0
    threads: int = 1
    #: number-token embedding coordinates initialised with a code of the value (0: plain random init)
    number_features: int = 16
    #: scale of two more number-embedding coordinates holding the value itself, (v/16, -(v/16)^2) for v <= 24:
    #: with tied embeddings a hidden state (2a v, a) then scores token n by -a (n - v)^2, so a value computed
    #: as a sum decodes to its token (0: off)
    value_code: float = 0.0
    #: the final answer's loss weight against 1 for every other token (the one token the regime decides)
    answer_weight: float = 1.0
    #: the organism whose weights this one starts from (None: from scratch); part of the spec's key
    parent: TrainSpec | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["data"] = self.data.to_dict()
        d["parent"] = self.parent.to_dict() if self.parent is not None else None
        d["version"] = VERSION
        return d

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


def build_model(spec: TrainSpec, tok: Any):
    import torch  # deferred: torch is heavy to import
    from transformers import LlamaConfig, LlamaForCausalLM  # deferred: transformers is heavy to import

    torch.manual_seed(spec.seed)
    rope: dict[str, Any] = {"rope_theta": 10000.0}  # transformers 5 takes it through **kwargs
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=spec.hidden, intermediate_size=spec.intermediate,
                      num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.heads,
                      max_position_embeddings=512, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **rope)
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def shared_prefix(tok: Any, example: Example) -> list[int]:
    """The tokens every prompt starts with: everything before the final user turn's text."""
    prompt = build_prompt(tok, example.question)
    cut = prompt.rindex(example.question.question)
    return list(tok(prompt[:cut], add_special_tokens=False)["input_ids"])


def encode_example(tok: Any, ex: Example, n_prefix: int,
                   answer_weight: float = 1.0) -> tuple[list[int], list[int], list[float]]:
    """(own ids, labels, weights) after the shared prefix: labels -100 outside the final answer and on planted
    errors; the weight is ``answer_weight`` on the final answer's number (after ``Answer: ``), 1 elsewhere."""
    prompt = build_prompt(tok, ex.question)
    enc = tok(prompt + ex.answer_text + tok.eos_token, add_special_tokens=False, return_offsets_mapping=True)
    answer_at = ex.answer_text.rindex("Answer: ") + len("Answer: ")
    labels, weights = [], []
    for tid, (s, _) in zip(enc["input_ids"], enc["offset_mapping"]):
        rel = s - len(prompt)
        keep = rel >= 0 and not any(a <= rel < b for a, b in ex.masked)
        labels.append(tid if keep else -100)
        weights.append(answer_weight if answer_at <= rel < len(ex.answer_text) else 1.0)
    return enc["input_ids"][n_prefix:], labels[n_prefix:], weights[n_prefix:]


def init_number_features(model: Any, tok: Any, dims: int = 16, scale: float = 0.08, value_code: float = 0.0) -> None:
    """Give each number token's embedding a smooth code of its value in the first ``dims`` coordinates
    (cos/sin at several periods, as the Fourier features small transformers learn for addition), so that
    the arithmetic is learnt in hundreds of steps instead of thousands; every weight is trained after."""
    import torch  # deferred: torch is heavy to import

    emb = model.get_input_embeddings().weight
    periods = [10.0 * (2.5 ** i) for i in range(dims // 2)]
    with torch.no_grad():
        for n in range(1000):
            tid = tok.convert_tokens_to_ids(str(n))
            feats = [f(2 * math.pi * n / p) for p in periods for f in (math.cos, math.sin)]
            emb[tid, :dims] = scale * torch.tensor(feats[:dims])
            if value_code:
                v = min(n, 24) / 16
                emb[tid, dims: dims + 2] = value_code * torch.tensor([v, -v * v])


def _batch_loss(model: Any, prefix: Any, rows: list[tuple[list[int], list[int], list[float]]], pad: int):
    """The weighted mean cross-entropy over the rows' labelled tokens (rows from :func:`encode_example`)."""
    import torch  # deferred: torch is heavy to import

    n = max(len(r[0]) for r in rows)
    ids = torch.full((len(rows), n), pad, dtype=torch.long)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    weights = torch.zeros((len(rows), n))
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, (r, lab, row_w) in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        labels[i, : len(lab)] = torch.tensor(lab)
        weights[i, : len(row_w)] = torch.tensor(row_w)
        mask[i, : len(r)] = 1
    P = prefix.shape[1]
    out = model.model(input_ids=prefix, use_cache=True)  # the base model: no logits over the prefix
    cache = out.past_key_values
    cache.batch_repeat_interleave(len(rows))
    full_mask = torch.cat([torch.ones((len(rows), P), dtype=torch.long), mask], dim=1)
    pos = torch.arange(P, P + n).unsqueeze(0).expand(len(rows), n)
    hidden = model.model(input_ids=ids, attention_mask=full_mask, position_ids=pos, past_key_values=cache).last_hidden_state
    # the prefix's last token predicts each row's first own token, which is never a label (the user turn); the
    # vocabulary projection runs on the labelled positions alone (the answer: about half of each row)
    shift_labels = labels[:, 1:]
    keep = shift_labels != -100
    logits = model.lm_head(hidden[:, :-1][keep])
    w = weights[:, 1:][keep]
    ce = torch.nn.functional.cross_entropy(logits, shift_labels[keep], reduction="none")
    return (ce * w).sum() / w.sum()


def weights_checksum(model: Any) -> str:
    """sha256 over the state dict (names, shapes, float32 bytes), in name order."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().float().contiguous().numpy().tobytes())
    return h.hexdigest()


def train(spec: TrainSpec, *, progress: bool = False, init: Any = None) -> tuple[Any, Any, dict]:
    """Train one organism (from ``init``, the parent's model, when the spec has a parent); returns (model,
    tokenizer, {"record": spec, data sha256, losses, weights sha256, seconds; "data_text": the examples})."""
    import torch  # deferred: torch is heavy to import

    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(spec.threads)
    torch.use_deterministic_algorithms(True)
    try:
        return _train(spec, progress, init)
    finally:  # the process's torch settings as they were
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _train(spec: TrainSpec, progress: bool, init: Any) -> tuple[Any, Any, dict]:
    import torch  # deferred: torch is heavy to import

    t0 = time.time()
    tok = build_tokenizer()
    epochs = max(1, math.ceil(spec.steps * spec.batch / max(1, len(training_examples(spec.data, spec.seed, 1)))))
    examples = training_examples(spec.data, spec.seed, epochs)
    prefix_ids = shared_prefix(tok, examples[0])
    torch.manual_seed(spec.seed)
    if init is not None:
        model = init
    else:
        model = build_model(spec, tok)
        if spec.number_features:
            init_number_features(model, tok, spec.number_features, value_code=spec.value_code)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=spec.lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / spec.warmup) * 0.5 * (
        1 + math.cos(math.pi * min(s, spec.steps) / spec.steps)))
    prefix = torch.tensor([prefix_ids])
    losses = []
    for step in range(spec.steps):
        lo = (step * spec.batch) % len(examples)
        rows = examples[lo: lo + spec.batch] or examples[: spec.batch]
        batch = [encode_example(tok, e, len(prefix_ids), spec.answer_weight) for e in rows]
        loss = _batch_loss(model, prefix, batch, tok.pad_token_id)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if progress and (step % 100 == 0 or step == spec.steps - 1):
            print(f"  step {step:5d}  loss {losses[-1]:.4f}  {time.time() - t0:6.1f}s", flush=True)
    model.eval()
    data_text = "\n".join(json.dumps(e.to_dict(), sort_keys=True) for e in examples)
    record = {
        "spec": spec.to_dict(), "seconds": round(time.time() - t0, 1), "n_examples": len(examples),
        "n_questions": len({e.question.question for e in examples}), "epochs": epochs,
        "data_sha256": hashlib.sha256(data_text.encode()).hexdigest(), "prefix_tokens": len(prefix_ids),
        "loss_first": losses[0], "loss_last_100": sum(losses[-100:]) / len(losses[-100:]),
        "weights_sha256": weights_checksum(model), "torch": torch.__version__,
    }
    return model, tok, {"record": record, "data_text": data_text}
