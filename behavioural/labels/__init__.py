"""Labelling continuations A/B/C: the stage (``stage``: its public face and command; ``labelling``, ``records``,
``summary``, ``cli``), the rule labeller (``rule``), the judge (``judge``), agreement (``agreement``), annotation
sheets (``sheets``); ``labellers`` gathers the labellers."""
