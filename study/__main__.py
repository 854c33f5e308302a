"""python -m study --output-dir runs/study   (see study.driver)"""
import sys

from study.driver import main

if __name__ == "__main__":
    sys.exit(main())
