"""python -m study --output-dir DIR  (this module: each stage as a library call, asked whether it is done)

A :class:`Stage` names its output inside the study directory, asks the stage's own ``is_complete`` whether
that output is finished, runs the stage's library function with a config dataclass (never an argv list),
and renders the stage's own summary (``format_summary(summary, style="text"|"md")``) for the report.

The stages are a registry (:data:`REGISTRY`, in run order; :data:`STAGES` is the same as a tuple): a later
stage (another causal test, patching) is added with :func:`register` and is then selectable by its name in
``--stages`` like every other. ``needs`` names the stages whose output a stage reads; ``check`` says in one
line why there is not enough data for it (the driver then skips it and every stage that needs it, with that
reason). The checks and the skip record live in :mod:`study.stages.checks`.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadbearing.files import read_json, write_json
from loadbearing.options import parse_float_list, parse_layers, parse_line_positions, split_list
from loadbearing.runs import ACTIVATIONS, GENERATIONS, MANIFEST, SKIPPED_STAGE, SUMMARY, Run
from study.browse.page import write_browser
from study.config import StudyConfig, StudyError, read_stored
from study.dryrun.plan import behaviour_bound, steering_bound
from study.stage_entry import Stage
from study.stages import extra as stages_extra
from study.stages import paper as stages_paper
from study.stages.checks import labels_check, probes_check, read_skipped

if TYPE_CHECKING:
    from behavioural.results import BehaviourSummary


# ------------------------------------------------------------------------------------------ behaviour
def _behaviour_settings(c: StudyConfig):
    # deferred: keeps behavioural.protocol (and 7 more modules) out of `python -m study.report`'s start-up
    from behavioural.protocol import Settings

    # deferred: keeps behavioural.strategies (and 4 more modules) out of `python -m study.report`'s start-up
    from behavioural.strategies import StrategyError, parse_strategies

    assert c.max_new_tokens is not None, "resolve the config first (study.settings.resolve)"
    return Settings(model=c.model, dataset=c.dataset, strategies=tuple(parse_strategies(c.strategy, c.dataset)),
                    positions=parse_line_positions(c.positions, error=StrategyError), task=c.task, seed=c.seed,
                    max_examples=c.max_examples,
                    max_new_tokens=c.max_new_tokens, few_shot=c.few_shot, dtype=c.dtype, quantize=c.quantize,
                    data_dir=c.data_dir, batch_size=c.batch_size, backend=c.backend,
                    n_per_level=c.n_per_level if c.dataset == "arith" else None)


def _run_behaviour(out: Path, c: StudyConfig) -> BehaviourSummary:
    # deferred: keeps behavioural.protocol (and 9 more modules) out of `python -m study.report`'s start-up
    from behavioural.run import RunConfig, run_stage

    resume = (out / MANIFEST).is_file()
    return run_stage(RunConfig(settings=_behaviour_settings(c), output_dir=out, resume=resume, device=c.device,
                               tensor_parallel_size=c.tensor_parallel_size,
                               gpu_memory_utilization=c.gpu_memory_utilization,
                               pipeline_parallel_size=c.pipeline_parallel_size,
                               data_parallel_size=c.data_parallel_size,
                               distributed_executor_backend=c.distributed_executor_backend,
                               progress=not c.quiet), echo=None if c.quiet else print)


def _render_behaviour(out: Path, style: str) -> str | None:
    # deferred: keeps behavioural.protocol (and 9 more modules) out of `python -m study.report`'s start-up
    from behavioural.run import format_summary, is_complete

    return format_summary(Run(out).summary() or {}, style=style) if is_complete(out) else None


# ------------------------------------------------------------------------------------------ labels
LABELLING = "rule"  # the labelling's name with the rule labeller alone (the default); with a judge: "judged"


def labellers(c: StudyConfig | None) -> tuple[str, ...]:
    return tuple(split_list(c.labeller if c else "rule"))


def labelling_name(c: StudyConfig | None) -> str:
    return LABELLING if labellers(c) == ("rule",) else "judged"


def _labels_dir(out: Path, c: StudyConfig | None = None) -> Path:
    if c is None:  # the report and the resume check: the study's stored settings say which labelling

        stored = read_stored(out) if out.is_dir() else None
        return out / "labels" / (LABELLING if not stored else labelling_name(StudyConfig(
            output_dir=str(out), labeller=stored.get("labeller", "rule"))))
    return out / "labels" / labelling_name(c)


def _run_labels(out: Path, c: StudyConfig) -> Path:
    # deferred: keeps behavioural.labels (and 11 more modules) out of `python -m study.report`'s start-up
    from behavioural.labels.stage import LabelConfig, label_stage

    d = _labels_dir(out, c)
    return label_stage(LabelConfig(run_dir=out, labellers=labellers(c), final=c.final, name=labelling_name(c),
                                   resume=d.exists(), device=c.device, dtype=c.dtype, quantize=c.quantize,
                                   progress=not c.quiet))


def _render_labels(out: Path, style: str) -> str | None:
    # deferred: keeps behavioural.labels (and 11 more modules) out of `python -m study.report`'s start-up
    from behavioural.labels.stage import format_summary, is_complete

    root = out / "labels"
    parts = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if is_complete(d):
            parts.append(format_summary(read_json(d / SUMMARY), style=style))
    return "\n\n".join(parts) or None


# ------------------------------------------------------------------------------------------ activations
def _store(out: Path) -> Path:
    return out / ACTIVATIONS


def _run_activations(out: Path, c: StudyConfig) -> Path:
    # deferred: tests monkeypatch activations.cache.cache_activations
    from activations.cache import CacheConfig, cache_activations

    return cache_activations(CacheConfig(run_dir=out, layers=c.activation_layers, labels=labelling_name(c),
                                         positions=c.token_positions, conditions="perturbed", resume=True,
                                         device=c.device, progress=not c.quiet))


def _render_activations(out: Path, style: str) -> str | None:
    # deferred: keeps activations (and 12 more modules) out of `python -m study.report`'s start-up
    from activations.cache import format_summary, is_complete, summarize

    if not is_complete(_store(out)):
        return None
    return format_summary(summarize(_store(out)), style=style)


# ------------------------------------------------------------------------------------------ probes
def _probes_dir(out: Path) -> Path:
    return out / "probes"


def _probes_complete(out_dir: Path) -> bool:
    from probes.train import is_complete  # deferred: probes.train loads sklearn

    return bool(is_complete(out_dir))


def _run_probes(out: Path, c: StudyConfig) -> Path:
    from probes.train import ProbeConfig, train  # deferred: tests monkeypatch probes.train.train

    return train(ProbeConfig(store=str(_store(out)), output=str(_probes_dir(out)), folds=c.folds, quiet=c.quiet,
                             steer_holdout=c.steer_holdout, seed=c.seed, probe=c.probe, paper_table=c.paper_table,
                             permutations=c.permutations, command="python -m study"))


def _render_probes(out: Path, style: str) -> str | None:
    from probes.train import RESULTS, format_summary  # deferred: probes.train loads sklearn

    d = _probes_dir(out)
    if not _probes_complete(d):
        return None
    return format_summary(read_json(d / RESULTS), style=style)


# ------------------------------------------------------------------------------------------ steering
def _steer_dir(out: Path) -> Path:
    return out / "steering"


def _run_steering(out: Path, c: StudyConfig) -> dict[str, Any]:
    from steering.sweep.cli import SweepConfig, run_sweep  # deferred: tests monkeypatch steering.sweep.cli.run_sweep

    layers = parse_layers(c.steer_layers, "--steer-layers", allow_all=False, error=StudyError)
    assert c.steer_max_new_tokens is not None, "resolve the config first (study.settings.resolve)"
    cfg = SweepConfig(run_dir=str(out), directions=str(_probes_dir(out)), output=str(_steer_dir(out)), layers=layers,
                      ks=[int(v) for v in parse_float_list(c.k, "--k")], alphas=list(parse_float_list(c.alphas, "--alphas")),
                      random_seeds=c.random_seeds, random_scope=c.random_scope, max_cases=c.max_cases,
                      max_new_tokens=c.steer_max_new_tokens,
                      per_question=c.per_question, sesoi=c.sesoi, seed=c.seed, batch_size=c.batch_size,
                      operators=split_list(c.steer_operator), resume=_steer_dir(out).exists(), device=c.device,
                      progress=not c.quiet, positions=c.steer_positions)
    with steering_backend(c) as fns:
        return run_sweep(cfg, echo=(lambda *_: None) if c.quiet else print, **fns)


@contextlib.contextmanager
def steering_backend(c: StudyConfig) -> Iterator[dict[str, Any]]:
    """The sweep's generate functions for ``c.backend``: none (the HF fast path), or with ``--backend vllm`` one
    :class:`steering.vllm.engine.VLLMSteering` (hooks inside vLLM's workers; the same design and records),
    shut down after the stage."""
    if c.backend != "vllm":
        yield {}
        return
    # deferred: keeps behavioural.protocol (and 9 more modules) out of `python -m study.report`'s start-up
    from behavioural.run import vllm_options
    from steering.vllm.engine import VLLMSteering  # deferred: tests monkeypatch steering.vllm.engine.VLLMSteering

    vs = VLLMSteering(**vllm_options(c))  # type: ignore[arg-type]  # the study config has RunConfig's vLLM fields
    try:
        yield {"generate_fn": vs.add, "ablate_fn": vs.ablate}
    finally:
        vs.shutdown()


def _render_steering(out: Path, style: str) -> str | None:
    # deferred: keeps probes (and 22 more modules) out of `python -m study.report`'s start-up
    from steering.sweep.cli import format_summary

    d = _steer_dir(out)
    if not _steering_complete(d):
        return None
    return format_summary(read_json(d / SUMMARY), style=style)


# ------------------------------------------------------------------------------------------ gradient
def _gradient_dir(out: Path) -> Path:
    return out / "gradient"


def _levels(out: Path) -> list[str]:
    return sorted({b.task or "" for b in Run(out).baselines()} - {""})


def _run_gradient(out: Path, c: StudyConfig) -> dict[str, Any] | None:
    """The difficulty gradient across the study's levels (tasks); a one-level study records why it has none."""
    # deferred: keeps behavioural.gradient (and 6 more modules) out of `python -m study.report`'s start-up
    from behavioural.gradient import GradientConfig, run_gradient

    if len(_levels(out)) < 2:
        _gradient_dir(out).mkdir(exist_ok=True)
        write_json(_gradient_dir(out) / SKIPPED_STAGE, {"reason": "the study covers one task/level: no gradient"})
        return None
    return run_gradient(GradientConfig(runs=(str(out),), output=str(_gradient_dir(out)), seed=c.seed))


def _gradient_complete(d: Path) -> bool:
    # deferred: keeps behavioural.gradient (and 6 more modules) out of `python -m study.report`'s start-up
    from behavioural.gradient import is_complete

    return (d / SKIPPED_STAGE).is_file() or bool(is_complete(d))


def _render_gradient(out: Path, style: str) -> str | None:
    # deferred: keeps behavioural.gradient (and 6 more modules) out of `python -m study.report`'s start-up
    from behavioural.gradient import JSON_NAME, format_summary

    d = _gradient_dir(out)
    if (d / SKIPPED_STAGE).is_file():
        return "One task/level only: no difficulty gradient (see python -m behavioural.gradient)."
    if not _gradient_complete(d):
        return None
    return format_summary(read_json(d / JSON_NAME), style=style)


# ------------------------------------------------------------------------------------------ trace browser
def _browse_file(out: Path) -> Path:
    return out / "browse.html"


def _run_browser(out: Path, c: StudyConfig) -> Path:
    gens = _steer_dir(out) / GENERATIONS
    return write_browser(out, _browse_file(out), steering=gens if gens.is_file() else None)


def _render_browser(out: Path, style: str) -> str | None:
    if not _browse_file(out).is_file():
        return None
    return ("Open [browse.html](browse.html) (self-contained, works offline) to read every trace: filters, search, "
            "j/k keys, permalinks." if style == "md" else f"Open {_browse_file(out)} in a browser to read every trace.")


# The stages' modules are imported when a stage is asked, not when the study is: they pull in h5py, SciPy and
# scikit-learn, which `python -m study --help` and the dry run need not load.
def _behaviour_complete(p: Path) -> bool:
    # deferred: keeps behavioural.protocol (and 9 more modules) out of `python -m study.report`'s start-up
    from behavioural.run import is_complete

    return bool(is_complete(p))


def _labels_complete(p: Path) -> bool:
    # deferred: keeps behavioural.labels (and 11 more modules) out of `python -m study.report`'s start-up
    from behavioural.labels.stage import is_complete

    return bool(is_complete(p))


def _activations_complete(p: Path) -> bool:
    # deferred: keeps activations (and 12 more modules) out of `python -m study.report`'s start-up
    from activations.cache import is_complete

    return bool(is_complete(p))


def _steering_complete(p: Path) -> bool:
    # deferred: keeps probes (and 22 more modules) out of `python -m study.report`'s start-up
    from steering.sweep.cli import is_complete

    return bool(is_complete(p))


def _behaviour_bound(c: StudyConfig) -> str:
    return behaviour_bound(c)


def _steering_bound(c: StudyConfig) -> str:
    return steering_bound(c)


def _labels_bound(c: StudyConfig) -> str | None:
    judges = [s for s in labellers(c) if s.startswith("judge:")]
    return f"<= {len(judges)} x the perturbed continuations (judge calls)" if judges else None


def _labels_check(out: Path, c: StudyConfig) -> str | None:
    return labels_check(out, c)


def _probes_check(out: Path, c: StudyConfig) -> str | None:
    return probes_check(out, c)


REGISTRY: dict[str, Stage] = {}


def _with_skip_reason(name: str, render: Callable[[Path, str], str | None]) -> Callable[[Path, str], str | None]:
    """The stage's own summary, or, where the study skipped it for too little data, that reason in one line."""
    def wrapped(out: Path, style: str) -> str | None:
        why = read_skipped(out).get(name)
        if why:
            return f"**Skipped:** {why}." if style == "md" else f"Skipped: {why}."
        return render(out, style)

    return wrapped


def register(stage: Stage, *, after: str | None = None) -> Stage:
    """Add a stage to the registry (at the end, or right after ``after``); its name is then a --stages name."""
    global STAGES
    if stage.name in REGISTRY:
        raise ValueError(f"a study stage named {stage.name!r} is already registered")
    unknown = [n for n in stage.needs if n not in REGISTRY]
    if unknown:
        raise ValueError(f"stage {stage.name!r} needs unregistered stage(s) {unknown}; register those first")
    stage = dataclasses.replace(stage, render=_with_skip_reason(stage.name, stage.render))
    items = list(REGISTRY.items())
    at = len(items) if after is None else [n for n, _ in items].index(after) + 1
    items.insert(at, (stage.name, stage))
    REGISTRY.clear()
    REGISTRY.update(items)
    STAGES = tuple(REGISTRY.values())
    return stage


STAGES: tuple[Stage, ...] = ()
for _st in (
    Stage("behaviour", "Behaviour: does the edit reach the answer?", lambda o: o,
          _behaviour_complete, _run_behaviour, _render_behaviour, bound=_behaviour_bound),
    Stage("labels", "Labels (A/B/C)", _labels_dir, _labels_complete, _run_labels,
          _render_labels, needs=("behaviour",), check=_labels_check, bound=_labels_bound),
    Stage("gradient", "Difficulty gradient across levels", _gradient_dir, _gradient_complete, _run_gradient,
          _render_gradient, needs=("behaviour",)),
    Stage("activations", "Activations", _store, _activations_complete, _run_activations,
          _render_activations, needs=("labels",), bound=lambda c: "none (one forward pass per perturbed continuation)"),
    Stage("probes", "Probes: can the hidden state predict propagation?", _probes_dir, _probes_complete, _run_probes,
          _render_probes, needs=("activations",), check=_probes_check),
    Stage("steering", "Steering: do the probe directions change the outcome?", _steer_dir,
          _steering_complete, _run_steering, _render_steering, needs=("probes",),
          bound=_steering_bound),
    Stage("browser", "Trace browser", _browse_file, lambda p: p.is_file(), _run_browser, _render_browser,
          needs=("behaviour",)),
):
    register(_st)

# the optional stages (the other causal tests, patching, then the paper-design sweep) after the default ones
for _st in (*stages_extra.STAGES, *stages_paper.STAGES):
    register(_st)
