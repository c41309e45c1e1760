#!/usr/bin/env bash
# The real-SGLang lane of the tests: SGLang 0.5.23 itself, able to serve prefill/decode (mooncake backend, over TCP)
# on this CPU with no GPU, behind sglang-router 0.3.2 and smg 1.13.0, and a tiny Llama made here.
# scripts/install.sh calls this; it can also be run alone. Idempotent: a stamp in the venv records what was
# installed, and a second run that finds it current (and the packages still there) does nothing.
#
#   venv  PDCTL_SGLANG_VENV, else /opt/pdctl-test/sglang-venv as root, else ~/.cache/pdctl-test/sglang-venv
#         (tests/fixtures/sglang_venv.py); it sees the base interpreter's CPU torch 2.13.0 (--system-site-packages)
#   model PDCTL_REAL_MODEL, else /opt/pdctl-test/tiny-llama as root, else ~/.cache/pdctl-test/tiny-llama
#
# Why each step (the account of what fails without it is shared/reference/real-sglang-cpu/FINDINGS.md):
# - sglang is installed --no-deps: its own requirements pin torch 2.14.1 (a CUDA build, GBs) and CUDA-only
#   packages (flashinfer, sglang-kernel, ...). What it imports on the CPU is listed below, with the versions it pins.
# - every pip call carries a constraints file pinning torch==2.13.0, so nothing can pull another (CUDA) torch.
# - dill: imported by sglang, not declared. torchvision: imported by sglang; PyPI's wheel is a CUDA build whose
#   import needs one guard (scripts/real_sglang/patch_installed.py, which also guards one CUDA-only branch of the
#   PD prefill).
# - sgl_kernel: SGLang's CPU engine imports two helpers from it and PyPI has no CPU build: our plain-torch stand-in
#   (scripts/real_sglang/sgl_kernel) is copied into the venv's site-packages, so nothing is needed on PYTHONPATH.
# - both routers come last and --no-deps into the venv itself (the base interpreter may hold them too); both wheels
#   install a bin/smg, so smg goes after sglang-router and bin/smg is smg's own. pdctl launches either by module.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "$(id -u)" = 0 ]; then home=/opt/pdctl-test; else home=${XDG_CACHE_HOME:-$HOME/.cache}/pdctl-test; fi
VENV=${PDCTL_SGLANG_VENV:-$home/sglang-venv}
MODEL=${PDCTL_REAL_MODEL:-$home/tiny-llama}
VPY=$VENV/bin/python
STAMP=$VENV/pdctl-real-sglang.stamp
MODEL_STAMP=$MODEL/pdctl-made-by.stamp

TORCH=2.13.0
SGLANG=0.5.23
ROUTER=0.3.2
SMG=1.13.0
MOONCAKE=0.3.13.post1
TORCHVISION=0.28.0
# sglang 0.5.23's requirements that its server, its PD code and the CPU engine import, at the versions it pins
# (tried on this machine); the CUDA-only ones are left out.
REQUIREMENTS=(
  aiohttp 'anthropic>=0.20.0' apache-tvm-ffi==0.1.11 blobfile==3.0.0 build compressed-tensors==0.18.0 distro
  easydict einops fastapi gguf interegular IPython 'llguidance>=1.7.6,<2.0.0' 'mistral_common>=1.11.5' msgspec
  ninja numba==0.65.1 numpy nvidia-ml-py openai==2.8.0 openai-harmony==0.0.4 orjson outlines==0.1.11 packaging
  partial_json_parser pillow 'prometheus-client>=0.20.0' psutil pybase64 pydantic 'python-dateutil<3'
  python-multipart 'pyzmq>=25.1.2' regex requests scipy sentencepiece==0.2.1 setproctitle 'smg-grpc-servicer>=0.9.0'
  soundfile==0.13.1 tiktoken tokenizers==0.23.2 tqdm transformers==5.19.0 'uvicorn>=0.51' uvloop watchfiles
  xgrammar==0.2.7 xxhash zstandard triton==3.9.0
  dill "torchvision==$TORCHVISION" "mooncake-transfer-engine-non-cuda==$MOONCAKE"
)

log() { echo "install_real_sglang: $*" >&2; }

# What this run would install: this script and the files it copies or runs. A stamp holding another value is stale.
recipe_id() {
  sha256sum scripts/install_real_sglang.sh scripts/real_sglang/patch_installed.py \
      scripts/real_sglang/sgl_kernel/__init__.py | sha256sum | cut -c1-16
}
model_id() {
  { sha256sum scripts/real_sglang/make_tiny_llama.py
    "$VPY" -c 'import importlib.metadata as m; print(m.version("transformers"), m.version("tokenizers"))'
  } | sha256sum | cut -c1-16
}
# The stamp is trusted only while what it names is still installed (the venv leans on the base interpreter's torch).
venv_current() {
  [ -x "$VPY" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$(recipe_id)" ] && "$VPY" - <<EOF 2>/dev/null
import importlib.metadata as m, importlib.util, sys
want = {"torch": "$TORCH", "sglang": "$SGLANG", "sglang-router": "$ROUTER", "smg": "$SMG",
        "mooncake-transfer-engine-non-cuda": "$MOONCAKE", "torchvision": "$TORCHVISION"}
ok = all(m.version(name).split("+")[0] == v for name, v in want.items())
sys.exit(0 if ok and importlib.util.find_spec("sgl_kernel") else 1)
EOF
}
model_current() {
  [ -f "$MODEL/config.json" ] && [ "$(cat "$MODEL_STAMP" 2>/dev/null)" = "$(model_id)" ]
}

mkdir -p "$(dirname "$VENV")" "$(dirname "$MODEL")"
# One run at a time per venv (install.sh and a hand run may overlap).
exec 9>"$VENV.lock"
flock 9

if venv_current; then
  log "venv $VENV is current"
else
  t0=$SECONDS
  rm -f "$STAMP"
  if ! grep -qx 'include-system-site-packages = true' "$VENV/pyvenv.cfg" 2>/dev/null || ! "$VPY" -c '' 2>/dev/null
  then
    rm -rf "$VENV"
    "$PY" -m venv --system-site-packages "$VENV"
  fi
  # The base interpreter's CPU torch, seen through system site-packages; install it there if it is missing
  # (`torch==2.13.0` takes the CPU wheel this machine keeps on disk).
  if ! "$VPY" -c "import importlib.metadata as m; assert m.version('torch').split('+')[0] == '$TORCH'" 2>/dev/null
  then
    "$VPY" -m pip install -q --disable-pip-version-check --root-user-action=ignore "torch==$TORCH"
  fi
  echo "torch==$TORCH" >"$VENV/pdctl-constraints.txt"
  pip=("$VPY" -m pip install -q --disable-pip-version-check --root-user-action=ignore -c "$VENV/pdctl-constraints.txt")
  "${pip[@]}" --no-deps "sglang==$SGLANG"
  # pip reports sglang's unmet CUDA requirements here (torch==2.14.1, flashinfer, ...): expected, not an error
  "${pip[@]}" "${REQUIREMENTS[@]}" "sglang-router==$ROUTER" "smg==$SMG" 2> >(grep -v -e '^sglang .* requires ' \
      -e "^ERROR: pip's dependency resolver" -e '^WARNING: Location .* is ignored' >&2)
  "${pip[@]}" --no-deps --ignore-installed "sglang-router==$ROUTER"
  "${pip[@]}" --no-deps --ignore-installed "smg==$SMG"
  if ! grep -q '^from smg' "$VENV/bin/smg"; then
    "${pip[@]}" --no-deps --force-reinstall "smg==$SMG"
    grep -q '^from smg' "$VENV/bin/smg" || { log "$VENV/bin/smg is not smg's own script"; exit 1; }
  fi

  site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  rm -rf "$site/sgl_kernel"
  mkdir -p "$site/sgl_kernel"
  cp scripts/real_sglang/sgl_kernel/*.py "$site/sgl_kernel/"
  "$VPY" -m compileall -q "$site/sgl_kernel" >/dev/null
  "$VPY" scripts/real_sglang/patch_installed.py >&2

  # Proof that the lane imports: the CPU torch, the server and PD modules, mooncake, and both routers' launchers.
  SGLANG_USE_CPU_ENGINE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VPY" - <<'EOF'
import torch
assert torch.version.cuda is None, f"a CUDA torch ({torch.__version__}) in the lane"
import sgl_kernel, torchvision  # noqa: F401  (the stand-in; torchvision's import is what the guard fixes)
import sglang.srt.entrypoints.http_server  # noqa: F401
import sglang.srt.disaggregation.prefill, sglang.srt.disaggregation.decode  # noqa: F401,E401
import sglang.srt.disaggregation.mooncake.conn  # noqa: F401
from mooncake.engine import TransferEngine  # noqa: F401
EOF
  "$VPY" -m sglang_router.launch_router --help >/dev/null
  "$VPY" -m smg.launch_router --help >/dev/null
  recipe_id >"$STAMP"
  log "venv $VENV installed in $((SECONDS - t0)) s ($(du -sh "$VENV" | cut -f1))"
fi

if model_current; then
  log "model $MODEL is current"
else
  t0=$SECONDS
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VPY" scripts/real_sglang/make_tiny_llama.py "$MODEL" >&2
  model_id >"$MODEL_STAMP"
  log "model $MODEL made in $((SECONDS - t0)) s"
fi
