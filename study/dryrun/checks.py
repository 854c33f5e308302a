"""What ``python -m study --dry-run`` checks beyond the settings' syntax (issue #32): the cheap checks a real
run would otherwise fail on hours later, and the estimate of what the run costs.

    from study.dryrun.checks import dry_run_checks, estimate_lines, run_line
    warnings, notes = dry_run_checks(config, resume=False, several=False)

* the output directory's state, as the real run would judge it: a new study into an existing directory is
  refused with the real run's error; a resumed one that another process is writing (its ``.lock`` held) is
  refused; a resumed complete study is said to have nothing to do; an unwritable parent is refused;
* ``--backend vllm``: whether ``import vllm`` works here (a warning when not: the file may be meant for
  another machine, but a real run here would stop);
* the device: ``torch.cuda.device_count()`` where torch sees CUDA, against ``--device cuda:N`` and the vLLM
  parallel sizes;
* values out of their useful range (``--alphas`` >= 1 turns the model into noise; more steered cases than
  the behaviour can give; a steering budget below the behaviour's);
* the estimate: generations and new tokens (upper bounds), the activation store's bytes (float32, every layer
  of every perturbed continuation, at the last prefix token), and the time at a stated throughput.

:func:`did_you_mean` is the difflib suggestion the plan's name checks append to their errors.
"""
from __future__ import annotations

import difflib
import errno
import fcntl
import json
import os
from collections.abc import Iterable
from pathlib import Path

from loadbearing.engine.models import ALIASES
from loadbearing.files import RunDirError
from loadbearing.options import parse_float_list, parse_layers
from study.config import StudyConfig, StudyError
from study.dryrun.plan import _sizes, _steer_per_case, generation_bound, select_stages
from study.settings import is_embedded

#: (decoder layers, hidden size) of the models the toolkit names, from their published config.json files
#: (num_hidden_layers, hidden_size); other models: their local config.json, or transformers' offline cache
MODEL_DIMS = {
    "smollm2-135m-instruct": (30, 576),  # HuggingFaceTB/SmolLM2-135M-Instruct
    "google/gemma-2-9b-it": (42, 3584),
    "meta-llama/Llama-3.1-8B-Instruct": (32, 4096),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": (28, 3584),
}
#: new tokens per second the time estimate assumes (stated beside it): the embedded model on this project's
#: 2-core CPU with the HF backend, batch 32 (DESIGN.md: 103.5 tok/s), and an assumed batched rate for a 7-9B
#: model on one H100-class GPU (not measured here)
THROUGHPUT = {"cpu": 100.0, "cuda": 2000.0}
ALPHA_NOISE = 1.0  #: --alphas at or above this (times the mean residual norm) turn SmolLM2 into noise


def _closest(name: str, choices: list[str]) -> str | None:
    lower = {c.lower(): c for c in choices}
    if name.lower() in lower:
        return lower[name.lower()]
    best = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.6)
    return lower[best[0]] if best else None


def did_you_mean(names: str | Iterable[str], choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to each unknown name (case-insensitive difflib;
    several: ``'x' for 'y', ...``), else ''."""
    names = [names] if isinstance(names, str) else list(names)
    choices = list(choices)
    hits = [(n, b) for n in names if (b := _closest(n, choices)) is not None]
    if not hits:
        return ""
    if len(names) == 1:
        return f" (did you mean {hits[0][1]!r}?)"
    return " (did you mean " + ", ".join(f"{b!r} for {n!r}" for n, b in hits) + "?)"


# ------------------------------------------------------------------------------------------ output directory
def _lock_holder(d: Path) -> str | None:
    """Who holds ``d/.lock`` (a live writer), read without writing anything; None when nobody does."""
    lp = d / ".lock"
    if not lp.is_file():
        return None
    try:
        fd = os.open(lp, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        try:
            return lp.read_text(encoding="utf-8").strip() or "a live process"
        except OSError:
            return "a live process"
    finally:
        os.close(fd)


def check_output_dir(c: StudyConfig, *, resume: bool, several: bool) -> str:
    """The output directory's state as the real run judges it (one note), or :class:`StudyError` with the
    real run's refusal. In a several-run file an existing run directory is resumed, as the real run does."""
    out = Path(c.output_dir)
    if out.exists() and not out.is_dir():
        raise StudyError(f"--output-dir {str(out)!r} is a file; choose a new --output-dir")
    if out.is_dir():
        holder = _lock_holder(out)
        if holder:
            raise StudyError(f"{str(out)!r} is in use by another writer ({holder}); wait for it to finish or stop it "
                             "(dry run: a real run would stop here)")
        if not resume and not several:
            raise RunDirError(f"study directory {str(out)!r} already exists; choose a new --output-dir or continue it "
                              f"with --resume {out} (dry run: a real run would stop here)")
        from study.driver import is_complete  # deferred: import cycle study.driver -> study.dryrun.checks

        if is_complete(out, c):
            return f"output {out}: the study is complete; a real run has nothing to do"
        return f"output {out}: exists; a real run resumes it (finished stages skipped)"
    parent = next((p for p in out.parents if p.exists()), Path("."))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StudyError(f"--output-dir {str(out)!r}: {parent} is not writable; choose another --output-dir")
    return f"output {out}: new (created under {parent}, which is writable)"


# ------------------------------------------------------------------------------------------ backend and device
def check_backend(c: StudyConfig) -> list[str]:
    """Warnings: vllm that cannot be imported here for ``--backend vllm``."""
    if c.backend != "vllm":
        return []
    # deferred: tests monkeypatch loadbearing.engine.vllm_backend.import_vllm
    from loadbearing.engine.vllm_backend import VLLMUnavailableError, import_vllm

    try:
        vllm = import_vllm()
    except VLLMUnavailableError as e:
        return [f"--backend vllm: {e} (a real run here stops there; fine only if this file is for another machine)"]
    return [] if vllm else ["--backend vllm: vllm imported but is empty"]


def cuda_count() -> int | None:
    """``torch.cuda.device_count()`` where torch sees CUDA; 0 without CUDA; None without torch."""
    try:
        import torch  # deferred: torch is heavy to import
    except ImportError:
        return None
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken driver reads as no device
        return 0


def check_device(c: StudyConfig, count: int | None = None) -> tuple[list[str], str]:
    """(warnings, the note) for the device: CUDA devices torch sees here against ``--device`` and the vLLM
    parallel sizes."""
    n = cuda_count() if count is None else count
    dev = c.device or "auto"
    seen = "torch not importable" if n is None else f"torch sees {n} CUDA device{'s' if n != 1 else ''}"
    warnings: list[str] = []
    if n is not None and dev.startswith("cuda"):
        idx = int(dev.split(":", 1)[1]) if ":" in dev else 0
        if n == 0:
            warnings.append(f"--device {dev}: {seen} on this machine; a real run here stops (use --device cpu, or run "
                            "it on a GPU machine)")
        elif idx >= n:
            warnings.append(f"--device {dev}: {seen} (cuda:0..cuda:{n - 1}); choose one of those")
    if c.backend == "vllm" and n:
        need = c.tensor_parallel_size * c.pipeline_parallel_size * c.data_parallel_size
        if need > n:
            warnings.append(f"--tensor-parallel-size x --pipeline-parallel-size x --data-parallel-size = {need} GPUs, "
                            f"but {seen}; lower them to fit")
    auto = "" if c.device else f" (auto picks {'cuda' if n else 'cpu'})"
    return warnings, f"device {dev}{auto}: {seen}"


# ------------------------------------------------------------------------------------------ ranges
def check_ranges(c: StudyConfig, n_perturbed: int) -> list[str]:
    """Warnings for values that parse but defeat the study."""
    out = []
    big = [a for a in parse_float_list(c.alphas, "--alphas") if abs(a) >= ALPHA_NOISE]
    if big:
        out.append(f"--alphas {c.alphas}: {', '.join(f'{a:g}' for a in big)} >= {ALPHA_NOISE:g} x the mean residual "
                   "norm turns the model's output into noise (the steering verdict then rests on broken text); "
                   "use values below 1, e.g. 0.25,0.5")
    if n_perturbed and c.max_cases > n_perturbed:
        out.append(f"--max-cases {c.max_cases}: more than the {n_perturbed} perturbed continuations the behaviour can "
                   "give at most; the sweep steers the C cases it finds")
    return out


# ------------------------------------------------------------------------------------------ estimate
def model_dims(model: str) -> tuple[int, int] | None:
    """(decoder layers, hidden size) offline: the known models, a local config.json, or transformers' cache."""
    name = ALIASES.get(model, model)
    if name in MODEL_DIMS or model in MODEL_DIMS:
        return MODEL_DIMS.get(name) or MODEL_DIMS[model]
    cfg = Path(model) / "config.json"
    try:
        if cfg.is_file():
            d = json.loads(cfg.read_text(encoding="utf-8"))
        else:
            from transformers import AutoConfig  # deferred: transformers is heavy to import

            d = AutoConfig.from_pretrained(name, local_files_only=True).to_dict()
    except Exception:  # noqa: BLE001 - not cached, no network: unknown
        return None
    d = d.get("text_config") or d
    layers, hidden = d.get("num_hidden_layers"), d.get("hidden_size")
    return (int(layers), int(hidden)) if layers and hidden else None


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def _duration(s: float) -> str:
    return f"{s / 3600:,.1f} h" if s >= 5400 else f"{s / 60:,.0f} min"


def estimate(c: StudyConfig) -> dict[str, float | int | str | None]:
    """Upper bounds: generations, new tokens, activation-store bytes; the time at :data:`THROUGHPUT`."""
    n, s, p = _sizes(c)
    sel = select_stages(c.stages)
    gens = generation_bound(c)
    behaviour = (n + n * s * p + n * p) * ("behaviour" in sel)
    tokens = behaviour * (c.max_new_tokens or 0) + (gens - behaviour) * (c.steer_max_new_tokens or 0)
    rows = n * s * p if "activations" in sel else 0
    dims = model_dims(c.model)
    if dims and c.activation_layers == "all":
        layers = dims[0] + 1  # the embeddings and every decoder block
    elif dims:
        layers = len(parse_layers(c.activation_layers, "--activation-layers", error=StudyError) or ())
    else:
        layers = 0
    store = rows * layers * dims[1] * 4 if dims else None

    on_gpu = (c.device or "").startswith("cuda") or c.backend == "vllm" or not is_embedded(c.model)
    where = "cuda" if on_gpu and c.device != "cpu" else "cpu"
    rate = THROUGHPUT[where]
    return {"generations": gens, "tokens": tokens, "rows": rows, "layers": layers, "d_model": dims[1] if dims else None,
            "store_bytes": store, "throughput": rate, "where": where, "seconds": tokens / rate if rate else None,
            "steer_per_case": _steer_per_case(c)[0]}


def estimate_lines(c: StudyConfig) -> list[str]:
    """The estimate as the dry run prints it."""
    e = estimate(c)
    store = ("unknown (the model's layer count and width are not known offline)" if e["store_bytes"] is None else
             f"<= {_gb(float(e['store_bytes']))} ({e['rows']:,} perturbed continuations x {e['layers']} layers x "
             f"{e['d_model']} x 4 bytes, float32)")
    hw = ("the embedded model's HF backend on a 2-core CPU (measured, DESIGN.md)" if e["where"] == "cpu"
          else "one H100-class GPU, 7-9B model, batched (assumed, not measured)")
    return ["estimate (upper bounds: most generations stop at their answer line, far below the budget):",
            f"  generations <= {e['generations']:,}; new tokens <= {e['tokens']:,}",
            f"  activation store {store}",
            f"  time <= {_duration(float(e['seconds'] or 0))} at {e['throughput']:,.0f} new tokens/s ({hw})"]


def run_line(i: int, total: int, c: StudyConfig) -> str:
    """One line per run of a several-run file: model, dataset, output, generations, tokens, store, time."""
    e = estimate(c)
    store = "?" if e["store_bytes"] is None else _gb(float(e["store_bytes"]))
    return (f"  {i}/{total} {c.model} on {c.dataset}{f' ({c.task})' if c.task else ''} -> {c.output_dir}: "
            f"<= {e['generations']:,} generations, <= {e['tokens']:,} tokens, store <= {store}, "
            f"<= {_duration(float(e['seconds'] or 0))}")


def dry_run_checks(c: StudyConfig, *, resume: bool, several: bool) -> tuple[list[str], list[str]]:
    """(warnings, notes) of one run's dry run; a refusal the real run would make raises its error."""
    notes = [check_output_dir(c, resume=resume, several=several)]
    warnings = check_backend(c)
    dev_warnings, dev_note = check_device(c)
    warnings += dev_warnings
    notes.append(dev_note)
    n, s, p = _sizes(c)
    warnings += check_ranges(c, n * s * p)
    return warnings, notes


__all__ = ["MODEL_DIMS", "THROUGHPUT", "check_backend", "check_device", "check_output_dir", "check_ranges",
           "cuda_count", "did_you_mean", "dry_run_checks", "estimate", "estimate_lines", "model_dims", "run_line"]
