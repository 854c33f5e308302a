"""``python -m study --dry-run ...``: check every setting offline, load no model, print the plan.

    python -m study --dry-run --model gemma-2-9b-it --dataset bbh --device cuda --backend vllm --tensor-parallel-size 2

:func:`check` validates the dataset, tasks (and the data files when ``--data-dir`` is given), strategies
(one that does not apply to the dataset is refused), positions, stages, labellers and every option; the
model as far as it can offline (the embedded model's package, a known alias, a local path, a GGUF's magic
bytes, the syntax of a hub id) and returns what it could not check. :func:`plan_text` gives, per selected
stage, an upper bound on the model generations it makes (eligibility is known only after the baselines).
The dry run's further checks (the output directory, vllm's importability, the CUDA devices torch sees, values
out of their useful range, the estimate of tokens, store bytes and time) are in :mod:`study.dryrun.checks`.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from loadbearing.cli import check_model_file
from loadbearing.engine.models import ALIASES, DTYPES, QUANTIZE_CHOICES, ModelError, embedded_gguf_path, resolve_name
from loadbearing.options import LINE_POSITIONS, parse_float_list, parse_layers, parse_line_positions, split_list
from loadbearing.questions.data import DATASETS, DataError, load_questions
from loadbearing.questions.loaders import BBH_TASKS, MMLU_SUBJECTS, check_task
from study.config import StudyConfig, StudyError
from study.stages.paper import per_case

BACKENDS = ("hf", "hf-plain", "vllm")
EXECUTORS = ("mp", "ray", "uni", "external_launcher")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_DEVICE = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")


def select_stages(spec: str | None) -> list[str]:
    """The stage names a ``--stages`` value selects, in run order (None: the default stages; "all": every one)."""
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import REGISTRY

    if spec is None:
        return [n for n, st in REGISTRY.items() if st.default]
    if spec.strip() == "all":
        return list(REGISTRY)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [n for n in names if n not in REGISTRY]
    if bad or not names:
        from study.dryrun.checks import did_you_mean  # deferred: import cycle study.dryrun.checks -> study.dryrun.plan

        raise StudyError(f"--stages {spec!r}: unknown stage(s) {', '.join(bad) or '(none given)'}"
                         f"{did_you_mean(bad, [*REGISTRY, 'all'])}; choose from {', '.join(REGISTRY)} (a comma list) or all")
    return [n for n in REGISTRY if n in names]


def check_model(name: str, option: str = "--model") -> str:
    """What is known offline about a model name (one phrase); a name that cannot be a model is refused."""
    try:
        kind, target = resolve_name(name)
    except ModelError as e:
        raise StudyError(f"{option}: {e}") from None
    if kind == "embedded":
        try:
            path = embedded_gguf_path()
        except ModelError as e:
            raise StudyError(f"{option}: {e}") from None
        return f"embedded model, weights at {path}"
    if kind == "gguf":
        check_model_file(name, option=option)
        return f"GGUF file {target} (magic bytes checked)"
    if kind == "local":
        if not (Path(target) / "config.json").is_file():
            raise StudyError(f"{option} {name!r}: the directory has no config.json; pass a Hugging Face model directory")
        return f"local model directory {target} (config.json present; weights not read)"
    if not _HUB_ID.match(target):
        raise StudyError(f"{option} {name!r} is not a Hugging Face id (owner/name), a known alias ({', '.join(ALIASES)}), "
                         "a local directory or a .gguf file")
    alias = f"alias of {target}; " if name in ALIASES else ""
    return f"{alias}hub id {target}: NOT checked offline (that it exists, that you have access, that it fits memory)"


def _check_options(c: StudyConfig) -> None:
    from study.dryrun.checks import did_you_mean  # deferred: import cycle study.dryrun.checks -> study.dryrun.plan

    if c.dtype is not None and c.dtype not in DTYPES:
        raise StudyError(f"--dtype {c.dtype!r}{did_you_mean(c.dtype, DTYPES)}: choose one of {', '.join(DTYPES)}")
    if c.quantize is not None and c.quantize not in QUANTIZE_CHOICES:
        raise StudyError(f"--quantize {c.quantize!r}{did_you_mean(c.quantize, QUANTIZE_CHOICES)}: choose one of "
                         f"{', '.join(QUANTIZE_CHOICES)}")
    if c.backend not in BACKENDS:
        raise StudyError(f"--backend {c.backend!r}{did_you_mean(c.backend, BACKENDS)}: choose one of {', '.join(BACKENDS)}")
    if c.device is not None and not _DEVICE.match(c.device):
        raise StudyError(f"--device {c.device!r}: choose cpu, cuda, cuda:N, mps or auto")
    if c.distributed_executor_backend is not None and c.distributed_executor_backend not in EXECUTORS:
        raise StudyError(f"--distributed-executor-backend {c.distributed_executor_backend!r}: choose one of "
                         f"{', '.join(EXECUTORS)}")
    if c.backend != "vllm":
        for opt in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            if getattr(c, opt) != 1:
                raise StudyError(f"--{opt.replace('_', '-')} {getattr(c, opt)} applies to --backend vllm only; add "
                                 "--backend vllm or drop it")
        if c.distributed_executor_backend is not None:
            raise StudyError("--distributed-executor-backend applies to --backend vllm only; add --backend vllm or drop it")


def _check_labellers(c: StudyConfig) -> list[str]:
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import labellers

    specs = list(labellers(c))
    if not specs or len(set(specs)) != len(specs):
        raise StudyError(f"--labeller {c.labeller!r}: name each labeller once (rule, judge:MODEL; a comma list)")
    notes = []
    for s in specs:
        if s != "rule" and not (s.startswith("judge:") and len(s) > len("judge:")):
            raise StudyError(f"--labeller {s!r}: use rule or judge:MODEL (e.g. judge:smollm2-135m-instruct)")
        if s.startswith("judge:"):
            notes.append(f"judge {s[6:]}: {check_model(s[6:], option='--labeller judge:')}")
    if c.final is not None:
        judges = [s for s in specs if s.startswith("judge:")]
        if c.final not in specs and not (c.final == "judge" and len(judges) == 1):
            raise StudyError(f"--final {c.final!r} is not one of the labellers {', '.join(specs)}; name one of them "
                             "(or 'judge' when there is one judge)")
    return notes


_COUNTS: dict[StudyConfig, tuple[int, str]] | None = None


@contextlib.contextmanager
def cached_counts() -> Iterator[None]:
    """Within the block, each config's questions are loaded (and their notes printed) once: the dry run asks
    for the count in its check, its plan and its estimate."""
    global _COUNTS
    outer = _COUNTS
    _COUNTS = {} if outer is None else outer
    try:
        yield
    finally:
        _COUNTS = outer


def count_questions(c: StudyConfig) -> tuple[int, str]:
    """(questions the study will sample at most, where that count comes from); validates dataset and tasks."""
    if _COUNTS is not None:
        if c not in _COUNTS:
            _COUNTS[c] = _count_questions(c)
        return _COUNTS[c]
    return _count_questions(c)


def _count_questions(c: StudyConfig) -> tuple[int, str]:
    from study.dryrun.checks import did_you_mean  # deferred: import cycle study.dryrun.checks -> study.dryrun.plan

    if c.dataset not in DATASETS:
        raise StudyError(f"--dataset {c.dataset!r}{did_you_mean(c.dataset, DATASETS)}: choose one of {', '.join(DATASETS)}")
    names = [t.strip() for t in str(c.task or "").split(",") if t.strip()]
    try:
        if c.dataset == "arith":
            qs = load_questions("arith", task=c.task, n_per_level=c.n_per_level, seed=c.seed)
            return min(len(qs), c.max_examples), "generated"
        check_task(c.dataset, c.task)
    except DataError as e:  # the task is at fault (the arith levels, or a benchmark's task names)
        valid = {"mmlu": MMLU_SUBJECTS, "bbh": BBH_TASKS}.get(c.dataset, ())
        hint = did_you_mean([t for t in names if t not in valid], valid) if valid else ""
        raise StudyError(f"--task {c.task!r}{hint}: {e}") from None
    if c.data_dir is not None:
        try:
            qs = load_questions(c.dataset, task=c.task, data_dir=c.data_dir)
        except DataError as e:  # the files are at fault
            raise StudyError(f"--data-dir {c.data_dir!r}: {e}") from None
        return min(len(qs), c.max_examples), f"{len(qs)} questions in {c.data_dir}"
    return c.max_examples, "the hub (not checked offline; --data-dir checks the files)"


def check(c: StudyConfig) -> list[str]:
    """Validate everything offline (loads no model); returns what was checked and what could not be."""
    # deferred: keeps behavioural (and 5 more modules) out of `python -m study`'s start-up
    from behavioural.strategies import StrategyError, parse_strategies

    c.validate()
    _check_options(c)
    notes = [f"model: {check_model(c.model)}"]
    n, where = count_questions(c)
    notes.append(f"questions: <= {n} ({where})")
    # deferred: keeps behavioural (and 5 more modules) out of `python -m study`'s start-up
    from behavioural.strategies import STRATEGIES
    from study.dryrun.checks import did_you_mean  # deferred: import cycle study.dryrun.checks -> study.dryrun.plan

    try:
        parse_strategies(c.strategy, c.dataset)
    except StrategyError as e:
        given = [x.strip() for x in str(c.strategy).split(",") if x.strip() and x.strip() not in STRATEGIES]
        raise StudyError(f"--strategy {c.strategy!r}{did_you_mean(given, [*STRATEGIES, 'all'])}: {e}") from None
    given = [x for x in split_list(c.positions) if x not in LINE_POSITIONS]
    parse_line_positions(c.positions, f"--line-positions {c.positions!r}{did_you_mean(given, LINE_POSITIONS)}",
                         error=StudyError)
    notes += _check_labellers(c)
    selected = select_stages(c.stages)
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import REGISTRY

    for name in selected:
        missing = [d for d in REGISTRY[name].needs if d not in selected]
        if missing:
            notes.append(f"stage {name} reads the output of {', '.join(missing)} (not selected): it must be there "
                         "already (a resumed study), else the stage is refused")
    return notes


def _sizes(c: StudyConfig) -> tuple[int, int, int]:
    # deferred: keeps behavioural (and 5 more modules) out of `python -m study`'s start-up
    from behavioural.strategies import parse_strategies

    n, _ = count_questions(c)
    return n, len(parse_strategies(c.strategy, c.dataset)), len(parse_line_positions(c.positions, error=StudyError))


def behaviour_bound(c: StudyConfig) -> str:
    n, s, p = _sizes(c)
    return (f"<= {n} baselines + {n * s * p} perturbed + {n * p} control continuations "
            f"(= {n} x {s} strategies x {p} positions, the control shared by the strategies), "
            f"each <= {c.max_new_tokens} new tokens")


def generation_bound(c: StudyConfig) -> int:
    """Upper bound on the model generations of the behaviour and steering stages together (with the
    paper-design sweep, ``paper_steering``, when selected: its C cases and as many non-C ones)."""
    n, s, p = _sizes(c)
    per = _steer_per_case(c)[0]
    sel = select_stages(c.stages)
    return ((n + n * s * p + n * p) * ("behaviour" in sel) + c.max_cases * per * ("steering" in sel)
            + 2 * c.paper_steer_cases * per_case() * ("paper_steering" in sel))


def _steer_per_case(c: StudyConfig) -> tuple[int, int, int, int, int, list[str]]:
    """(generations per steered case, layers, k values, alphas, k values > 1, operators): the unsteered rerun,
    then per setting the probe's generation and ``random_seeds`` isotropic random ones, plus as many
    covariance-matched random ones for every k > 1 (the sweep adds those when it can read the store); the
    ``add`` settings once per alpha, the ``ablate`` ones once (no alpha)."""
    ks = parse_float_list(c.k, "--k")
    n_k, n_a, n_cov = len(ks), len(parse_float_list(c.alphas, "--alphas")), sum(1 for k in ks if k > 1)
    n_l = len(parse_layers(c.steer_layers, "--steer-layers", allow_all=False, error=StudyError) or [0])
    ops = split_list(c.steer_operator)
    family = n_k * (1 + c.random_seeds) + n_cov * c.random_seeds  # per layer (and alpha): probe + random controls
    per = 1 + n_l * family * (n_a * ("add" in ops) + ("ablate" in ops))
    return per, n_l, n_k, n_a, n_cov, ops


def steering_bound(c: StudyConfig) -> str:
    per, n_l, n_k, n_a, n_cov, ops = _steer_per_case(c)
    cov = f" + {n_cov} k>1 x {c.random_seeds} covariance-matched" if n_cov else ""
    times = " + ".join(([f"{n_a} alphas"] if "add" in ops else []) + (["1 ablation"] if "ablate" in ops else []))
    times = times if len(ops) == 1 else f"({times})"
    return (f"<= {c.max_cases} C cases x {per} (unsteered + {n_l} layer(s) x {times} x ({n_k} k x (probe + "
            f"{c.random_seeds} random){cov})) = {c.max_cases * per} generations, each <= {c.steer_max_new_tokens} "
            "new tokens")


def plan_text(c: StudyConfig) -> str:
    """The selected stages in run order, each with its upper bound on model generations."""
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import REGISTRY

    selected = select_stages(c.stages)
    lines = ["plan (upper bounds: eligibility is known only after the baselines run):"]
    for i, name in enumerate(selected, 1):
        st = REGISTRY[name]
        bound = st.bound(c) if st.bound else None
        lines.append(f"  {i}. {name:<12} {bound or 'no model generations'}")
    lines.append(f"  total: <= {generation_bound(c):,} generations of <= "
                 f"{max(c.max_new_tokens or 0, c.steer_max_new_tokens or 0):,} new tokens")
    skipped = [n for n in REGISTRY if n not in selected]
    if skipped:
        lines.append(f"  not selected: {', '.join(skipped)}")
    return "\n".join(lines)


__all__ = ["BACKENDS", "behaviour_bound", "cached_counts", "check", "check_model", "count_questions", "generation_bound",
           "plan_text", "select_stages", "steering_bound"]
