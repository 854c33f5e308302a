"""python -m behavioural.label RUN_DIR   (the command's home is ``behavioural/labels/stage.py``)"""
import runpy

if __name__ == "__main__":
    runpy.run_module("behavioural.labels.stage", run_name="__main__", alter_sys=True)
