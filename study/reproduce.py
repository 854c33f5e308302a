"""python -m study.reproduce DIR  (the end of ``make reproduce``: the verdict and the paper's two tables)

``make reproduce`` runs ``python -m study --config reproduce`` (the preset ``study/presets/reproduce.toml``) and
then this, which prints from the study directory's own files, in order:

1. the steering verdict (``steering/summary.json``): null / effect / harm / inconclusive / uninformative at the
   study's SESOI, with each tested setting's own verdict, its parse rate against its random controls' (the
   parse-rate difference, its interval and exact p), its moved-among-parsed difference, 95% interval over
   questions and Holm-adjusted exact p; which settings are uninformative (the answer line broken); the
   held-out cases steered beside the number a null needed (the sweep's simulated power, :mod:`steering.planning.power`);
2. the probe table in the paper's layout (``probes/paper_table.md``, ``probes.train --paper-table``);
3. the steering table in the paper's Table 7 layout (``steering-paper/table7.md``, the small descriptive
   paper-design sweep, :mod:`steering.paper.design`).

A part whose file is missing is named with the stage that writes it; the exit status is 1 then, else 0.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loadbearing.cli import OneLineParser, run_cli
from loadbearing.errors import LoadBearingError
from loadbearing.files import read_json
from loadbearing.runs import SUMMARY

PARTS = (("probes/paper_table.md", "probes (python -m probes.train --paper-table)"),
         ("steering-paper/table7.md", "paper_steering (python -m steering.sweep --design paper)"))


class ReproduceError(LoadBearingError, ValueError):
    """Not a study directory; the message names the fix."""


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def _frac(r: dict[str, Any] | None) -> str:
    r = r or {}
    return f"{r.get('k')}/{r.get('n')}"


def setting_line(d: dict[str, Any]) -> str:
    """One tested setting: its own verdict, moved among parsed and parse rate, each against its control."""
    ctrl = d.get("control") or {}
    diff = d.get("difference") or {}
    ci = diff.get("ci") or [None, None]
    parse = d.get("parse") or {}
    pd = parse.get("difference") or {}
    pci = pd.get("ci") or [None, None]
    p = parse.get("p_value")
    return (f"  {d['key']}: {d.get('setting_verdict') or 'untested'}; parsed {_frac(d.get('coverage_c'))} vs "
            f"{ctrl.get('kind')} control {_frac(ctrl.get('coverage_c'))}, parse difference {_pp(pd.get('estimate'))} "
            f"pp, 95% CI [{_pp(pci[0])}, {_pp(pci[1])}], exact p " + ("n/a" if p is None else f"{p:.3g}")
            + f"; moved among parsed {_frac(d.get('moved'))} vs {_frac(ctrl.get('moved'))}; difference "
            f"{_pp(diff.get('estimate'))} pp, 95% CI [{_pp(ci[0])}, {_pp(ci[1])}] over {diff.get('n_questions')} "
            "questions; Holm p " + ("n/a" if d.get("p_holm") is None else f"{d['p_holm']:.3g}"))


def verdict_block(summary: dict[str, Any]) -> str:
    """The verdict, each tested setting's verdict with its parse rate and moved-among-parsed difference, the
    uninformative settings, and the sample against what a null needs."""
    margin = 100 * float(summary.get("parse_margin") or 0.10)
    lines = [f"steering verdict: {summary.get('verdict_code')} (SESOI {100 * float(summary.get('sesoi') or 0):.0f} "
             f"pp, parse margin {margin:.0f} pp, level {summary.get('level')}, Holm over "
             f"{(summary.get('multiple_comparisons') or {}).get('n_tests')} settings)"]
    lines += [setting_line(d) for d in summary.get("settings") or []]
    unin = summary.get("uninformative") or []
    lines.append("  uninformative settings (the answer line broken: neither null nor effect): "
                 + (", ".join(unin) if unin else "none"))
    pw = summary.get("power") or {}
    if pw:
        need = pw.get("n_cases_for_null")
        lines.append(f"  sample: {summary.get('n_c_cases')} held-out C cases from {summary.get('n_c_questions')} "
                     f"questions; a null at this SESOI needs about "
                     f"{need if need is not None else 'more than ' + str(pw.get('n_max'))} (simulated at the controls' "
                     f"observed rates: {100 * float(pw.get('base_rate') or 0):.0f}% moved among parsed, "
                     f"{100 * float(pw.get('parse_rate') or 1):.0f}% parsed); detectable effect about "
                     + ("none up to 100 pp" if pw.get("mde") is None else f"{100 * pw['mde']:.0f} pp"))
    lines.append(f"  {summary.get('verdict', '')}")
    return "\n".join(lines)


def report(out: str | Path) -> tuple[str, list[str]]:
    """(the text printed, the parts that are missing)."""
    out = Path(out)
    if not (out / "study.json").is_file():
        raise ReproduceError(f"{out} is not a study directory (no study.json); run python -m study --config reproduce "
                             "first")
    parts, missing = [], []
    summ = out / "steering" / SUMMARY
    if summ.is_file():
        parts.append(verdict_block(read_json(summ)))
    else:
        missing.append("steering/summary.json: run the steering stage (python -m study --resume DIR)")
    for rel, stage in PARTS:
        p = out / rel
        if p.is_file():
            parts.append(p.read_text(encoding="utf-8").rstrip())
        else:
            missing.append(f"{rel}: run the {stage} stage")
    parts += [f"missing: {m}" for m in missing]
    return "\n\n".join(parts), missing


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="python -m study.reproduce", description=__doc__.split("\n\n")[1],
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study_dir", help="the study directory python -m study --config reproduce wrote")
    args = p.parse_args(argv)

    def body() -> int:
        text, missing = report(args.study_dir)
        print(text)
        return 1 if missing else 0

    return run_cli(body)


__all__ = ["PARTS", "ReproduceError", "main", "report", "setting_line", "verdict_block"]


if __name__ == "__main__":
    sys.exit(main())
