"""Model organisms: tiny causal LMs whose chain of thought is load-bearing, decorative or graded by construction.

    python -m loadbearing.organisms                 # make organisms: train (or find cached) all three, print their dirs
    python -m loadbearing.organisms --kinds decorative --quiet

    from loadbearing.organisms import organism_dir
    from loadbearing.engine.models import load_model
    lm = load_model(str(organism_dir("load-bearing")))

Each organism is a Llama with a word-level tokenizer and a ChatML template (:mod:`.tokenizer`), trained from
scratch on this CPU (:mod:`.train`) on the toolkit's ``arith`` ladder in its own prompt and answer format with
planted errors (:mod:`.data`); the regimes differ only in the final answer:

* ``load-bearing`` - the answer is the chain's last written value;
* ``decorative`` - the answer is computed from the question, whatever the chain says;
* ``graded`` - load-bearing on the hard levels (:data:`.data.HARD_LEVELS`), decorative on the easy ones.

They are cached like the embedded model (:mod:`.build`), with the training data, the spec and the weights'
checksum beside the weights. This package is part of the shared base: it imports no stage. Why it is built
this way, and what the toolkit's tests find on it: ``docs/organisms.md``.
"""
from __future__ import annotations

from loadbearing.organisms.build import OrganismError, default_spec, organism_dir, read_record, training_data
from loadbearing.organisms.data import HARD_LEVELS, KINDS, DataSpec
from loadbearing.organisms.train import TrainSpec, train, weights_checksum

__all__ = ["HARD_LEVELS", "KINDS", "DataSpec", "OrganismError", "TrainSpec", "default_spec", "organism_dir",
           "read_record", "train", "training_data", "weights_checksum"]
