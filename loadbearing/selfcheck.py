"""python -m loadbearing.selfcheck --model MODEL [--device cuda] [--dtype ...] [--quantize ...]   (the check runs
every stage's paths, so its home is ``study/conformance/selfcheck.py``; this shim forwards to it)"""
import runpy

if __name__ == "__main__":
    runpy.run_module("study.conformance.selfcheck", run_name="__main__", alter_sys=True)
