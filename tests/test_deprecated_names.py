"""The names ``behavioural`` exported before the shared base moved to ``loadbearing`` still resolve, to the same
objects as their new homes, with one DeprecationWarning per name that says where the name lives now."""
from __future__ import annotations

import importlib
import warnings

import pytest

import behavioural

NEW_HOME = {"load_model": "loadbearing.engine.models", "load_questions": "loadbearing.questions.data",
            "extract_answer": "loadbearing.answers", "proportion_ci": "loadbearing.stats"}


@pytest.mark.parametrize("name", sorted(behavioural._MOVED))
def test_old_name_is_the_new_object_and_warns_once(name, monkeypatch):
    monkeypatch.setattr(behavioural, "_warned", set())
    home = behavioural._MOVED[name]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = getattr(behavioural, name)
        again = getattr(behavioural, name)
    assert first is again is getattr(importlib.import_module(home), name)
    assert [w.category for w in seen] == [DeprecationWarning], [str(w.message) for w in seen]
    assert f"from {home} import {name}" in str(seen[0].message)
    assert seen[0].filename == __file__  # points at the caller's line, not at behavioural/__init__.py


def test_the_documented_old_imports_still_work(monkeypatch):
    monkeypatch.setattr(behavioural, "_warned", set())
    with pytest.warns(DeprecationWarning, match="loadbearing.engine.models"):
        from behavioural import load_model  # noqa: F401
    for name, home in NEW_HOME.items():
        assert behavioural._MOVED[name] == home


def test_unknown_names_are_still_attribute_errors():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        behavioural.nope  # noqa: B018
