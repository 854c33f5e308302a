"""The options of ``python -m study`` (argument groups; each default said once, in its help).

    python -m study --help
"""
from __future__ import annotations

import argparse

from loadbearing.stage.parser import extra, parser_from_config
from study.config import GROUPS, StudyConfig

DESCRIPTION = ("The whole study on one model (or several), end to end: behaviour -> labels -> activations -> probes "
               "-> steering -> report.")
#: options that only steer the command (not settings of a study)
COMMAND_OPTIONS = ("resume", "output_dir", "config", "dry_run")
#: a setting -> its option, where the option is not ``--`` + the setting's name with dashes
OPTION_NAMES = {"positions": "--line-positions"}


#: the options that are not :class:`StudyConfig` settings: they choose how the command runs
EXTRAS = (
    extra("--resume", default=None, metavar="DIR", group="study",
          help="continue this study directory with its stored settings"),
    extra("--config", default=None, metavar="FILE", group="study",
          help="a study TOML file, or a preset: paper, embedded-cpu (options given beside it override the file)"),
    extra("--dry-run", action="store_true", group="study",
          help="check every setting offline, load no model, print the plan"),
)
#: the order the options are added in (``usage:``'s; ``--help`` lists them by group)
ORDER = ("output_dir", "resume", "config", "dry_run", "stages", "patch_layers", "patch_cases", "model", "dtype",
         "quantize", "device", "dataset", "task", "data_dir", "max_examples", "n_per_level", "seed", "strategy",
         "positions", "max_new_tokens", "few_shot", "batch_size", "backend", "tensor_parallel_size",
         "gpu_memory_utilization", "pipeline_parallel_size", "data_parallel_size", "distributed_executor_backend",
         "labeller", "final", "activation_layers", "permutations", "folds", "k", "alphas", "steer_layers", "max_cases",
         "per_question", "steer_holdout", "sesoi", "steer_max_new_tokens", "random_seeds", "random_scope",
         "steer_operator", "steer_positions", "token_positions", "quiet")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser: :class:`StudyConfig`'s fields and :data:`EXTRAS`."""
    return parser_from_config(StudyConfig, prog="python -m study", description=DESCRIPTION, raw_description=True,
                              epilog="A setting left unset follows the model and dataset (study.settings); the "
                                     "resolved settings are printed in one block before anything runs.",
                              groups=GROUPS, extras=EXTRAS, help_order=ORDER)


__all__ = ["COMMAND_OPTIONS", "DESCRIPTION", "EXTRAS", "OPTION_NAMES", "ORDER", "build_parser"]
