"""The packages' shape: experiments live in their own subpackages, no package is a flat folder of many
modules, and no module shares its name with one in the package above or below it (issue #33)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ["loadbearing", "behavioural", "activations", "probes", "steering", "study"]
#: at most this many modules in one package folder (``__init__`` and ``__main__`` not counted)
MAX_MODULES = 16


def _packages() -> list[Path]:
    return sorted(p.parent for root in ROOTS for p in (REPO / root).rglob("__init__.py"))


def _modules(pkg: Path) -> set[str]:
    return {p.stem for p in pkg.glob("*.py") if p.stem not in ("__init__", "__main__")}


@pytest.mark.parametrize("pkg", _packages(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_package_is_a_wide_flat_folder(pkg):
    mods = _modules(pkg)
    assert len(mods) <= MAX_MODULES, (f"{pkg.relative_to(REPO)} has {len(mods)} modules (at most {MAX_MODULES}): "
                                      f"move an experiment's modules into a subpackage")


@pytest.mark.parametrize("pkg", _packages(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_shares_a_name_with_one_in_the_package_above(pkg):
    if pkg.parent == REPO or not (pkg.parent / "__init__.py").exists():
        return
    clash = sorted(_modules(pkg) & (_modules(pkg.parent) | {pkg.name}))
    assert not clash, f"{pkg.relative_to(REPO)} and {pkg.parent.relative_to(REPO)} both have {clash}"


def test_every_subpackage_folder_is_a_package():
    """A folder of modules without ``__init__.py`` would be a namespace package that setuptools does not ship."""
    for root in ROOTS:
        for d in (REPO / root).rglob("*"):
            if d.is_dir() and any(d.glob("*.py")) and "__pycache__" not in d.parts:
                assert (d / "__init__.py").exists(), f"{d.relative_to(REPO)} holds modules but no __init__.py"
