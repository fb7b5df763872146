#!/usr/bin/env bash
# Many probes in one call against one loaded index vs one call per probe (issue 17, item 1).
# Default preset (128-bit), kappa 13, 192-d MobileFaceNet LFW embeddings, 240 enrolled faces, 8 probes.
set -euo pipefail
E=/work/main/.venv/bin/encmatch
W=${1:-/tmp/mp/w}
mkdir -p $W
cd $W
if [ ! -d keys ]; then
  /work/main/.venv/bin/python - <<'PY'
import numpy as np
from encmatch import data
f = data.load_faces("lfw", "mobilefacenet")
rng = np.random.default_rng(3)
pick = rng.choice(len(f.emb), 248, replace=False)
np.savez("gallery.npz", emb=f.emb[pick[:240]], name=f.names[f.label[pick[:240]]])
np.save("probes.npy", np.vstack([f.emb[pick[:4]], f.emb[pick[240:244]]]))
for i in range(8):
    np.save(f"probe{i}.npy", np.vstack([f.emb[pick[:4]], f.emb[pick[240:244]]])[i])
PY
  $E keygen --keys keys --dim 192 > keygen.txt
  $E enroll --keys keys --index ix --delta 0.6 --labels-from name gallery.npz > enroll.txt
fi
t0=$(date +%s.%N)
for i in 0 1 2 3 4 5 6 7; do $E query --keys keys --index ix --out r$i.bin probe$i.npy > one$i.txt; done
t1=$(date +%s.%N)
rm -rf many && $E query --keys keys --index ix --out many probes.npy > many.txt
t2=$(date +%s.%N)
echo "one call per probe (8 calls): $(echo "$t1 - $t0" | bc) s"
echo "one call, 8 probes:           $(echo "$t2 - $t1" | bc) s"
grep -h "loaded index" one0.txt many.txt
tail -1 many.txt
for i in 0 1 2 3 4 5 6 7; do cmp <(/work/main/.venv/bin/encmatch decrypt --keys keys --json r$i.bin) <(/work/main/.venv/bin/encmatch decrypt --keys keys --json many/000$i.bin) >/dev/null && echo "probe $i: same answer"; done
