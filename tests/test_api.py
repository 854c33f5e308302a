"""The public notebook API: every ```python block of docs/api.md runs, in order, on a small study built here;
the DataFrame builders keep the run's units (generations, cells, questions) and labels; the top-level
exports are lazy.

    .venv/bin/pytest -q tests/test_api.py -m "not integration"

The study is the fast one of tests/test_study.py: the scripted model (tests/fakes.py) writes the behaviour,
a tiny random Llama (tests/conftest.py) the activations and steering.
"""
from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "api.md"
FAST = ["--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1", "--alphas", "0.5", "--max-cases", "2",
        "--random-seeds", "1", "--max-new-tokens", "16", "--quiet"]
PACKAGES = ("loadbearing", "behavioural", "activations", "probes", "steering", "study")


def build_study(out: Path, tiny_lm) -> Path:
    """Every stage of a small study into ``out`` (behaviour scripted, the rest on the tiny Llama)."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models
    from study.driver import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "load_model", lambda *a, **k: tiny_lm)
        mp.setattr(protocol, "generate", functools.partial(scripted_generate))
        assert main(["--output-dir", str(out), *FAST]) == 0
    return out


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory, tiny_lm) -> Path:
    """Where ``make demo`` writes (``python -m study --output-dir runs/study-<time>``), under a fresh root."""
    return build_study(tmp_path_factory.mktemp("api") / "runs" / "study-20261201-120000", tiny_lm)


def doc_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


# ------------------------------------------------------------------------------------------------ docs/api.md


def test_every_snippet_of_docs_api_runs_in_order(study_dir, tiny_lm, capsys):
    blocks = doc_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 8
    # the page reads the directory `make demo` writes, as it is, from the checkout's root (issue #32: it named
    # runs/demo, which make demo never creates): no path is substituted here
    assert 'glob("study-*")' in blocks[0] and "runs/demo" not in DOC.read_text(encoding="utf-8")
    assert "runs/study-$(date +%Y%m%d-%H%M%S)" in (REPO / "Makefile").read_text().replace("$$", "$")
    import loadbearing.engine.models as models

    ns: dict = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "load_model", lambda *a, **k: tiny_lm)  # run.load_model() gives the run's tiny model
        mp.chdir(study_dir.parents[1])  # the checkout's root: runs/study-<time> below it
        for i, code in enumerate(blocks):
            try:
                exec(compile(code, f"docs/api.md block {i + 1}", "exec"), ns)
            except Exception as e:  # name the block that broke, with its code
                pytest.fail(f"docs/api.md block {i + 1} failed: {type(e).__name__}: {e}\n{code}")
    out = capsys.readouterr().out
    assert "pooled propagation, per generation:" in out and "grouped-CV accuracy" in out and "alpha" in out
    assert ns["handle"].n_hooks == 0  # steer() removed its hooks
    assert (study_dir.parents[1] / ns["RUN_DIR"]).resolve() == study_dir.resolve()  # the newest runs/study-*
    # what the walkthrough computed is what the run holds
    assert ns["df"].id.nunique() == len(ns["run"].continuations())
    assert ns["rates"]["n"].sum() == ns["perturbed"].propagated.notna().sum()
    assert set(ns["headline"].probe) >= {"logistic", "metadata"}
    assert len(ns["samples"]) == len(ns["log"].samples)
    assert (study_dir / "inspect" / "continuations.eval").is_file()


def test_the_doc_names_the_api_it_walks_through():
    text = DOC.read_text(encoding="utf-8")
    for name in ("continuations_df", "baselines_df", "probes.read_results", "steering.read_sweep", "LogisticProbe",
                 "alpha_rel", "read_directions",
                 "GroupKFold", "Pipeline", "study.export_inspect", "explode_memberships=False"):
        assert name in text, name


# ------------------------------------------------------------------------------------------------ continuations_df


def test_continuations_df_rows_are_generation_x_cell_and_controls_have_no_strategy(study_dir):
    from loadbearing import Run

    run = Run(study_dir)
    recs = run.continuations()
    df = run.continuations_df()
    assert len(df) == sum(len(c.cells()) for c in recs) and df.attrs["unit"] == "generation x cell"
    assert df.id.nunique() == len(recs)
    assert df.groupby("id").size().to_dict() == {c.id: len(c.cells()) for c in recs}
    # every (strategy, position) cell of every record is a row, in record order
    assert list(zip(df.id, df.cell_strategy, df.position)) == [(c.id, s, p) for c in recs for s, p in c.cells()]
    ctl = df[df.condition == "control"]
    assert len(ctl) and ctl.strategy.isna().all() and ctl.cell_strategy.notna().all()
    pert = df[df.condition == "perturbed"]
    assert (pert.strategy == pert.cell_strategy).all()
    assert set(df.position) == {"early", "middle", "late"}  # late rows exist without exploding by hand
    # outcome is the record's C/non-C; propagated its nullable boolean; question_key the one rule
    import pandas as pd

    by_id = {c.id: c for c in recs}
    assert [None if pd.isna(v) else v for v in df.outcome] == [by_id[i].label for i in df.id]
    assert [None if v is pd.NA else bool(v) for v in df.propagated] == [
        None if by_id[i].label is None else by_id[i].label == "C" for i in df.id]
    assert list(df.question_key) == [by_id[i].question_key or by_id[i].question_id for i in df.id]
    assert str(df.propagated.dtype) == "boolean"


def test_continuations_df_joins_the_named_labelling(study_dir):
    from loadbearing import Run, RunDirError

    run = Run(study_dir)
    name, labels = run.labels("rule")
    df = run.continuations_df(labels="rule")
    assert df.attrs["labelling"] == "rule"
    got = {i: (None if a != a else a) for i, a in zip(df.id, df.abc)}
    assert got == {i: labels.get(i) for i in got}
    assert set(got.values()) - {None} <= {"A", "B", "C"}
    assert run.continuations_df().attrs["labelling"] == name  # the newest is the only one here
    none = run.continuations_df(labels=None)
    assert none.abc.isna().all() and none.attrs["labelling"] is None
    with pytest.raises(RunDirError, match="labelling .* not found"):
        run.continuations_df(labels="no-such-labelling")


def test_continuations_df_per_generation_and_by_condition(study_dir):
    from loadbearing import Run

    run = Run(study_dir)
    gens = run.continuations_df(explode_memberships=False)
    recs = run.continuations()
    assert list(gens.id) == [c.id for c in recs] and gens.attrs["unit"] == "generation"
    assert (gens.n_cells == [len(c.cells()) for c in recs]).all()
    assert gens.cells.map(len).tolist() == gens.n_cells.tolist()
    ctl = run.continuations_df(condition="control")
    assert set(ctl.condition) == {"control"} and len(ctl.id.unique()) == len(run.continuations("control"))
    # the record API stays as it was
    assert all(type(c).__name__ == "Continuation" for c in run.continuations())


def test_baselines_df(study_dir):
    from loadbearing import Run

    run = Run(study_dir)
    b = run.baselines_df()
    assert len(b) == len(run.baselines()) and b.question_id.is_unique
    assert (b.n_lines == b.lines.map(len)).all()
    assert str(b.correct.dtype) == "boolean"
    assert b.eligible.sum() == len({c.question_id for c in run.continuations()})


def test_continuations_df_of_an_empty_run_has_the_columns(tmp_path):
    from loadbearing import Run
    from loadbearing.frames import LEAD_COLUMNS

    (tmp_path / "manifest.json").write_text(json.dumps({"status": "ok"}))
    (tmp_path / "baselines.jsonl").write_text("")
    df = Run(tmp_path).continuations_df()
    assert df.empty and list(df.columns)[: len(LEAD_COLUMNS)] == list(LEAD_COLUMNS)


# ------------------------------------------------------------------------------------------------ probes, steering


def test_read_results_matches_results_json(study_dir):
    import probes

    raw = json.loads((study_dir / "probes" / "results.json").read_text())
    res = probes.read_results(study_dir / "probes")
    assert list(res.columns[:7]) == ["probe", "layer", "metric", "estimate", "lo", "hi", "n_questions"]
    for pk, p in raw["probes"].items():
        nested = res[(res.probe == pk) & (res.scope == "nested") & (res.metric == "accuracy")]
        assert len(nested) == 1 and nested.layer.isna().all()
        acc = p["nested"]["accuracy"]
        assert nested.estimate.iloc[0] == pytest.approx(acc["rate"])
        assert (nested.lo.iloc[0], nested.hi.iloc[0]) == pytest.approx((acc["lo"], acc["hi"]))
        assert nested.n_questions.iloc[0] == acc["n_questions"]
        per_layer = res[(res.probe == pk) & (res.scope == "layer") & (res.metric == "accuracy")]
        assert per_layer.layer.tolist() == [e["layer"] for e in p["layers"]]
        assert per_layer.estimate.tolist() == pytest.approx([e["accuracy"]["rate"] for e in p["layers"]])
    assert res.query("scope == 'baseline'").probe.unique().tolist() == ["majority", "metadata"]
    assert res.n_questions.notna().all()
    # the run directory and the file itself are accepted too
    assert len(probes.read_results(study_dir)) == len(res) == len(probes.read_results(study_dir / "probes" / "results.json"))


def test_read_results_refuses_a_directory_without_results(tmp_path):
    import probes
    from probes import ProbeError

    with pytest.raises(ProbeError, match="no probe results"):
        probes.read_results(tmp_path)
    (tmp_path / "results.json").write_text("{")
    with pytest.raises(ProbeError, match="not valid JSON"):
        probes.read_results(tmp_path)


def test_read_sweep_has_every_generation_with_its_setting(study_dir):
    import steering
    from loadbearing.files import read_jsonl
    from steering import SteeringError

    recs = read_jsonl(study_dir / "steering" / "generations.jsonl")
    g = steering.read_sweep(study_dir)
    assert len(g) == len(recs) and list(g.setting) == [r["setting"] for r in recs]
    for col in ("basis", "layer", "k", "alpha_rel", "alpha", "seed", "case_id", "question_key", "correct", "moved"):
        assert col in g.columns, col
    c = g[g.case_label == "C"]
    assert (c.moved == c.correct.fillna(False)).all()
    assert g[g.case_label != "C"].moved.isna().all()
    assert g.in_summary.all() and g.attrs["summary"]["n_generations"] >= 1
    with pytest.raises(SteeringError, match="no steering generations"):
        steering.read_sweep(study_dir / "probes")


# ------------------------------------------------------------------------------------------------ exports


def test_top_level_exports_are_lazy_and_complete():
    code = ("import sys, loadbearing, probes, steering; "
            "heavy = [m for m in ('pandas', 'torch', 'sklearn', 'transformers', 'h5py') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    import loadbearing

    assert sorted(loadbearing.__all__) == sorted(loadbearing._LAZY)  # the literal list and the lazy table agree
    for name in loadbearing.__all__:
        assert getattr(loadbearing, name) is not None, name
    assert set(loadbearing.__all__) <= set(dir(loadbearing))
    with pytest.raises(AttributeError):
        loadbearing.no_such_name  # noqa: B018
    from loadbearing import Run, score

    assert Run.continuations_df.__doc__ and "Run" in loadbearing.__doc__
    assert score("2 + 3 = 5\nAnswer: 5", {"dataset": "arith", "gold": "5"}) == ("5", True)
    import probes
    import steering

    assert "read_results" in probes.__all__ and "read_sweep" in steering.__all__


def test_every_package_ships_py_typed():
    for pkg in PACKAGES:
        assert (REPO / pkg / "py.typed").is_file(), pkg
    assert "py.typed" in (REPO / "pyproject.toml").read_text()


# ------------------------------------------------------------------------------------------------ steer()


def test_steer_takes_the_directions_and_a_relative_alpha(study_dir, tiny_lm):
    import numpy as np

    import probes
    from steering import SteeringError, steer

    dirs = probes.read_directions(study_dir / "probes")
    L = dirs.selected_layer if dirs.selected_layer is not None else dirs.layers[-1]
    with steer(tiny_lm, dirs, layers=L, k=1, alpha_rel=0.5) as h:
        assert h.layers == [L] and h.n_hooks == 2
        assert h.alpha == pytest.approx(0.5 * dirs.resid_norm[L])  # the sweep's alpha for alpha_rel 0.5
        assert np.allclose(h.vectors.numpy(), dirs.basis(L, 1)[0], atol=1e-6)
    assert h.n_hooks == 0
    with steer(tiny_lm, dirs, layers=[L], alpha_rel=[0.0, 1.0]) as h:  # one relative alpha per batch row
        assert h.alpha.tolist() == pytest.approx([0.0, dirs.resid_norm[L]])
    with steer(tiny_lm, dirs, layers=L, alpha=2.0) as h:  # absolute alpha still works
        assert h.alpha == 2.0
    with steer(tiny_lm, dirs.basis(L), layers=[L], alpha=2.0) as h:  # and so does a raw basis
        assert h.alpha == 2.0
    with pytest.raises(SteeringError, match="not both"):
        with steer(tiny_lm, dirs, layers=L, alpha=1.0, alpha_rel=0.5):
            pass
    with pytest.raises(SteeringError, match="one layer"):
        with steer(tiny_lm, dirs, layers=dirs.layers[:2], alpha_rel=0.5):
            pass
    with pytest.raises(SteeringError, match="need a probes.directions.Directions"):
        with steer(tiny_lm, dirs.basis(L), layers=[L], alpha_rel=0.5):
            pass


@pytest.mark.parametrize("bad", [{"a": 1}, "runs/demo/probes", Path("runs/demo/probes"), None,
                                 "object-array", [object()]])
def test_steer_refuses_a_wrong_type_with_a_clear_type_error(tiny_lm, bad):
    import numpy as np

    from steering import steer

    def hooks() -> int:  # transformers keeps its own output-capture hooks once hidden states were asked for
        return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in tiny_lm.model.modules())

    before = hooks()
    if bad == "object-array":
        bad = np.array([np.zeros(3), np.zeros(4)], dtype=object)
    with pytest.raises(TypeError, match=r"probes\.directions\.Directions .* numeric"):
        with steer(tiny_lm, bad, layers=[1], alpha=1.0):
            pass
    assert hooks() == before  # nothing left registered by the refused call
