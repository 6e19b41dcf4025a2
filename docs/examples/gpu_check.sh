#!/usr/bin/env bash
# One prepared GPU check, about 8 minutes on one NVIDIA H200 (2026-12-04: two device
# calls of 274 s and 206 s after the machine started). Run from the repository root on a machine with CUDA, PyTorch,
# numpy, scipy, statsmodels, scikit-learn, pytest and pytest-xdist; OUT is the folder
# for the logs (default ./gpu-check). No dataset is needed: it writes random images in
# CIFAR's real on-disk layouts at their real sizes, which is enough to time a
# paper-scale round (the estimates time training, not accuracy).
#
#   1. the CUDA tests (tests/test_fl_cuda.py);
#   2. `audit estimate` of FLAYER's and LIPS's paper scales at 10 seeds (two arms timed,
#      the others take their mean);
#   3. the four trained claims at smoke scale, seeds 0 and 1, through the process pool
#      on the GPU (reports under $OUT/smoke); to compare with the CPU, run the same
#      command with --device cpu into another folder and `audit diff` the two folders
#      (on 2026-12-04 every question's word agreed, and numbers differed);
#   4. `audit bench --device cuda`.
# The exit status is 1 if any step failed.
set -o pipefail
fail=0
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD AUDIT_CACHE=${AUDIT_CACHE:-/tmp/auditcache}
# a fresh folder each run (the tests' writers refuse to write over an earlier copy)
DATA=${DATA:-$(mktemp -d /tmp/audit-random-cifar.XXXXXX)/data}
T0=$(date +%s)
el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__,
torch.cuda.get_device_name())"; } 2>&1 | tee "$OUT/env.txt"

el cuda-tests
timeout 120 python3 -m pytest tests/test_fl_cuda.py -q -n 0 2>&1 | tee "$OUT/cuda_tests.txt" \
    || fail=1

el random-images
python3 - "$DATA" <<'PY'
import sys
from pathlib import Path

sys.path.insert(0, "tests")  # the tests' writers of the real pickle layouts
from test_paper_scale import write_cifar10, write_cifar100

root = Path(sys.argv[1])
write_cifar100(root, n_train=50000, n_test=10000, classes=100)
write_cifar10(root, n_per_batch=10000, n_test=10000)
PY
[ $? -eq 0 ] || fail=1

el estimate-flayer
timeout 150 python3 -m audit estimate flayer-masked-zero --scale paper --device cuda \
    --data-dir "$DATA" --seeds 10 --rounds 1,2 --arms literal,fedavg 2>&1 \
    | tee "$OUT/est_flayer.txt" || fail=1
el estimate-lips
timeout 100 python3 -m audit estimate lips-dropout-control --scale paper --device cuda \
    --data-dir "$DATA" --seeds 10 --rounds 2,6 --arms lips,fedbn 2>&1 \
    | tee "$OUT/est_lips.txt" || fail=1

el smoke-pool
timeout 300 python3 -m audit run flayer-masked-zero lips-dropout-control fedtlu-lower-bound \
    genefl-inverted-cosine --device cuda --seeds 2 --backend pool --workers 8 \
    --out "$OUT/smoke" --quiet --no-eta 2>&1 | tee "$OUT/smoke.txt" || fail=1

el bench
timeout 50 python3 -m audit bench --device cuda --repeats 3 2>&1 | tee "$OUT/bench.txt" \
    || fail=1
el "done (failed: $fail)"
exit "$fail"
