"""python -m study.docs RUN_DIR | --check [RUN_DIR]   (study/docs/cli.py)"""
import sys

from study.docs.cli import main

if __name__ == "__main__":
    sys.exit(main())
