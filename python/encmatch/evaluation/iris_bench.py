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
import time
from pathlib import Path
from typing import Any, Callable

from ..iris import encrypted as E
from ..iris.encoding import DEFAULT_ROTATION_SHIFT, shifts
from ..iris.generator import POPULATIONS, generate
from ..iris.model import match as model_match
from .bench import RssSampler, hardware

__all__ = ["run", "PAPER_TABLE2_MS"]

#: papers/004 Table 2 (8 RTX-5090, 32 eyes x 31 rotations, 7 x 2^14 codes), ms.
PAPER_TABLE2_MS = {"CCMM": 259, "core total": 1320, "post-process total": 30, "pre-process total": 487}


def _size(path: Path) -> int:
    """Bytes of a file or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run(out: Path, work: Path, preset: str, gallery_size: int, eyes: int, enrolled: int, t: float,
        population: str = "daugman", seed: int = 0, kappa: int | None = None,
        rotation_shift: int = DEFAULT_ROTATION_SHIFT, key_cache_gb: float = E.DEFAULT_KEY_CACHE_GB,
        log: Callable[[str], None] = lambda _: None) -> dict:
    """Run the benchmark; returns the results dict (also written to ``out``).

    ``log`` receives a line as each step starts and ends (long runs at the
    default preset take hours).
    """
    shifts(rotation_shift)  # a bad shift fails now, not after key generation and enrollment
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}

    def step(name: str, f: Callable[[], Any]) -> Any:
        log(f"{name} ...")
        t0 = time.perf_counter()
        v = f()
        steps[name] = time.perf_counter() - t0
        log(f"{name}: {steps[name]:.1f} s")
        return v

    keys, db, q, r, r2 = work / "keys", work / "db", work / "query.bin", work / "result.bin", work / "pairs.bin"
    # A folding database's two passes share one product (the fold pass keeps it).
    product = work / "product.bin" if preset in E.FOLD_PRESETS else None
    with RssSampler() as rss:
        gallery, queries = step("generate data (plaintext)", lambda: generate(
            gallery_size, n_queries=eyes, n_enrolled=enrolled, seed=seed, generator=POPULATIONS[population]))
        step("key generation", lambda: E.keygen(keys, preset, kappa))
        step("enroll (encrypt database)", lambda: E.Client(keys).enroll(gallery, db, t))
        step("encrypt query", lambda: E.Querier(keys).encrypt(queries, q, rotation_shift))
        stats = step("match (server, total)", lambda: E.Server(keys).search(db, q, r, key_cache_gb=key_cache_gb,
                                                                            product=product))
        values = step("decrypt", lambda: E.Client(keys).decrypt(r))
        pair_stats = pairs = None
        if isinstance(values, E.FoldValues) and values.flagged():
            flagged = values.flagged()
            pair_stats = step(f"match, pair pass on {len(flagged)} flagged eyes (server, total)", lambda: E.Server(keys).search(
                db, q, r2, key_cache_gb=key_cache_gb, pair_eyes=flagged, product=product))
            pairs = step("decrypt the pair pass", lambda: E.Client(keys).decrypt(r2))
        model = step("plaintext model", lambda: model_match(queries, gallery, t, rotation_shift=rotation_shift))
        if isinstance(values, E.FoldValues):
            v = E.validate_fold(values, pairs, model, E.FOLD_GUARD, E.Client(keys).band(t))
        else:
            v = E.validate(values, model, E.Client(keys).band(t))
    server_keys = ("load_seconds", "product_seconds", "product_from_file", "discretised", "pipeline_seconds", "gemm_engine", "stage_wall_seconds",
                   "half_bootstraps", "classified", "bootstraps", "blocks", "key_cache", "fold")
    res = {
        "machine": hardware(),
        "preset": preset, "insecure": preset.startswith("toy"), "kappa": kappa, "gallery": gallery_size, "eyes": eyes,
        "rotations": stats["rotations"], "enrolled": enrolled, "t": t, "population": population, "seed": seed,
        "steps_seconds": steps,
        "server": {k: stats[k] for k in server_keys},
        "pair_pass": None if pair_stats is None else {k: pair_stats[k] for k in server_keys},
        "answers": None if not isinstance(values, E.FoldValues) else
        {"match": int((values.answers() == E.MATCH).sum()), "no_match": int((values.answers() == E.NO_MATCH).sum()),
         "flagged": values.flagged()},
        "bytes": {"keys_holder": _size(keys / "holder"), "keys_querier": _size(keys / "querier"),
                  "keys_server": _size(keys / "server"), "database": _size(db), "query": _size(q), "result": _size(r),
                  "kept_product": None if product is None else _size(product)},
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
        f"t = {res['t']}, {res['machine']['cores']} cores ({res['machine']['cpu']}; GEMMs on {res['server']['gemm_engine']}); "
        f"peak RSS {res['peak_rss_bytes'] / 2**30:.1f} GiB.",
        "",
        "| step | seconds |",
        "| --- | --- |",
    ]
    lines += [f"| {k} | {v:.2f} |" for k, v in res["steps_seconds"].items()]
    s = res["server"]
    lines += ["", "Server, inside the match:", "", "| stage | seconds |", "| --- | --- |",
              f"| load keys, database, query | {s['load_seconds']:.2f} |",
              f"| encrypted matrix product (database read, GEMMs on {s['gemm_engine']}, rescale) | {s['product_seconds']:.2f} |",
              f"| margins to bits (wall) | {s['pipeline_seconds']:.2f} |"]
    if s["fold"] is None:
        lines += [f"| . {k} (wall) | {v:.2f} |" for k, v in s["stage_wall_seconds"].items()]
        counts = (f"{s['half_bootstraps']} half-bootstraps, {s['classified']} ciphertexts classified, "
                  f"{s['bootstraps']} bootstraps in the reduction")
    else:
        lines += [f"| . {k} (wall) | {v:.2f} |" for k, v in s["fold"]["stage_wall_seconds"].items()]
        f, a = s["fold"], res["answers"]
        counts = (f"Algorithm 2: {f['groups']} fold groups, {f['refreshes']} refreshes, {f['classified']} ciphertexts "
                  f"classified, {f['reduction_bootstraps']} bootstraps in the reduction; answers: {a['match']} match, "
                  f"{a['no_match']} no match, {len(a['flagged'])} flagged")
        p = res["pair_pass"]
        if p is not None:
            counts += (f"; pair pass on the flagged eyes: {p['product_seconds']:.2f} s product, "
                       f"{p['pipeline_seconds']:.2f} s pipeline ({p['fold']['refreshes']} refreshes)")
    counts += "; results discretised to 0/1" if s["discretised"] else "; results not discretised"
    lines += ["", f"{counts}, {s['blocks']} database blocks; "
              f"Galois keys: {s['key_cache']['loads']} reads from disk ({s['key_cache']['load_seconds']:.1f} s), "
              f"{s['key_cache']['hits']} from memory, at most {s['key_cache']['peak_bytes'] / 2**30:.1f} GiB held "
              f"(budget {s['key_cache']['budget_bytes'] / 2**30:.2f} GiB).", "",
              "| bytes | |", "| --- | --- |"]
    lines += [f"| {k} | {v:,} |" for k, v in res["bytes"].items() if v is not None]
    val = res["validation"]
    lines += ["", f"Validation: {val['eyes']} eyes, {val['matches']} matches by the model, "
              f"{len(val['guard_band_eyes'])} in the guard band (margin band {val['band']:.4f}); "
              f"{'every eye outside the band agrees' if val['ok'] else 'DISAGREEMENTS: ' + str(val['disagreements'])}.",
              "", "papers/004 Table 2 (8 RTX-5090, 32 eyes, 7 x 2^14 codes), ms: "
              + ", ".join(f"{k} {v}" for k, v in res["papers004_table2_ms"].items()), ""]
    return "\n".join(lines)
