"""python -m behavioural.paper_import SRC --output-dir RUN_DIR (see :mod:`behavioural.paper_import`)"""
import sys

from behavioural.paper_import.cli import main

sys.exit(main())
