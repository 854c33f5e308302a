"""Provenance recorded in every manifest: the toolkit's git commit, package versions, timestamps."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path


def git_info(start: str | os.PathLike | None = None) -> dict[str, str | bool | None]:
    """The toolkit checkout's commit and dirty flag (nulls outside a git checkout)."""
    where = Path(start) if start else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(["git", "status", "--porcelain"], cwd=where, capture_output=True, text=True, timeout=10)
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def package_versions(names: Iterable[str] = ("torch", "transformers", "numpy", "scikit-learn", "h5py", "nnsight",
                                               "transformer-lens", "bitsandbytes", "vllm", "loadbearing-cot")
                     ) -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": sys.version.split()[0], "platform": platform.platform()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
