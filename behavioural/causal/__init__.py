"""The field's other causal tests of a chain of thought, run on a behavioural run's eligible baselines beside
edit-and-continue (docs/causal-tests.md):

* :mod:`behavioural.causal.early_answer` - cut the chain after each line and force the answer (AOC);
* :mod:`behavioural.causal.filler` - the chain replaced by as many filler tokens;
* :mod:`behavioural.causal.paraphrase` - the chain so far rewritten by a paraphraser, then continued.

Shared pieces (eligible chains, the forced answer, the stage driver) are in :mod:`behavioural.causal.common`;
the AOC and its agreement with propagation in :mod:`behavioural.causal.aoc`. The commands are
``python -m behavioural.causal.early_answer RUN_DIR`` (``filler``, ``paraphrase``). Importing loads no model.
"""
