"""python -m behavioural.browse RUN_DIR   (the trace browser reads every stage's files, so its home is
``study/browse/page.py``; this shim forwards to it)"""
import runpy

if __name__ == "__main__":
    runpy.run_module("study.browse.page", run_name="__main__", alter_sys=True)
