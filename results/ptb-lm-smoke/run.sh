#!/usr/bin/env bash
# The smoke run of results/ptb-lm-smoke, from the repository root (PTB from ../shared/data/ptb).
set -euo pipefail
arelu prepare ptb --source ../shared/data/ptb --out runs/ptb-lm-smoke/data
for ts in softmax:200 sparsemax:100 1.5-entmax:100 1.5-relu:100; do t=${ts%:*}; n=${ts#*:}
  arelu train --recipe ptb-lm --transform "$t" --data runs/ptb-lm-smoke/data \
    --out "runs/ptb-lm-smoke/$t" --max-steps "$n" --set train.valid_every=100 --set train.save_every=100
done
cd runs/ptb-lm-smoke
E="--split test --prefix-tokens 5 --max-prompts 100 --max-tokens 30 --seed 1 --out lm_eval.csv --generations generations"
arelu lm-eval --checkpoint softmax --checkpoint sparsemax --checkpoint 1.5-entmax --checkpoint 1.5-relu $E
arelu lm-eval --checkpoint softmax --top-p 0.9 $E
arelu lm-eval --checkpoint softmax --checkpoint 1.5-relu --decoding greedy $E
