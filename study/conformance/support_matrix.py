"""python -m study.conformance.support_matrix [--output docs/support-matrix.md]   (``make support-matrix``)

Writes the support matrix: every architecture family (:data:`loadbearing.engine.families.FAMILIES`, each a
tiny random model saved with the embedded model's tokenizer and loaded by ``load_model(DIR)``) x every path
of :mod:`study.conformance`, each cell ✓ (identical to transformers' own computation), ✗ with the first
difference, or n.a. with the reason. The same checks as ``tests/test_conformance.py``; prints each family's
line as it goes and exits 1 when any cell is ✗.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from loadbearing.cli import OneLineParser, UsageError, run_cli
from loadbearing.engine.families import FAMILIES, INIT_RANGE, WINDOW, save_family
from loadbearing.files import atomic_write_text
from study.conformance.matrix import PATHS, chat_inputs, run_checks

DEFAULT_OUTPUT = "docs/support-matrix.md"
MARK = {"pass": "✓", "fail": "✗", "n.a.": "n.a."}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m study.conformance.support_matrix", description=__doc__.split("\n\n")[1],
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    o = p.add_argument_group("output")
    o.add_argument("--output", default=DEFAULT_OUTPUT, help="markdown file to write (default %(default)s)")
    o.add_argument("--families", default=None, help="comma-separated families (default: all)")
    return p


def _cell(r) -> str:
    return MARK[r.status] + (f" {r.detail}".replace("|", "/") if r.status != "pass" and r.detail else "")


def render(rows: dict[str, list], seconds: float, command: str) -> str:
    lines = ["# Support matrix: architecture families x toolkit paths", "",
             f"Written by `{command}` (`make support-matrix`) in {seconds:.0f} s; do not edit by hand. Each family is "
             f"a tiny random model (2 blocks, d_model 32, initializer range {INIT_RANGE}, the embedded model's "
             f"tokenizer and chat template, loaded by `load_model(DIR)`); windowed families have a {WINDOW}-token "
             "sliding window, shorter than every input. ✓: identical to transformers' own computation (generation: "
             "one-at-a-time greedy `generate`; capture: an `output_hidden_states` forward; steering, patching and "
             "forced answers: their identity and one-at-a-time references, see `study/conformance/matrix.py`); ✗: the "
             "first difference; n.a.: the path does not apply, and why. The same checks run on your own model with "
             "`cot-selfcheck --model MODEL` (`python -m loadbearing.selfcheck`).", "",
             "| family | exercises | " + " | ".join(PATHS) + " |",
             "|---|---|" + "---|" * len(PATHS)]
    for name, results in rows.items():
        by = {r.path: r for r in results}
        lines.append(f"| {name} (`{FAMILIES[name].model_type}`) | {FAMILIES[name].note} | "
                     + " | ".join(_cell(by[p]) if p in by else "not run" for p in PATHS) + " |")
    lines += ["", "Prefix sharing on windowed families: a batch shares its prefixes only while its padded width plus "
              "`max_new_tokens` stays inside the sliding window (`loadbearing.engine.batching.sharing_fits`); the "
              "run manifest's `model.prefix_sharing` records the rule and `model.sliding_window` the window. "
              "Gemma-2 (attention soft-capping) loads with `eager` attention (`model.attn_implementation`).", ""]
    return "\n".join(lines)


def run(families: list[str], output: Path, echo=print) -> int:
    from transformers import AutoTokenizer  # deferred: transformers is heavy to import

    # deferred: tests monkeypatch loadbearing.engine.models.load_model
    from loadbearing.engine.models import dequantised_gguf_dir, embedded_gguf_path, load_model

    d, _ = dequantised_gguf_dir(embedded_gguf_path())
    tok = AutoTokenizer.from_pretrained(str(d))
    rows: dict[str, list] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="support-matrix-") as tmp:
        for name in families:
            lm = load_model(str(save_family(name, tok, Path(tmp) / name)))
            rows[name] = run_checks(lm, chat_inputs(tok, 4))
            bad = [r.line() for r in rows[name] if r.status != "pass"]
            echo(f"{name}: {sum(r.status == 'pass' for r in rows[name])}/{len(rows[name])} pass"
                 + ("".join(f"\n  {b}" for b in bad)))
    cmd = "python -m study.conformance.support_matrix" + ("" if str(output) == DEFAULT_OUTPUT else f" --output {output}")
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(output, render(rows, time.perf_counter() - t0, cmd))
    echo(f"wrote {output}")
    return 1 if any(r.status == "fail" for rs in rows.values() for r in rs) else 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        fams = list(FAMILIES) if args.families is None else [f.strip() for f in args.families.split(",") if f.strip()]
        unknown = [f for f in fams if f not in FAMILIES]
        if unknown:
            raise UsageError(f"--families names unknown families {', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
        return run(fams, Path(args.output))

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
