#!/usr/bin/env bash
# The GPU checklist in one call (README "GPU"): the CUDA tests, then the GPU benchmarks.
# Writes a log and the CSVs under $OUT (default results/bench/gpu); every step has its own
# time limit inside an overall deadline (GPU_DEADLINE seconds, default 480), so a slow step
# cannot cost the others; the steps run in order of priority (the fused layer's tile loops
# first: their CUDA tests, then the d = 4096 cases; the loss variants after them; the
# chunked-PyTorch "eager" loss variants, a CPU fallback, not at all).
# Wheels in .whl/ (liger-kernel, cut-cross-entropy, entmax) are installed first where
# present. Usage: bash scripts/gpu-checks.sh [STEP ...]
# (steps: fusedtests fused tests loss tile tiles hf launch profile train; default all). At most 8
# files come back from a device run: the log and 7 CSVs (the test summary is in the log).
set -u
OUT=${OUT:-results/bench/gpu}
mkdir -p "$OUT"
LOG="$OUT/gpu-checks.log"
END=$(( $(date +%s) + ${GPU_DEADLINE:-480} ))
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi

step() {  # step NAME LIMIT COMMAND...: run within min(LIMIT, time left), log it, print its tail
  local name=$1 limit=$2; shift 2
  local left=$(( END - $(date +%s) - 5 ))
  (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "== $name: skipped, ${left}s left" | tee -a "$LOG"; return; fi
  echo "== $name (limit ${limit}s): $*" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  cat "$OUT/$name.out" >> "$LOG"; rm -f "$OUT/$name.out"
  echo "== $name rc=$rc in $(( $(date +%s) - t0 ))s" | tee -a "$LOG"
}

WANT=" ${*:-fusedtests fused tests loss tile tiles hf launch profile train} "
want() { [[ "$WANT" == *" $1 "* ]]; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
} 2>&1 | tee -a "$LOG"

# The fused layer's tile loops (vocabulary blocks, 2-D tiles, token chunks) against float64.
want fusedtests && step fusedtests 90 python3 -m pytest -m cuda -q -p no:cacheprovider -rfE \
  tests/transforms/test_cuda_fused_linear.py
# The default loop (vocabulary blocks) and the token-chunked one against unfused (its own row
# too), Liger and CCE at d = 4096.
want fused && step fused 120 python3 -m arelu_cli.cli bench fused-linear --device cuda --d 4096 \
  --sizes 16384x131072,65536x262144 --methods fused,fused-tokens,unfused,liger,cce \
  --out "$OUT/fused_linear.csv"
want tests && step tests 75 python3 -m pytest -m cuda -q -p no:cacheprovider -rfE \
  tests/transforms/test_cuda_kernels.py
# alpha-ReLU's rows first (the first two runs ran out of time before them, or nearly).
want loss && step loss 240 python3 -m arelu_cli.cli bench loss --device cuda --max-seconds 1 \
  --repeats 5 --transforms 1.5-relu,softmax --variants default,reuse_logits,liger \
  --out "$OUT/loss.csv"
# Tiles of twice the default budget (16384 tokens x 8192 columns, 256 MiB in bf16): whether
# fewer vocabulary blocks (less grad_hidden traffic) pay for the memory.
want tile && step tile 40 python3 -m arelu_cli.cli bench fused-linear --device cuda --d 4096 \
  --sizes 16384x131072,65536x262144 --methods fused --chunk 16384 --vocab-chunk 8192 \
  --out "$OUT/fused_tile16384x8192.csv"
# The opt-in tile-skipping GEMMs against the default, on the first run's d = 2048 case.
want tiles && step tiles 40 python3 -m arelu_cli.cli bench fused-linear --device cuda --d 2048 \
  --sizes 16384x131072 --methods fused,fused-tiles --out "$OUT/fused_tiles.csv"
want hf && step hf 45 python3 -m arelu_cli.cli bench hf --device cuda --out "$OUT/hf.csv"
# Where a small loss forward's time goes (host or kernel) and the kernel's launch options.
want launch && step launch 40 python3 scripts/loss_launch.py "$OUT/loss_launch.csv"
# A small fwd+bwd call under torch.profiler, host and device time per operator (into the log:
# at most 8 files come back).
want profile && step profile 40 python3 scripts/loss_profile.py
want train && [ -d data/iwslt14 ] && step train 45 python3 -m arelu_cli.cli bench train --device cuda \
  --recipe recipes/iwslt14.toml --fused --repeats 5 --out "$OUT/train_iwslt14.csv"
grep -E "^== |passed|failed|error" "$LOG" | tail -n 40
