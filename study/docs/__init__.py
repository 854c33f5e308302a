"""The docs' measured numbers, rendered from a demo run: ``docs/results.md``, its stored numbers and screenshots.

    make docs RUN=runs/study-<time>        # = python -m study.docs RUN_DIR (study/docs/cli.py)
    make docs-check                        # a fresh demo, then python -m study.docs --check RUN_DIR

:mod:`study.docs.extract` takes the numbers from a run's summary files, :mod:`study.docs.render` lays them out,
:mod:`study.docs.shots` takes the screenshots, :mod:`study.docs.cli` writes and checks.
"""
