"""The one directions reader: every layer with its metadata, and one-line errors for broken files."""
from __future__ import annotations

import numpy as np
import pytest

from probes import DirectionSet, ProbeError, load_direction_info, load_directions, read_directions
from probes.directions import write_directions


def _per_layer(d=6, k=3, layers=(1, 3), seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for L in layers:
        q, _ = np.linalg.qr(rng.normal(size=(d, k)))
        out[L] = {"logistic": q[:, 0], "mass_mean": q[:, 1], "basis": q.T, "names": ["logistic", "m", "pc1"][:k],
                  "resid_norm": 10.0 + L, "logistic_C": 1.0, "n_rows": 20, "n_C": 8, "n_nonC": 12,
                  "cos_logistic_mass_mean": 0.0}
    return out


def _write(tmp_path, per_layer=None, **kw):
    p = tmp_path / "directions.h5"
    store = {"path": "/x/activations.h5", "attrs": {"layer_module": "model.layers"}}
    return write_directions(p, per_layer or _per_layer(), target="propagation", position="prefix_last", store=store,
                            n_directions=3, selected_layer=3, selected_layer_method="modal", **kw)


def test_read_directions_returns_all_layers_and_metadata(tmp_path):
    p = _write(tmp_path)
    ds = read_directions(tmp_path)
    assert isinstance(ds, DirectionSet)
    assert ds.path == str(p) and len(ds.sha256) == 64
    assert ds.layers == [1, 3] and ds.selected_layer == 3 and ds.selected_layer_method == "modal"
    assert ds.bases[1].dtype == np.float32 and ds.bases[1].shape == (3, 6)
    assert np.allclose(ds.bases[3] @ ds.bases[3].T, np.eye(3), atol=1e-5)
    assert ds.names[1] == ["logistic", "m", "pc1"] and ds.resid_norm == {1: 11.0, 3: 13.0}
    assert ds.layer_module == "model.layers" and ds.attrs["store"]["path"] == "/x/activations.h5"
    assert ds.d_model == 6 and ds.layer_attrs[1]["n_C"] == 8
    assert ds.basis(3, k=2).shape == (2, 6)
    with pytest.raises(ProbeError, match="available layers: \\[1, 3\\]"):
        ds.basis(7)
    with pytest.raises(ProbeError, match="k=5"):
        ds.basis(1, k=5)
    # thin wrappers agree
    assert np.array_equal(load_directions(p, 1), ds.bases[1])
    info = load_direction_info(tmp_path, 3)
    assert info["resid_norm"] == 13.0 and info["layer"] == 3 and info["target"] == "propagation"
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".")]  # atomic write left no temp file


def test_missing_truncated_corrupt_and_wrong_kind(tmp_path):
    with pytest.raises(ProbeError, match="no probe directions at .*python -m probes.train"):
        read_directions(tmp_path)
    p = _write(tmp_path)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 3])  # truncated
    with pytest.raises(ProbeError) as e:
        read_directions(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and "truncated or corrupt" in msg and "python -m probes.train" in msg
    p.write_bytes(b"not hdf5 at all" * 10)
    with pytest.raises(ProbeError, match="truncated or corrupt"):
        read_directions(p)
    import h5py

    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.attrs["kind"] = "activations"
    with pytest.raises(ProbeError, match="not a probe directions file"):
        read_directions(tmp_path / "other.h5")


def test_nan_basis_is_refused(tmp_path):
    pl = _per_layer()
    pl[3]["basis"] = np.full((3, 6), np.nan)
    _write(tmp_path, pl)
    with pytest.raises(ProbeError, match="layer 3 basis is all NaN"):
        read_directions(tmp_path)


def test_directions_is_the_one_type_and_carries_the_question_split(tmp_path):
    import dataclasses

    from probes import Directions

    assert DirectionSet is Directions  # the deprecated name is the same class
    ds = read_directions(_write(tmp_path))
    assert isinstance(ds, Directions) and ds.question_split is None and ds.fit_split() is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.sha256 = "x"  # type: ignore[misc]
    split = {"held_out": ["k1", "k2"], "fit": ["k3"], "key": "question_key", "fraction": 0.5}
    ds = read_directions(_write(tmp_path, question_split=split))
    assert ds.question_split == split and ds.fit_split() == {"fit": ["k3"], "held_out": ["k1", "k2"]}
    import h5py

    with h5py.File(tmp_path / "directions.h5", "r+") as f:
        f.attrs["question_split"] = "[1, 2]"
    with pytest.raises(ProbeError, match="question_split .* not a JSON object"):
        read_directions(tmp_path)


def test_the_papers_two_bases_are_fitted_stored_and_read(tmp_path):
    """M2 (mean difference + within-C PCs with it projected out) and the probe basis (probe direction + PCs with
    it projected out), as r2m-ai/load-bearing-cot's multi_direction.py builds them, round-trip through the file."""
    from probes.fit.direction_fit import fit_directions, m2_basis

    rng = np.random.default_rng(3)
    n, d = 240, 12
    y = (np.arange(n) % 3 == 0).astype(int)  # 1 = C
    X = rng.normal(size=(n, d))
    X[:, 0] += 3.0 * (1 - y)  # non-C shifted along e0
    X[y == 1, 1] *= 6.0  # the C rows vary most along e1
    r = fit_directions(X, y, np.arange(n) // 2, n_directions=4, solver="sklearn")
    m2, ppc = r["basis_m2"], r["basis_probe_pc"]
    assert m2.shape == (4, d) and ppc.shape == (4, d)
    assert np.allclose(m2 @ m2.T, np.eye(4), atol=1e-5) and np.allclose(ppc @ ppc.T, np.eye(4), atol=1e-5)
    diff = X[y == 0].mean(0) - X[y == 1].mean(0)
    assert np.allclose(m2[0], diff / np.linalg.norm(diff), atol=1e-5)  # row 0: toward non-C
    assert abs(m2[1] @ np.eye(d)[1]) > 0.95  # the top within-C axis once the mean difference is out
    assert np.allclose(ppc[0], r["logistic"], atol=1e-5) and r["names_probe_pc"][0] == "probe"
    assert r["names_m2"] == ["mean_diff", "within_c_pc1", "within_c_pc2", "within_c_pc3"]
    b, names = m2_basis(X, y, 1)
    assert b.shape == (1, d) and names == ["mean_diff"]

    per = {2: {**r, "basis": r["basis"]}}
    p = write_directions(tmp_path / "directions.h5", per, target="propagation", position="prefix_last",
                         store={"path": "/x/a.h5"}, n_directions=4)
    ds = read_directions(p)
    assert np.allclose(ds.named_basis("m2", 2), m2) and np.allclose(ds.named_basis("probe_pc", 2, k=2), ppc[:2])
    assert ds.extra_names["m2"][2] == r["names_m2"] and "names_m2" not in ds.layer_attrs[2]
    assert np.array_equal(ds.named_basis("basis", 2), ds.bases[2])
    with pytest.raises(ProbeError, match="k=5 directions asked of the m2 basis"):
        ds.named_basis("m2", 2, k=5)
    with pytest.raises(ProbeError, match="unknown basis"):
        ds.named_basis("pca", 2)
    old = _write(tmp_path / "old" if (tmp_path / "old").mkdir() is None else tmp_path)  # a file without them
    with pytest.raises(ProbeError, match="holds no m2 basis for layer 1.*probes.train"):
        read_directions(old).named_basis("m2", 1)


@pytest.mark.parametrize("n,d", [(900, 600), (600, 900), (300, 200)])
def test_top_principal_axes_are_the_thin_svds_axes(n, d):
    """The Gram-matrix route for wide matrices gives the thin SVD's top axes (up to sign) to working precision."""
    from probes.fit.direction_fit import top_principal_axes

    rng = np.random.default_rng(n + d)
    X = rng.standard_normal((n, 40)) @ rng.standard_normal((40, d)) * np.linspace(3, 1, d) + 0.1 * rng.standard_normal((n, d))
    a = top_principal_axes(X, 7)
    b = np.linalg.svd(X, full_matrices=False)[2][:7]
    assert a.shape == (7, d)
    assert np.abs(np.abs((a * b).sum(1)) - 1).max() < 1e-10
    assert np.abs(a @ a.T - np.eye(7)).max() < 1e-10


def test_the_store_provenance_names_the_fitting_store_and_opens_it(tmp_path):
    """Steering reads the fitting store through ``Directions.provenance``: the recorded path when the file exists
    (None when moved), the weights hashes at any depth, and ``open()`` on the real store."""
    from helpers.probe_stores import lab, write_store

    missing = read_directions(_write(tmp_path))
    assert missing.provenance.path is None  # /x/activations.h5 does not exist
    with pytest.raises(ProbeError, match="names no readable activation store"):
        missing.provenance.open()
    store = write_store(tmp_path / "acts.h5", np.zeros((8, 2, 6), np.float32), lab(np.arange(8) % 2), np.arange(8) // 2)
    p = write_directions(tmp_path / "d2.h5", _per_layer(), target="propagation", position="prefix_last",
                         store={"path": str(store), "attrs": {"model": {"weights_hash": "abc"}, "n": 3}},
                         n_directions=3, selected_layer=3)
    prov = read_directions(p).provenance
    assert prov.path == str(store)
    assert prov.weights_hashes() == {"abc"}
    with prov.open() as st:
        assert len(st.rows) == 8


def test_wide_layers_bases_from_shared_gram_matrices_are_the_row_routes():
    """At a wide layer (both sides > 500) the two paper bases come from Gram matrices shared by one pass over the
    rows (all rows = C + non-C about the global mean); they are the bases the row route gives, to working precision."""
    from probes.fit.direction_fit import _wide_grams, m2_basis, probe_pc_basis

    rng = np.random.default_rng(7)
    n, d = 1500, 520
    y = (np.arange(n) % 2 == 0).astype(int)
    X = (rng.standard_normal((n, 30)) @ rng.standard_normal((30, d)) * np.linspace(3, 1, d)
         + 0.1 * rng.standard_normal((n, d)) + 40.0)
    X[y == 0, :5] += 2.0
    grams = _wide_grams(X, y == 1)
    assert grams is not None and _wide_grams(X[:900], y[:900] == 1) is None  # 450 C rows: the row route
    w = rng.standard_normal(d)
    for (a, na), (b, nb) in [(m2_basis(X, y, 6), m2_basis(X, y, 6, _grams=grams)),
                             (probe_pc_basis(w, X, 6), probe_pc_basis(w, X, 6, _grams=grams))]:
        assert na == nb and a.shape == b.shape == (6, d)
        assert np.abs(a - b).max() < 1e-8
