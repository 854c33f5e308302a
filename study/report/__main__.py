"""python -m study.report  (see :mod:`study.report.write`)"""
import sys

from study.report.write import main

if __name__ == "__main__":
    sys.exit(main())
