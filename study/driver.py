"""The study driver: every stage in order on one directory, each skipped when its own output is complete.

    python -m study --output-dir runs/study          # the README's `make demo` (embedded SmolLM2, CPU)
    python -m study --resume runs/study              # continue after any interruption (SIGKILL included)

Each stage is called as a library function with its config dataclass (:mod:`study.stages`); a stage whose
output its own ``is_complete`` accepts is skipped, an unfinished one is resumed. The study's settings are
stored in ``DIR/study.json``: ``--resume DIR`` alone continues with them (printed in one line); options given
beside it are compared and a difference is refused, naming each. ``report.md``/``report.txt`` join every
stage's own summary (:mod:`study.report`).
"""
from __future__ import annotations

import functools
import re
import shutil
import sys
import time
from pathlib import Path

from loadbearing.cli import UsageError, check_device, explicit_options, run_cli
from loadbearing.files import RunDirError
from loadbearing.runs import is_fresh_dir
from study.config import STUDY_FILE, StudyConfig, StudyError, read_stored, record_batching, write_stored
from study.cross_run import cross_run_gradient
from study.dryrun.checks import dry_run_checks, estimate_lines, run_line
from study.dryrun.plan import cached_counts, check, generation_bound, plan_text, select_stages
from study.files import _toml, read_config_file, resolve_path, run_dir_of, with_run_model, write_config
from study.options import COMMAND_OPTIONS, OPTION_NAMES, build_parser
from study.settings import resolve, settings_block
from study.stages.checks import behaviour_reason, read_skipped, write_skipped


def _file_errors(msg: str) -> str:
    """An option name in a message about a study file becomes the file's key (``--max-examples`` -> max_examples)."""
    return re.sub(r"--([a-z][a-z-]*)", lambda m: "key " + m.group(1).replace("-", "_"), msg)


def configs_from_argv(argv: list[str] | None) -> tuple[list[StudyConfig], bool, bool, str | None]:
    """(configs, resume, dry_run, the study file's name) from the command line. One config, or one per run of
    a several-run study file. On --resume, the stored settings with explicit options compared."""
    parser = build_parser()
    args = parser.parse_args(argv)
    explicit = explicit_options(parser, argv) - set(COMMAND_OPTIONS)
    if args.resume and args.output_dir and Path(args.resume) != Path(args.output_dir):
        raise UsageError("--resume and --output-dir name different directories; pass only --resume DIR")
    if args.resume and args.config:
        raise UsageError("--resume continues with the stored settings; drop --config")
    given = {k: v for k, v in vars(args).items() if k not in COMMAND_OPTIONS}
    if args.config:
        try:
            runs = read_config_file(args.config)
        except StudyError as e:
            raise StudyError(_file_errors(str(e))) from None
        cli = {k: given[k] for k in explicit}
        stamp = f"runs/study-{time.strftime('%Y%m%d-%H%M%S')}"
        if len(runs) == 1:
            run = {"output_dir": stamp} | runs[0] | cli | ({"output_dir": args.output_dir} if args.output_dir else {})
            return [StudyConfig(**run)], False, args.dry_run, args.config

        root = args.output_dir or _file_root(args.config) or stamp
        configs = []
        for r in runs:
            r = r | cli
            if args.output_dir or "output_dir" not in r:
                r["output_dir"] = run_dir_of(root, r.get("model", StudyConfig.model), r.get("dataset", StudyConfig.dataset))
            configs.append(StudyConfig(**r))
        return configs, False, args.dry_run, args.config
    if not args.resume:
        out = args.output_dir or f"runs/study-{time.strftime('%Y%m%d-%H%M%S')}"
        return [StudyConfig(output_dir=out, **given)], False, args.dry_run, None
    out = Path(args.resume)
    if not out.is_dir():
        raise StudyError(f"--resume {out}: no such study directory; check the path, or start a new study with "
                         f"--output-dir {out}")
    stored = read_stored(out)
    if stored is None:  # killed before the study stored its settings: the given options (the run's are compared)
        return [StudyConfig(output_dir=str(out), **given)], True, args.dry_run, None
    fields = set(StudyConfig.__dataclass_fields__)
    base = StudyConfig(**{k: v for k, v in stored.items() if k in fields} | {"output_dir": str(out)})
    diffs = [f"{OPTION_NAMES.get(k, '--' + k.replace('_', '-'))} {given[k]!r} differs from the study's {getattr(base, k)!r}"
             for k in sorted(explicit) if k not in StudyConfig.FREE and given[k] != getattr(base, k)]
    if diffs:
        raise StudyError(f"cannot resume {out}: {'; '.join(diffs)}; omit those options to continue with the study's "
                         "own settings, or start a new --output-dir")
    free = {k: given[k] for k in explicit if k in StudyConfig.FREE}
    return [StudyConfig(**(base.to_dict() | free))], True, args.dry_run, None


def _file_root(spec: str) -> str | None:
    root = _toml().loads(resolve_path(spec)[0]).get("output_dir")
    return str(root) if isinstance(root, str) else None


def config_from_argv(argv: list[str] | None) -> tuple[StudyConfig, bool]:
    """(config, resume) of a one-run command line (the old entry point; see :func:`configs_from_argv`)."""
    configs, resume, _, _ = configs_from_argv(argv)
    if len(configs) != 1:
        raise StudyError("this study file holds several runs; use configs_from_argv")
    return configs[0], resume


def describe(c: StudyConfig) -> str:
    return " ".join(f"{k}={v}" for k, v in c.to_dict().items() if k != "output_dir" and v is not None)


def prepare(config: StudyConfig, *, dry_run: bool = False) -> tuple[StudyConfig, dict[str, str], list[str]]:
    """(the resolved config, the rule that filled each unset setting, what the offline check found); refuses
    a setting that cannot run, before anything is loaded or written. A real run also checks the device here."""
    config, rules = resolve(config)
    notes = check(config)
    if not dry_run:
        check_device(config.device)
    return config, rules, notes


def run_study(config: StudyConfig, *, resume: bool = False, log=print, rules: dict[str, str] | None = None,
              config_file: bool = True) -> Path:
    """Run (or resume) every selected stage on ``config.output_dir``; returns the report's path.

    Resuming a study whose every stage is complete and whose report is written logs one line and writes
    nothing (no file's bytes or modification time change)."""
    if rules is None:
        config, rules, _ = prepare(config)
    out = Path(config.output_dir)
    if resume:
        if not out.is_dir():
            raise StudyError(f"--resume {out}: no such study directory; check the path, or start a new study with "
                             f"--output-dir {out}")
        if read_stored(out) is None:  # killed before it was stored: store it now (a refused resume writes nothing)
            write_stored(out, config)
        if is_complete(out, config):
            log(f"{out}: the study is complete (every stage finished, report written); nothing to do. "
                f"Report: {out / 'report.md'}")
            return out / "report.md"
        log(f"resuming {out} with: {describe(config)}")
        return _stages(out, config, log, rules=rules if config_file else None)
    if out.exists():
        raise RunDirError(f"study directory {str(out)!r} already exists; choose a new --output-dir or continue it "
                          f"with --resume {out}")
    # deferred: keeps behavioural (and 10 more modules) out of `python -m study`'s start-up
    from behavioural.run import check_writable

    check_writable(out)
    out.mkdir(parents=True)
    try:
        write_stored(out, config)
        return _stages(out, config, log, rules=rules if config_file else None)
    except BaseException:
        if is_fresh_dir(out):  # refused before any stage wrote anything: leave nothing behind
            shutil.rmtree(out, ignore_errors=True)
        raise


def is_complete(out: str | Path, config: StudyConfig | None = None) -> bool:
    """Whether every selected stage is complete (each asked by its own ``is_complete``) or recorded as skipped
    for too little data, and the report is written: resuming such a study has nothing to do."""
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.report.write import is_written

    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import REGISTRY

    out = Path(out)
    if config is None:
        stored = read_stored(out) or {}
        config = StudyConfig(output_dir=str(out), stages=stored.get("stages"))
    skipped = read_skipped(out)
    for name in select_stages(config.stages):
        st = REGISTRY[name]
        if name not in skipped and not st.is_complete(st.output(out)):
            return False
    return is_written(out)


def _skip_reason(out: Path, name: str, config: StudyConfig, skipped: dict[str, str], selected: list[str]) -> str | None:
    """Why a stage cannot run: a stage it needs was skipped (that reason), or is neither selected nor done,
    or the stage's own data check says so."""
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import REGISTRY

    st = REGISTRY[name]
    for dep in st.needs:
        if dep in skipped:
            why = skipped[dep]
            return why if why.startswith("needs ") else f"needs {dep}, which was skipped: {why}"
        d = REGISTRY[dep]
        if dep not in selected and not d.is_complete(d.output(out)):
            raise StudyError(f"stage {name!r} needs the output of {dep!r}, which is not selected and not there; add "
                             f"{dep} to --stages (e.g. --stages {dep},{name})")
    return st.check(out, config) if st.check else None


def _stages(out: Path, config: StudyConfig, log, rules: dict[str, str] | None = None) -> Path:
    """Every selected stage in order; ``rules`` given: the resolved ``study.toml`` is written once the
    behavioural stage has claimed the directory (it takes only a directory holding nothing but study.json)."""
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.report.write import write_report

    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import REGISTRY

    t0 = time.perf_counter()
    bar = "=" * 8
    selected = select_stages(config.stages)
    skipped = {k: v for k, v in read_skipped(out).items() if k in REGISTRY}
    def write_file() -> None:  # once, after a stage finished (a refused resume writes nothing)
        if rules is not None and not (out / "study.toml").is_file():
            write_config(out, [with_run_model(out, config, rules)])  # the dtype and device the run used

    for name in selected:
        st = REGISTRY[name]
        target = st.output(out)
        if name in skipped:
            log(f"\n{bar} {name}: skipped: {skipped[name]} {bar}")
            continue
        if st.is_complete(target):
            log(f"\n{bar} {name}: already complete, skipped {bar}")
        else:
            reason = _skip_reason(out, name, config, skipped, selected)
            if reason:
                skipped[name] = reason
                write_skipped(out, skipped)
                log(f"\n{bar} {name}: skipped: {reason} {bar}")
                continue
            log(f"\n{bar} {name} {bar}")
            t = time.perf_counter()
            st.run(out, config)
            if not st.is_complete(target):
                raise StudyError(f"stage {name!r} did not complete its output {target}; fix the error above and rerun "
                                 f"with python -m study --resume {out}")
            log(f"{bar} {name} done in {time.perf_counter() - t:.0f} s {bar}")
            record_batching(out, name, target)  # the batch size it ended at (smaller after out of memory)
            write_file()
        if name == "behaviour":
            why = behaviour_reason(out)
            if why:  # nothing after it can run: each later stage that needs it is skipped with this reason
                for later in selected[selected.index(name) + 1:]:
                    if "behaviour" in _closure(later):
                        skipped[later] = f"needs behaviour, which found too little data: {why}"
                write_skipped(out, skipped)
                for later in selected[selected.index(name) + 1:]:
                    log(f"\n{bar} {later}: skipped: {skipped[later]} {bar}")
                write_file()
                path = write_report(out, seconds=time.perf_counter() - t0)
                log(f"\nno eligible baselines: nothing to label, probe or steer. Report: {path}")
                return path
    write_file()
    path = write_report(out, seconds=time.perf_counter() - t0)
    log(f"\nreport: {path}")
    return path


def _closure(name: str) -> set[str]:
    """Every stage ``name`` needs, directly or through another."""
    # deferred: keeps behavioural (and 13 more modules) out of `python -m study`'s start-up
    from study.stages.core import REGISTRY

    seen: set[str] = set()
    todo = list(REGISTRY[name].needs)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += REGISTRY[n].needs
    return seen


def _print_plan(configs: list[tuple[StudyConfig, dict[str, str], list[str]]], say, *, resume: bool = False) -> int:
    """The dry run: per run its settings (a several-run file: one line per run first, then the first run's
    settings in full and each later run's differences from it), what was checked, warnings, plan and estimate
    (:mod:`study.dryrun.checks`). A refusal the real run would make (an existing output directory, one in use)
    raises its error; a warning is printed and the exit status stays 0."""
    several = len(configs) > 1
    checked = [dry_run_checks(c, resume=resume, several=several) for c, _, _ in configs]
    if several:
        say(f"{len(configs)} runs (one line each; the details follow):")
        for i, (c, _, _) in enumerate(configs, 1):
            say(run_line(i, len(configs), c))
    first = configs[0][0].to_dict()
    n_warn = 0
    for i, ((c, rules, notes), (warnings, more)) in enumerate(zip(configs, checked), 1):
        title = "study settings" if not several else f"run {i}/{len(configs)}: {c.model} on {c.dataset}"
        if i == 1 or not several:
            say(settings_block(c, rules, title=title))
        else:
            diff = {k: v for k, v in c.to_dict().items() if v != first.get(k)}
            say(f"---- {title}: the settings of run 1 except: " + ", ".join(f"{k} = {v}" for k, v in diff.items()))
        say("checked offline:\n" + "\n".join(f"  - {n}" for n in [*notes, *more]))
        for w in warnings:
            say(f"warning: {w}")
        n_warn += len(warnings)
        say(plan_text(c))
        say("\n".join(estimate_lines(c)))
    if several:
        total = sum(generation_bound(c) for c, _, _ in configs)
        say(f"all {len(configs)} runs: <= {total:,} generations in total")
    say("dry run: every setting above checked offline; no model loaded, nothing written"
        + (f"; {n_warn} warning{'s' if n_warn != 1 else ''} above" if n_warn else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    where: dict[str, str] = {}
    say = functools.partial(print, flush=True)

    def body() -> int:
        configs, resume, dry_run, config_file = configs_from_argv(argv)
        where["out"] = configs[0].output_dir

        with cached_counts():  # each config's questions loaded once
            try:
                prepared = [prepare(c, dry_run=dry_run) for c in configs]
            except StudyError as e:  # a setting from a study file: name its key, not an option
                raise StudyError(_file_errors(str(e))) if config_file else e from None
            if len({c.output_dir for c, _, _ in prepared}) < len(prepared):
                raise StudyError("two runs of the study file write the same output_dir; give each [[run]] its own")
            if dry_run:
                return _print_plan(prepared, say, resume=resume)
        if not resume or not is_complete(prepared[0][0].output_dir, prepared[0][0]):
            for i, (c, rules, _) in enumerate(prepared, 1):
                say(settings_block(c, rules, title="study settings" if len(prepared) == 1 else
                                   f"run {i}/{len(prepared)}: {c.model} on {c.dataset}"))
        if len(prepared) == 1:
            c, rules, _ = prepared[0]
            run_study(c, resume=resume, log=say, rules=rules)
            return 0
        return _run_several(prepared, config_file, say)

    # every stage's error derives from LoadBearingError, which run_cli reports as one line
    return run_cli(body, interrupted_hint=lambda: f"continue with: python -m study --resume {where.get('out', 'DIR')}")


def _run_several(prepared, config_file: str | None, say) -> int:
    """A several-run study file: each run in turn (a finished one is resumed, i.e. skipped), the resolved
    file written at the root before the first run, and again after the last with the dtype and device each
    run's model was loaded with."""
    root = Path(prepared[0][0].output_dir).parents[1]
    root.mkdir(parents=True, exist_ok=True)
    write_config(root, [(c, r) for c, r, _ in prepared])
    for i, (c, rules, _) in enumerate(prepared, 1):
        say(f"\n#### run {i}/{len(prepared)}: {c.model} on {c.dataset} -> {c.output_dir}")
        run_study(c, resume=Path(c.output_dir).is_dir(), log=say, rules=rules, config_file=False)

    write_config(root, [with_run_model(Path(c.output_dir), c, r) for c, r, _ in prepared])  # what each run used
    cross_run_gradient(root, [Path(c.output_dir) for c, _, _ in prepared], say)
    say(f"\nall {len(prepared)} runs done; the resolved study file: {root / 'study.toml'}")
    return 0


__all__ = ["STUDY_FILE", "build_parser", "config_from_argv", "configs_from_argv", "is_complete", "main", "prepare",
           "run_study"]
