"""The whole study on one model, end to end: behaviour -> labels -> activations -> probes -> steering -> report.

    python -m study --output-dir runs/study          # what `make demo` runs (embedded SmolLM2, CPU)
    python -m study --resume runs/study              # continue after any interruption, with the stored settings
    python -m study.report runs/study                # rewrite report.md / report.txt from the stage outputs

Modules: :mod:`study.config` (the study's settings, stored in ``DIR/study.json``), :mod:`study.stages` (each
stage called as a library function, asked by its own ``is_complete``), :mod:`study.driver` (the CLI),
:mod:`study.report` (joins each stage's own rendered summary; :mod:`study.report.html` writes it as ``report.html``),
:mod:`study.browse` (the trace browser; its data from :mod:`study.browse.data`, its page in ``study/browser/``).
Nothing is loaded at import time.
"""
from __future__ import annotations

__all__ = ["StudyConfig", "run_study", "write_report"]


def __getattr__(name: str):  # lazy: importing the package loads no stage
    if name == "StudyConfig":
        from study.config import StudyConfig  # deferred: lazy package (PEP 562), importing study loads no stage

        return StudyConfig
    if name == "run_study":
        from study.driver import run_study  # deferred: lazy package (PEP 562), importing study loads no stage

        return run_study
    if name == "write_report":
        from study.report.write import write_report  # deferred: lazy package (PEP 562), importing study loads no stage

        return write_report
    raise AttributeError(name)
