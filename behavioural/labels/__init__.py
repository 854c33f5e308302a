"""Labelling continuations A/B/C: the stage, the rule labeller, the judge, agreement, annotation sheets."""
