"""``encmatch iris bench``: the encrypted matching step by step, beside papers/004 Table 2.

Generates a gallery and a batch of query eyes (:func:`encmatch.iris.generate`),
then runs every role through its files and times each step: key generation,
enrollment, query encryption, the server's match (load, encrypted matrix
product, half-bootstraps, classification, reduction) and decryption; checks
every eye against the plaintext model outside the guard band; and writes
``results.json`` and ``results.md`` with the machine, the parameters, the
sizes on disk and the peak memory of this process (the core runs in it).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from ..bench import RssSampler
from . import encrypted as E
from .generator import POPULATIONS, generate
from .model import match as model_match

__all__ = ["run", "PAPER_TABLE2_MS"]

#: papers/004 Table 2 (8 RTX-5090, 32 eyes x 31 rotations, 7 x 2^14 codes), ms.
PAPER_TABLE2_MS = {"CCMM": 259, "core total": 1320, "post-process total": 30, "pre-process total": 487}


def _size(path: Path) -> int:
    """Bytes of a file or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run(out: Path, work: Path, preset: str, gallery_size: int, eyes: int, enrolled: int, t: float,
        population: str = "daugman", seed: int = 0, kappa: int | None = None) -> dict:
    """Run the benchmark; returns the results dict (also written to ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    with RssSampler() as rss:
        t0 = time.perf_counter()
        gallery, queries = generate(gallery_size, n_queries=eyes, n_enrolled=enrolled, seed=seed,
                                    generator=POPULATIONS[population])
        steps["generate data (plaintext)"] = time.perf_counter() - t0
        keys = work / "keys"
        t0 = time.perf_counter()
        E.keygen(keys, preset, kappa)
        steps["key generation"] = time.perf_counter() - t0
        db = work / "db"
        t0 = time.perf_counter()
        E.KeyHolder(keys).enroll(gallery, db, t)
        steps["enroll (encrypt database)"] = time.perf_counter() - t0
        q = work / "query.bin"
        t0 = time.perf_counter()
        E.Querier(keys).encrypt(queries, q)
        steps["encrypt query"] = time.perf_counter() - t0
        r = work / "result.bin"
        stats = E.Server(keys).match(db, q, r)
        steps["match (server, total)"] = stats["seconds"]
        t0 = time.perf_counter()
        values = E.KeyHolder(keys).decrypt(r)
        steps["decrypt"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        model = model_match(queries, gallery, t)
        steps["plaintext model"] = time.perf_counter() - t0
        v = E.validate(values, model, E.KeyHolder(keys).band(t))
    res = {
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "python": platform.python_version()},
        "preset": preset, "insecure": preset == "toy", "kappa": kappa, "gallery": gallery_size, "eyes": eyes,
        "rotations": stats["rotations"], "enrolled": enrolled, "t": t, "population": population, "seed": seed,
        "steps_seconds": steps,
        "server": {k: stats[k] for k in ("load_seconds", "product_seconds", "pipeline_seconds", "stage_core_seconds",
                                          "half_bootstraps", "classified", "bootstraps", "blocks")},
        "bytes": {"keys_holder": _size(keys / "holder"), "keys_querier": _size(keys / "querier"),
                  "keys_server": _size(keys / "server"), "database": _size(db), "query": _size(q), "result": _size(r)},
        "peak_rss_bytes": rss.peak,
        "validation": v.to_dict(),
        "papers004_table2_ms": PAPER_TABLE2_MS,
    }
    (out / "results.json").write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    (out / "results.md").write_text(_markdown(res), encoding="utf-8")
    return res


def _markdown(res: dict) -> str:
    """The results as a markdown report."""
    lines = [
        f"# Encrypted iris matching: {res['eyes']} eyes x {res['rotations']} rotations against {res['gallery']} codes",
        "",
        f"Preset `{res['preset']}`{' (INSECURE, not comparable with papers/004)' if res['insecure'] else ''}, "
        f"t = {res['t']}, {res['machine']['cpus']} CPUs ({res['machine']['processor']}); "
        f"peak RSS {res['peak_rss_bytes'] / 2**30:.1f} GiB.",
        "",
        "| step | seconds |",
        "| --- | --- |",
    ]
    lines += [f"| {k} | {v:.2f} |" for k, v in res["steps_seconds"].items()]
    s = res["server"]
    lines += ["", "Server, inside the match:", "", "| stage | seconds |", "| --- | --- |",
              f"| load keys, database, query | {s['load_seconds']:.2f} |",
              f"| encrypted matrix product (GEMMs, rescale) | {s['product_seconds']:.2f} |",
              f"| margins to bits (wall) | {s['pipeline_seconds']:.2f} |"]
    lines += [f"| . {k} (core-seconds) | {v:.2f} |" for k, v in s["stage_core_seconds"].items()]
    lines += ["", f"{s['half_bootstraps']} half-bootstraps, {s['classified']} ciphertexts classified, "
              f"{s['bootstraps']} bootstraps in the reduction, {s['blocks']} database blocks.", "",
              "| bytes | |", "| --- | --- |"]
    lines += [f"| {k} | {v:,} |" for k, v in res["bytes"].items()]
    val = res["validation"]
    lines += ["", f"Validation: {val['eyes']} eyes, {val['matches']} matches by the model, "
              f"{len(val['guard_band_eyes'])} in the guard band (margin band {val['band']:.4f}); "
              f"{'every eye outside the band agrees' if val['ok'] else 'DISAGREEMENTS: ' + str(val['disagreements'])}.",
              "", "papers/004 Table 2 (8 RTX-5090, 32 eyes, 7 x 2^14 codes), ms: "
              + ", ".join(f"{k} {v}" for k, v in res["papers004_table2_ms"].items()), ""]
    return "\n".join(lines)
