"""Few-shot exemplars of the benchmarks, rewritten into the protocol's format: one step per line, ``Answer: X``.

    python -m loadbearing.questions.exemplars --data-dir ../shared/data    # rewrite exemplars/*.json from the files

* BBH: the official chain-of-thought prompts (``bbh/cot-prompts/<task>.txt``, MIT, Suzgun et al. 2022), three
  per task; "Let's think step by step." dropped, each sentence on its own line, "So the answer is X." ending
  as ``Answer: X``.
* GSM8K: the first :data:`N_GSM8K` train solutions (``gsm8k/train.jsonl``, MIT, OpenAI) with at least three
  steps; the calculator annotations ``<<48/2=24>>`` removed and ``#### 72`` as ``Answer: 72``.
* MMLU: its dev split has no worked solutions, so three exemplars written for this toolkit
  (``exemplars/mmlu.json``, general knowledge, not MMLU questions).

The rewritten exemplars ship as package files (``loadbearing/questions/exemplars/*.json``), so a prompt never
depends on where the data lives; :func:`few_shot_turns` reads them. Importing reads no file.
"""
from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from loadbearing.answers import split_so_the_answer
from loadbearing.cli import OneLineParser, add_output, run_cli
from loadbearing.files import atomic_write_text

N_GSM8K = 3
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


def _steps(text: str) -> list[str]:
    """Each sentence of a worked solution on its own line (blank lines dropped)."""
    out = []
    for line in text.splitlines():
        out += [" ".join(s.split()) for s in _SENTENCE.split(line.strip()) if s.strip()]
    return out


def rewrite_bbh(prompt_file_text: str) -> list[tuple[str, str]]:
    """(question, answer) pairs of one official BBH CoT prompt file, the answer one step per line."""
    body = prompt_file_text.split("-----", 1)[-1]
    blocks = re.split(r"\n\s*\nQ: ", "\n\n" + body.strip().split("\n\nQ: ", 1)[-1] if "\n\nQ: " in body else body)
    out = []
    for block in blocks:
        block = block.strip()
        if block.startswith("Q: "):
            block = block[3:]
        if "\nA: " not in block:
            continue
        question, answer = block.split("\nA: ", 1)
        answer = answer.replace("Let's think step by step.", "", 1).strip()
        split = split_so_the_answer(answer)
        if split is None:
            continue
        lines = _steps(split[0]) + [f"Answer: {split[1]}"]
        out.append((question.strip(), "\n".join(lines)))
    return out


def rewrite_gsm8k(rows: list[dict], n: int = N_GSM8K, min_steps: int = 3) -> list[tuple[str, str]]:
    """(question, answer) pairs of the first ``n`` GSM8K solutions with >= ``min_steps`` steps."""
    out = []
    for row in rows:
        work, final = row["answer"].rsplit("####", 1)
        steps = _steps(re.sub(r"<<[^>]*>>", "", work))
        if len(steps) >= min_steps:
            out.append((row["question"].strip(), "\n".join(steps + [f"Answer: {final.strip().replace(',', '')}"])))
        if len(out) == n:
            break
    return out


@functools.cache
def _load(dataset: str) -> dict[str, Any]:
    f = resources.files("loadbearing.questions") / "exemplars" / f"{dataset}.json"
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}


def few_shot_turns(dataset: str, task: str | None = None) -> list[tuple[str, str]]:
    """The (user, assistant) exemplar turns of a benchmark (BBH: of its task); [] where there are none."""
    d = _load(dataset)
    rows = d.get("tasks", {}).get(task or "", []) if dataset == "bbh" else d.get("exemplars", [])
    return [(q, a) for q, a in rows]


def write_exemplars(data_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Rewrite the BBH and GSM8K exemplars from a data directory into ``out_dir/{bbh,gsm8k}.json``."""
    data, out = Path(data_dir), Path(out_dir)
    bbh = {p.stem: rewrite_bbh(p.read_text(encoding="utf-8")) for p in sorted((data / "bbh" / "cot-prompts").glob("*.txt"))}
    with (data / "gsm8k" / "train.jsonl").open(encoding="utf-8") as f:
        gsm = rewrite_gsm8k([json.loads(line) for line in f])
    written = []
    for name, payload in (("bbh", {"source": "bbh/cot-prompts/*.txt (MIT, Suzgun et al. 2022)", "tasks": bbh}),
                          ("gsm8k", {"source": f"gsm8k/train.jsonl, the first {N_GSM8K} solutions with >= 3 steps "
                                               "(MIT, OpenAI)", "exemplars": gsm})):
        p = out / f"{name}.json"
        atomic_write_text(p, json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
        written.append(p)
    return written


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="python -m loadbearing.questions.exemplars", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="the folder holding bbh/cot-prompts/ and gsm8k/train.jsonl")
    add_output(p, "dir", "where the JSON files go", dest="output", default=str(Path(__file__).parent / "exemplars"))
    args = p.parse_args(argv)
    return run_cli(lambda: print("\n".join(map(str, write_exemplars(args.data_dir, args.output)))) or 0)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["N_GSM8K", "few_shot_turns", "rewrite_bbh", "rewrite_gsm8k", "write_exemplars"]
