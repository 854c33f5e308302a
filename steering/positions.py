"""Which positions are steered: the one statement of the rule, for the hook path (:mod:`steering.hooks`) and
the fast path (:mod:`steering.generate`).

    from steering.positions import first_steered, prompt_steering
    first_steered("continuation", prompt_len=12)   # 11: the last prompt token and every later position
    prompt_steering("continuation")                # "last": of a row's own input tokens, only the last one

``positions=`` is one of :data:`POSITIONS`, in the coordinates of the row's sequence (prompt, then generated
tokens; padding is never steered):

* ``"continuation"`` (default): every position whose output predicts a generated token, i.e. the LAST prompt
  token and every generated token. Earlier prompt tokens are never steered, so the prefix the model "read" is
  the unsteered one, while the first generated token is already under steering. (Steering starts at the last
  prompt token because its residual is what produces the first generated token.)
* ``"generated"``: only positions of generated tokens (the first generated token onwards); the first
  generated token itself is then produced unsteered.
* ``"all"``: every position, prompt included.
* ``"think"`` / ``"answer"`` (thinking models): the ``"continuation"`` positions that are inside the think block
  / after it (the rule of :mod:`loadbearing.thinking`: a position is in the think block when, after reading
  it, the last think tag read is ``<think>``; the chat template's own opener counts).

Every generated token is steered under each of the first three; under ``"think"`` / ``"answer"`` only those of
the one phase.
"""
from __future__ import annotations

from steering.errors import SteeringError

POSITIONS = ("continuation", "generated", "all", "think", "answer")
#: the positions that keep one phase of a thinking model's sequence (the continuation rule, one phase)
PHASES = ("think", "answer")

# of a row's own input tokens, which are steered: the last one, none, or all (see prompt_steering)
_PROMPT = {"continuation": "last", "generated": "none", "all": "all", "think": "last", "answer": "last"}


def check_positions(positions: str) -> str:
    """``positions`` itself when it is one of :data:`POSITIONS`, else a :class:`SteeringError`."""
    if positions not in POSITIONS:
        raise SteeringError(f"unknown positions {positions!r}; choose one of {', '.join(POSITIONS)}")
    return positions


def first_steered(positions: str, prompt_len: int) -> int:
    """The absolute index of the first steered position of a sequence whose prompt has ``prompt_len`` tokens:
    every position from it on is steered (``"continuation"``: the last prompt token; ``"generated"``: the first
    generated token; ``"all"``: position 0)."""
    mode = _PROMPT[check_positions(positions)]
    return prompt_len - 1 if mode == "last" else prompt_len if mode == "none" else 0


def prompt_steering(positions: str) -> str:
    """How a forward pass over a row's own input tokens is steered (the same rule as :func:`first_steered`):
    ``"last"`` (only the row's last input token), ``"none"`` or ``"all"`` (every non-pad input token)."""
    return _PROMPT[check_positions(positions)]


def phase_of(positions: str) -> bool | None:
    """The phase ``positions`` keeps: True (think block), False (answer), None (no phase filter)."""
    return {"think": True, "answer": False}.get(check_positions(positions))


__all__ = ["PHASES", "POSITIONS", "check_positions", "first_steered", "phase_of", "prompt_steering"]
