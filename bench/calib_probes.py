"""python bench/calib_probes.py [--fast] [--json F]   (the probe entries of bench/calibration.py)

Size of the probes stage's permutation p-values, simulated through the whole study
(:func:`probes.experiment.train_probes`: the question-level exchange within designs, permuted refits with
their own inner-CV C, nested layer selection, the metadata baseline refitted per permutation).

Data (issue 23's simulation): questions at three levels, each edited in up to 6 cells (2 strategies x 3
positions; about 15% of questions miss one cell, so some designs are unique and take the within-cell
fallback). Labels depend only on the edit and the level, plus a question effect (logit SD 1): C is common for
numerical edits, rarer for text, more so at higher levels. Activations encode only which edit was made (a
fixed vector per strategy x position cell, plus isotropic noise), the same at every layer: they carry nothing
about the label beyond the design, so every p-value here is under its null.

* ``probes.gain.size``: how often the headline gain over the metadata baseline has p <= 0.05 (nominal 0.05);
* ``probes.control.size``: the same for the headline's shuffled-label p-value (the probe's accuracy);
* ``probes.gain.issue_sim``: the issue's two data sets (seeds 1 and 2): the gain and its p-value (the old
  control gave p = 0.010 at gains of -1.3 and -3.5 points);
* ``probes.gain.power`` (full run): activations that also carry a question-level copy of the label noise
  beyond the design (informational).

``attainable`` is the largest size the discrete permutation p-value allows at 0.05 with P permutations.
Seeded and deterministic. ``run(fast)`` returns ``{name: entry}``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STRATEGIES = ("numerical", "text")
POSITIONS = ("early", "middle", "late")
BASE = {("numerical", "early"): 1.2, ("numerical", "middle"): 0.8, ("numerical", "late"): 0.2,
        ("text", "early"): -0.4, ("text", "middle"): -0.8, ("text", "late"): -1.4}
LEVEL_EFFECT = (-0.5, 0.0, 0.6)


class _Store:
    def __init__(self, acts: np.ndarray):
        self.acts = acts  # [layers, n, d]

    def read(self, layer: int, position: str) -> np.ndarray:
        return self.acts[layer]


def simulate(seed: int, n_questions: int = 48, d: int = 16, n_layers: int = 2, signal: float = 0.0) -> Any:
    """A :class:`probes.data.ProbeData` of the edit-only simulation (``signal`` > 0 adds label information)."""
    import pandas as pd

    from probes.data import ProbeData

    rng = np.random.default_rng(seed)
    cells = [(s, p) for s in STRATEGIES for p in POSITIONS]
    emb = {c: rng.normal(size=d) * 1.5 for c in cells}
    rows = []
    for q in range(n_questions):
        level = q % 3
        mine = list(cells)
        if rng.random() < 0.15:
            mine.pop(int(rng.integers(len(mine))))
        u = rng.normal()
        for s, p in mine:
            pr = 1 / (1 + np.exp(-(BASE[(s, p)] + LEVEL_EFFECT[level] + u)))
            rows.append((q, level, s, p, int(rng.random() < pr), u))
    n = len(rows)
    y = np.array([r[4] for r in rows])
    meta = pd.DataFrame({"strategy": [r[2] for r in rows], "edit_position": [r[3] for r in rows],
                         "difficulty": [f"L{r[1]}" for r in rows], "task": "sim", "dataset": "sim",
                         "condition": "perturbed"})
    acts = np.empty((n_layers, n, d), dtype=np.float32)
    for L in range(n_layers):
        acts[L] = np.stack([emb[(r[2], r[3])] for r in rows]) + rng.normal(size=(n, d))
        if signal:
            acts[L, :, 0] += signal * (y - y.mean()) * (L + 1) / n_layers
    return ProbeData(store=_Store(acts), target="propagation", position="prefix_last", layers=list(range(n_layers)),
                     idx=np.arange(n), y=y, class_names=["non-C", "C"], y_c=y,
                     questions=np.array([f"q{r[0]:03d}" for r in rows], dtype=object), meta=meta,
                     conditions="perturbed")


def one_study(seed: int, permutations: int, probes: tuple[str, ...] = ("logistic",), signal: float = 0.0,
              Cs: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0)) -> dict[str, dict[str, Any]]:
    from probes.experiment import train_probes

    res, _ = train_probes(simulate(seed, signal=signal), probes=probes, folds=5, permutations=permutations,
                          n_boot=0, transfer=False, directions=False, Cs=Cs, seed=seed, device="cpu")
    return {pk: res["headline"][pk] for pk in probes}


def _attainable(P: int, alpha: float = 0.05) -> float:
    return float(np.floor(alpha * (P + 1) + 1e-9) / (P + 1))


def run(fast: bool = True, seed: int = 0) -> dict[str, dict[str, Any]]:
    """The probe calibration entries (``fast``: 12 studies of 19 permutations; full: 100 studies of 39)."""
    n_sims, P = (12, 19) if fast else (100, 39)
    probes = ("logistic",) if fast else ("logistic", "mass_mean")
    out: dict[str, dict[str, Any]] = {}
    gp: dict[str, list[float]] = {pk: [] for pk in probes}
    cp: dict[str, list[float]] = {pk: [] for pk in probes}
    for i in range(n_sims):
        h = one_study(1000 + seed * 10_000 + i, P, probes)
        for pk in probes:
            gp[pk].append(h[pk]["gain_p_value"])
            cp[pk].append(h[pk]["control_p_value"])
    for pk in probes:
        for name, ps in (("gain", gp[pk]), ("control", cp[pk])):
            v = np.array([np.nan if p is None else p for p in ps], dtype=float)
            out[f"probes.{name}.size.{pk}"] = {
                "test": f"{pk} headline {'gain over metadata' if name == 'gain' else 'accuracy'} permutation p <= 0.05, "
                        "edit-only activations", "size": float(np.mean(v <= 0.05 + 1e-12)), "nominal": 0.05,
                "attainable": _attainable(P), "n_permutations": P, "n_sims": n_sims,
                **({"informational": True, "note": "too few studies in --fast to check the size"} if fast else {}),
                "mean_p": float(np.nanmean(v)), "p_values": [None if np.isnan(x) else float(x) for x in v]}
    issue = [one_study(s, 99 if not fast else 39)["logistic"] for s in (1, 2)]
    out["probes.gain.issue_sim"] = {
        "test": "the issue's edit-only simulation (two data sets): gain and its p-value (old control: p = 0.010)",
        "gains": [h["gain_over_metadata"]["value"] for h in issue], "p_values": [h["gain_p_value"] for h in issue],
        "control_p_values": [h["control_p_value"] for h in issue], "nominal": 0.05, "n_sims": 2,
        "informational": True, "size": float(np.mean([h["gain_p_value"] <= 0.05 for h in issue]))}
    if not fast:
        pw = [one_study(5000 + i, P, ("logistic",), signal=1.0)["logistic"]["gain_p_value"] for i in range(20)]
        out["probes.gain.power.logistic"] = {"test": "gain p <= 0.05 when activations carry the label (signal 1.0)",
                                             "power": float(np.mean([p <= 0.05 for p in pw])), "nominal": 0.8,
                                             "n_sims": 20, "n_permutations": P}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--fast", action="store_true", help="fewer simulated studies")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default %(default)s)")
    p.add_argument("--json", default=None, metavar="F", help="also write the entries as JSON to F")
    args = p.parse_args(argv)
    res = run(args.fast, args.seed)
    for k, e in res.items():
        val = next((e[x] for x in ("size", "power") if x in e), None)
        print(f"{k:34s} {val} (nominal {e['nominal']}; {e['n_sims']} sims)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
