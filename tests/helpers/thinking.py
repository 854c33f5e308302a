"""A thinking model's tokenizer for tests: the embedded tokenizer with R1-distill's think tags and a chat template
that opens the think block (tests/test_steering_audit.py, tests/test_thinking_activations.py)."""
from __future__ import annotations

THINK_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                  "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")


def think_tokenizer(embedded_dir):
    """The embedded tokenizer with ``<think>``/``</think>`` as added tokens and a template that opens the block."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(embedded_dir))
    tok.add_tokens(["<think>", "</think>"])  # added, not special: kept in the decoded text, as R1-distill's are
    tok.chat_template = THINK_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
