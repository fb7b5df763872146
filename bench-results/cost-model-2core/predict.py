"""Model predictions next to the measured membership times (bench-results/cost-model-2core)."""
import os, subprocess, sys, json
measured = {  # (kernels, K, budget, seeded): membership seconds (BenchmarkSearch, each a mean of its runs)
    ("avx512ifma", 16384, 0, False): [1.521, 1.691],
    ("avx2", 16384, 0, False): [2.411, 2.372],
    ("scalar", 16384, 0, False): [4.046, 2.830],
    ("avx512ifma", 65536, 0, False): [3.738],
    ("avx2", 65536, 0, False): [6.065],
    ("scalar", 65536, 0, False): [7.850],
    ("avx512ifma", 65536, 4e9, False): [6.068],
    ("avx512ifma", 65536, 4e9, True): [6.388],
    ("avx2", 65536, 4e9, False): [7.635],
    ("avx2", 65536, 4e9, True): [8.115],
    ("avx512ifma", 131072, 4e9, True): [11.552],
    ("avx512ifma", 131072, 4e9, False): [10.636],
    ("avx2", 131072, 4e9, True): [15.430],
    ("avx2", 131072, 4e9, False): [14.610],
}
if len(sys.argv) > 1:  # child: one kernel set
    import encmatch
    out = {}
    for (ks, K, b, sd), m in measured.items():
        if ks != sys.argv[1]:
            continue
        r = encmatch.choose_strategy(512, expected_size=K, strategy="bsgs-tbe", n1=32, workers=2,
                                     memory_budget=int(b) or None, seeded=sd, fold=True)
        assert r["kernels"] == ks, r["kernels"]
        c = r["candidates"][0]
        out[f"{K} {int(b)} {sd}"] = (c["query_seconds"], c["streamed"])
    print(json.dumps(out))
    sys.exit()
print("| kernels | K | store | measured (s) | model (s) | model / measured |")
print("| --- | --- | --- | --- | --- | --- |")
for ks in ("avx512ifma", "avx2", "scalar"):
    res = json.loads(subprocess.run([sys.executable, __file__, ks], env={**os.environ, "ENCMATCH_KERNELS": ks},
                                    capture_output=True, text=True, check=True).stdout)
    for (k2, K, b, sd), m in measured.items():
        if k2 != ks:
            continue
        pred, streamed = res[f"{K} {int(b)} {sd}"]
        store = ("streamed 4 GB, " + ("seeded" if sd else "public-key")) if b else "in memory"
        ratios = ", ".join(f"{pred / x:.2f}" for x in m)
        print(f"| {ks} | {K:,} | {store} | {', '.join(f'{x:.2f}' for x in m)} | {pred:.2f} | {ratios} |")
