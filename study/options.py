"""The options of ``python -m study`` (argument groups; each default said once, in its help).

    python -m study --help
"""
from __future__ import annotations

import argparse

from loadbearing.cli import OneLineParser, add_line_positions, add_output, add_quiet
from study.config import StudyConfig

DESCRIPTION = ("The whole study on one model (or several), end to end: behaviour -> labels -> activations -> probes "
               "-> steering -> report.")
#: options that only steer the command (not settings of a study)
COMMAND_OPTIONS = ("resume", "output_dir", "config", "dry_run")
#: a setting -> its option, where the option is not ``--`` + the setting's name with dashes
OPTION_NAMES = {"positions": "--line-positions"}


def build_parser() -> argparse.ArgumentParser:
    d = StudyConfig(output_dir="")

    p = OneLineParser(prog="python -m study", description=DESCRIPTION,
                      formatter_class=argparse.RawDescriptionHelpFormatter,
                      epilog="A setting left unset follows the model and dataset (study.settings); the resolved "
                             "settings are printed in one block before anything runs.")
    o = p.add_argument_group("study")
    add_output(o, "dir", "new study directory (the run directory of every stage); default runs/study-<time>",
               deprecated=())
    o.add_argument("--resume", default=None, metavar="DIR", help="continue this study directory with its stored settings")
    o.add_argument("--config", default=None, metavar="FILE", help="a study TOML file, or a preset: paper, embedded-cpu "
                   "(options given beside it override the file)")
    o.add_argument("--dry-run", action="store_true", help="check every setting offline, load no model, print the plan")
    o.add_argument("--stages", default=d.stages, help="the stages to run, a comma list (default: behaviour,labels,"
                   "gradient,activations,probes,steering,browser; optional: early_answer,filler,paraphrase,resample,"
                   "receiver_heads,suppression,patch), or all")
    o.add_argument("--patch-layers", default=d.patch_layers, help="--stages patch: hidden-state layers, 'all' or a comma "
                   "list (default %(default)s)")
    o.add_argument("--patch-cases", type=int, default=d.patch_cases, help="--stages patch: at most N C cases, one per "
                   "question (default %(default)s)")
    m = p.add_argument_group("model")
    m.add_argument("--model", default=d.model, help=f"model for every stage (default {d.model})")
    m.add_argument("--dtype", default=d.dtype, help="float32 | float16 | bfloat16 | auto (default: float32 on CPU, "
                   "bfloat16 on GPU)")
    m.add_argument("--quantize", default=d.quantize, help="4bit | 8bit (bitsandbytes)")
    m.add_argument("--device", default=d.device, help="cpu | cuda | cuda:N | auto (--dry-run checks only the syntax)")
    q = p.add_argument_group("questions")
    q.add_argument("--dataset", default=d.dataset, help=f"gsm8k | mmlu | bbh | arith (default {d.dataset})")
    q.add_argument("--task", default=d.task, help="MMLU subjects, BBH tasks or arith levels, a comma list (default: "
                   "arith's three demo levels; every subject/task of mmlu/bbh)")
    q.add_argument("--data-dir", default=d.data_dir, help="benchmark data directory holding gsm8k/, mmlu/, bbh/ "
                   "(default: the hub)")
    q.add_argument("--max-examples", type=int, default=d.max_examples, help=f"questions (default {d.max_examples})")
    q.add_argument("--n-per-level", type=int, default=d.n_per_level,
                   help="arith: questions generated per level (default 80)")
    q.add_argument("--seed", type=int, default=d.seed, help=f"sampling and perturbation seed (default {d.seed})")
    e = p.add_argument_group("protocol")
    e.add_argument("--strategy", default=d.strategy, help="perturbation strategies, a comma list (default: the "
                   "dataset's, see study.settings)")
    add_line_positions(e, d.positions)
    e.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, help="generation budget (default: 96 for "
                   "the embedded model, the paper's 4096 for any other)")
    e.add_argument("--few-shot", dest="few_shot", action="store_true", default=d.few_shot,
                   help="few-shot turns: the benchmark's own exemplars (default: on for the embedded model)")
    e.add_argument("--no-few-shot", dest="few_shot", action="store_false", help="no few-shot turns")
    g = p.add_argument_group("generation backend (does not change results)")
    g.add_argument("--batch-size", type=int, default=d.batch_size, help=f"generation batch size (default {d.batch_size})")
    g.add_argument("--backend", default=d.backend, help="hf | hf-plain | vllm (default hf)")
    g.add_argument("--tensor-parallel-size", type=int, default=d.tensor_parallel_size, help="vLLM: GPUs to shard over")
    g.add_argument("--gpu-memory-utilization", type=float, default=d.gpu_memory_utilization,
                   help=f"vLLM: fraction of GPU memory (default {d.gpu_memory_utilization})")
    g.add_argument("--pipeline-parallel-size", type=int, default=d.pipeline_parallel_size, help="vLLM: pipeline stages")
    g.add_argument("--data-parallel-size", type=int, default=d.data_parallel_size, help="vLLM: engine replicas")
    g.add_argument("--distributed-executor-backend", default=d.distributed_executor_backend,
                   help="vLLM: mp | ray | uni | external_launcher")
    lab = p.add_argument_group("labels")
    lab.add_argument("--labeller", default=d.labeller, help="rule, judge:MODEL, or a comma list (default rule)")
    lab.add_argument("--final", default=d.final, help="which labeller's label is final (default: the first)")
    pr = p.add_argument_group("probes and steering")
    pr.add_argument("--activation-layers", default=d.activation_layers, metavar="LAYERS",
                    help=f"activations: hidden-state layers to store, 'all' or a comma list (default {d.activation_layers})")
    pr.add_argument("--permutations", type=int, default=d.permutations,
                    help=f"probes: label permutations of the shuffled-label control, 0 = off (default {d.permutations})")
    pr.add_argument("--folds", type=int, default=d.folds, help=f"probes: grouped outer CV folds (default {d.folds})")
    pr.add_argument("--k", default=d.k, help=f"steering: numbers of directions (default {d.k})")
    pr.add_argument("--alphas", default=d.alphas, help=f"steering: strengths relative to the mean residual norm "
                    f"(default {d.alphas}; >= 1 turns SmolLM2 into noise)")
    pr.add_argument("--steer-layers", default=d.steer_layers, help="steering layers (default: the probes' selection)")
    pr.add_argument("--max-cases", type=int, default=d.max_cases, help=f"steering: C cases (default {d.max_cases})")
    pr.add_argument("--per-question", type=int, default=d.per_question,
                    help=f"steering: C cases per question (default {d.per_question})")
    pr.add_argument("--steer-holdout", type=float, default=d.steer_holdout,
                    help=f"fraction of questions kept out of the direction fit; steering uses only those (default "
                         f"{d.steer_holdout})")
    pr.add_argument("--sesoi", type=float, default=d.sesoi,
                    help=f"steering: smallest effect of interest, a fraction of cases (0.10 = 10 points; default "
                         f"{d.sesoi})")
    pr.add_argument("--steer-max-new-tokens", type=int, default=d.steer_max_new_tokens,
                    help="steering budget (default: 64 for the embedded model, 4096 for any other)")
    pr.add_argument("--random-seeds", type=int, default=d.random_seeds,
                    help=f"steering: random-direction seeds (default {d.random_seeds})")
    pr.add_argument("--random-scope", choices=("case", "sweep"), default=d.random_scope,
                    help="steering: case (a fresh random direction per generation) or sweep (each random setting one "
                         f"direction for every case, ranked against the probe's; use >= 19 seeds; default {d.random_scope})")
    pr.add_argument("--steer-operator", default=d.steer_operator, help="steering operators, a comma list: add (the "
                    "directions added at each alpha), ablate (their span projected out: are they necessary?) "
                    f"(default {d.steer_operator})")
    pr.add_argument("--steer-positions", default=d.steer_positions,
                    help="steering: which positions get the vector (continuation, generated, all; think / answer: a "
                         f"thinking model's think block / its answer; default {d.steer_positions})")
    pr.add_argument("--token-positions", default=d.token_positions,
                    help="activations: the stored token positions, a comma list (prefix_last, edit_mean, edit_last, "
                         f"think_mean, think_last; default {d.token_positions})")
    add_quiet(o)
    return p


__all__ = ["COMMAND_OPTIONS", "DESCRIPTION", "OPTION_NAMES", "build_parser"]
