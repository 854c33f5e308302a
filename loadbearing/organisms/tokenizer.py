"""The organisms' tokenizer: a word-level ``PreTrainedTokenizerFast`` built in-process, with a ChatML template.

    from loadbearing.organisms.tokenizer import build_tokenizer
    tok = build_tokenizer()
    tok.apply_chat_template([{"role": "user", "content": "Start with 2. Add 1. What is the result?"}],
                            tokenize=False, add_generation_prompt=True)

Pieces (one token each): a word with its leading space (``" start"``), a bare number of up to three digits
(``"12"``: the same token wherever it stands, so a value written in a line and copied into the next is one
token), and any other single character (``" "``, ``"\\n"``, ``"+"``). The vocabulary is every word the arith
prompts use, every number 0-999 and the printable ASCII characters; a word outside it (``" following"``, an
edit's text) becomes ``<unk>`` for the word and is still decoded losslessly from the input text's offsets.
Nothing is trained here, so the tokenizer is the same on every machine.
"""
from __future__ import annotations

import re
import string

from loadbearing.questions.arith import ARITH_ENTITIES, ARITH_WORDINGS
from loadbearing.questions.prompts import FORMAT_INSTRUCTIONS

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ("<pad>", "<unk>", "<|im_start|>", "<|im_end|>")
#: a word with its leading space, a bare number (1-3 digits), any other single character
PIECE = r" ?[A-Za-z]+|\d{1,3}|[\s\S]"
_PIECE_RE = re.compile(PIECE)


def _words() -> list[str]:
    texts = [FORMAT_INSTRUCTIONS["arith"], "system user assistant", "We start with Answer Add Subtract",
             "How many are there now"]
    texts += [a + " " + b for a, b in ARITH_WORDINGS] + [a + " " + b for a, b in ARITH_ENTITIES]
    words: set[str] = set()
    for t in texts:
        for w in re.findall(r"[A-Za-z]+", t):
            words.update((w, " " + w))
    return sorted(words)


def vocabulary() -> dict[str, int]:
    pieces = list(SPECIALS) + [c for c in string.printable if c not in "\x0b\x0c\r"]
    pieces += [str(n) for n in range(1000) if str(n) not in pieces] + [w for w in _words() if w not in pieces]
    return {p: i for i, p in enumerate(pieces)}


def build_tokenizer():
    """The organisms' tokenizer (``PreTrainedTokenizerFast``; eos = ``<|im_end|>``, pad = ``<pad>``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers  # deferred: heavy
    from transformers import PreTrainedTokenizerFast  # deferred: transformers is heavy to import

    core = Tokenizer(models.WordLevel(vocabulary(), unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=None, eos_token="<|im_end|>", unk_token="<unk>",
                                  pad_token="<pad>", additional_special_tokens=["<|im_start|>"],
                                  clean_up_tokenization_spaces=False)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def pieces(text: str) -> list[str]:
    """The pieces ``text`` splits into (what the tokenizer's pre-tokenizer does, for tests and counting)."""
    return _PIECE_RE.findall(text)
