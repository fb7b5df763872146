"""The benchmark's outputs (:func:`write_outputs`): ``results.json``, ``results.csv`` (one row per
K x strategy, with hardware and parameters), ``time.png``, ``ram.png``, ``disk.png`` and
``results.md`` (:func:`markdown_table`: our figures beside the HyDia paper's Tables 6-8,
:func:`load_reference`, at a secure preset; at an INSECURE one our rows are marked so and the
published ones are set apart, as not comparable). A figure of a single timed trial is shown as
``value (n=1)``, without a ``±``; the plots of one gallery size are bars (:func:`figure`), and every
tick is a plain number. :func:`check_out_dir` checks the output folder before any work.
"""

from __future__ import annotations

import csv
import json
import os
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from .._util.plots import pyplot
from .._util.atomic import check_writable_folder
from ..errors import InvalidArgument
from .bench import GB, REFERENCE_APPROACH, fmt_pm, series

__all__ = ["load_reference", "write_outputs", "check_out_dir", "markdown_table", "figure"]


def load_reference() -> dict:
    """The published figures of papers/000 Tables 6-8 (``reference/papers000.json``, shipped with the package)."""
    return json.loads(resources.files("encmatch").joinpath("reference/papers000.json").read_text(encoding="utf-8"))


#: Columns of results.csv, in order.
CSV_FIELDS = (
    "K", "Km", "strategy", "encryption", "n1", "workload", "delta", "preset", "log_n", "log_qp", "kappa", "dim",
    "trials", "passed", "failed", "membership_s", "membership_std_s", "predicted_membership_s", "identification_s",
    "identification_std_s", "rtt_s", "rtt_std_s", "peak_rss_bytes", "peak_rss_bytes_std", "keygen_s", "enroll_s", "setup_s",
    "setup_peak_rss_bytes", "key_disk_bytes", "index_disk_bytes", "index_bytes_per_entry", "key_bytes_sent", "query_bytes",
    "membership_result_bytes", "identification_result_bytes", "rotation_keys", "streamed",
    "cpu", "cores", "ram_bytes", "kernels",
)


def _csv_row(doc: dict, rec: dict) -> dict:
    """One results.csv row: the configuration's figures, parameters and hardware."""
    p, hw, setup = doc["parameters"], doc["hardware"], rec["setup"]
    row = {k: rec.get(k) for k in CSV_FIELDS}
    row.update({k: p.get(k) for k in ("preset", "log_n", "log_qp", "kappa", "dim")})
    row.update(trials=p["trials"], keygen_s=setup["keygen_s"], enroll_s=setup["enroll_s"], setup_s=setup["total_s"],
               setup_peak_rss_bytes=setup["trial"]["peak_rss_bytes"], rotation_keys=setup.get("rotation_keys"),
               cpu=hw["cpu"], cores=hw["cores"], ram_bytes=hw["ram_bytes"], kernels=hw.get("kernels"))
    return row


def _reference_rows(doc: dict, ref: dict) -> list[dict]:
    """The published CPU rows at our sizes, kappa (Table 6 for kappa 10, else Tables 7-8) and approaches."""
    kappa = doc["parameters"]["kappa"]
    want_kappa = 10 if kappa == 10 else 8
    sizes = {rec["K"] for rec in doc["configs"]}
    approaches = {REFERENCE_APPROACH.get(rec["strategy"]) for rec in doc["configs"]}
    return [r for r in ref["rows"] if r["device"] == "CPU" and r["kappa"] == want_kappa and r["K"] in sizes
            and r["approach"] in approaches]


_TABLE_HEAD = [
    "| K | Km | approach | source | RTT (s) | membership (s) | identification (s) | RAM (GB) | disk (GB) "
    "| index/entry (KB) | enroll (s) | keygen (s) | passed/failed |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
]


def _our_row(rec: dict, cores: int, insecure: str) -> str:
    """One of our configurations as a Markdown row; ``insecure`` is the preset name when it is INSECURE."""
    name = series(rec) if rec["strategy"] == "dg" else f"{series(rec)} n1={rec.get('n1')}"
    disk = (rec["key_disk_bytes"] + rec["index_disk_bytes"]) / GB
    per_entry = rec["index_disk_bytes"] / rec["K"] / 1e3
    n = rec.get("passed")
    source = f"encmatch, {cores} cores" + (f", INSECURE {insecure}" if insecure else "")
    return (f"| {rec['K']:,} | {rec['Km']} | {name} | {source} | "
            f"{fmt_pm(rec['rtt_s'], rec['rtt_std_s'], n=n)} | "
            f"{fmt_pm(rec['membership_s'], rec['membership_std_s'], n=n)} | "
            f"{fmt_pm(rec['identification_s'], rec['identification_std_s'], n=n)} | "
            f"{fmt_pm(rec['peak_rss_bytes'], rec['peak_rss_bytes_std'], GB, 1, n=n)} | {disk:.2f} | {per_entry:.1f} | "
            f"{rec['setup']['enroll_s']:.1f} | {rec['setup']['keygen_s']:.1f} | {rec['passed']}/{rec['failed']} |")


def _ref_row(r: dict) -> str:
    """One published papers/000 row as a Markdown row."""
    return (f"| {r['K']:,} | {r['Km']} | {r['approach']} | papers/000 Table {r['table']}, 40 threads | {r['rtt_s']:.2f} | "
            f"{r['membership_s']:.2f} ± {r['membership_std_s']:.2f} | {r['index_s']:.2f} ± {r['index_std_s']:.2f} | "
            f"{r['ram_gb']:.1f} ± {r['ram_std_gb']:.1f} | {r['disk_gb']:.2f} | - | - | - | - |")


def markdown_table(doc: dict, ref: dict | None = None) -> str:
    """Our figures and the published ones of papers/000 (same K, kappa, CPU approaches) as Markdown.

    At a secure preset the published rows sit beside ours, K by K. At an
    INSECURE preset (``toy``, ``toy-real``) they are not comparable: our
    rows are marked INSECURE and the published ones go to a separate table,
    for reference only. A figure of a single timed trial is shown without
    ``±`` and marked ``(n=1)``.
    """
    ref = ref if ref is not None else load_reference()
    p, hw = doc["parameters"], doc["hardware"]
    insecure = p["preset"] if p.get("insecure") else ""
    lines = [
        f"# encmatch benchmark ({p['workload']} workload)",
        "",
        f"Machine: {hw['cpu']}, {hw['cores']} cores, {hw['ram_bytes'] / GB:.1f} GB RAM"
        + (f", kernels {hw['kernels']}" if hw.get("kernels") else "") + ". "
        f"Parameters: preset {p['preset']}{' (INSECURE)' if insecure else ''}, N = 2^{p['log_n']}, "
        f"log QP {float(p['log_qp'] or 0):.0f}, kappa {p['kappa']}, dim {p['dim']}, delta {p.get('delta')}, "
        f"Km = {p['matches']}, {p['trials']} trials (trial 1 = setup; mean ± population std of trials 2..t "
        f"that passed, n in the passed column; a single passing trial is shown as its value with (n=1), no ±).",
        "",
    ]
    if insecure:
        lines += [f"**INSECURE: preset {insecure} gives no security (a small ring, for tests). These figures are "
                  "not comparable with the published ones of papers/000, which are at secure parameters; those "
                  "are listed apart below, for reference only.**", ""]
    refs = _reference_rows(doc, ref)
    if refs and refs[0]["kappa"] != p["kappa"]:
        lines += [f"The papers/000 rows are at their kappa {refs[0]['kappa']}, not ours: a comparison of "
                  "cost at the papers' setting, not at the same comparator.", ""]
    margins = sorted({round(w["margin"], 4) for w in doc["workloads"].values()}) if doc["workloads"] else []
    if margins:
        lines += [f"Comparator at kappa {p['kappa']}: value band +-{margins[-1]} around delta "
                  "(membership counts are exact for scores outside it; docs/COMPARATOR.md).", ""]
    lines += [
        "Membership and identification: server-side search time. RTT: membership round trip "
        "(encrypt, search, decrypt) in ours; in papers/000 RTT is enrollment + mean wall time of a whole run. "
        "RAM: peak RSS of the process (sampled every 0.5 s). Disk: keys + index. Index/entry: encrypted gallery "
        "bytes per entry (seeded = the key owner's secret-key enrollment, else public-key).",
        "",
    ]
    if insecure:
        lines.append(f"## encmatch at preset {insecure} (INSECURE)")
        lines.append("")
    lines += _TABLE_HEAD
    for size in sorted({rec["K"] for rec in doc["configs"]}):
        for rec in (r for r in doc["configs"] if r["K"] == size):
            lines.append(_our_row(rec, hw["cores"], insecure))
        if not insecure:
            lines += [_ref_row(r) for r in refs if r["K"] == size]
    if insecure and refs:
        lines += ["", "## papers/000, published (secure parameters): reference only, NOT comparable with the "
                      f"INSECURE {insecure} rows above", ""] + _TABLE_HEAD + [_ref_row(r) for r in refs]
    lines += ["", f"papers/000 hardware: {ref['hardware']['CPU']}. Approaches: "
              + "; ".join(f"{k} = {v}" for k, v in ref["approaches"].items() if "CPU" in k) + "."]
    if doc["workloads"]:
        lines += ["", "Workload margins (cosine): " + "; ".join(
            f"K = {int(k):,}: planted >= {w['min_planted_score'] if w['min_planted_score'] is None else round(w['min_planted_score'], 4)}, "
            f"others <= {w['max_other_score']:.4f}, delta {w['delta']} ± margin {w['margin']:.3f}"
            for k, w in doc["workloads"].items())]
    return "\n".join(lines) + "\n"


def _plot(doc: dict, path: Path, metrics: Sequence[tuple[str, str | None, str]], ylabel: str, scale: float) -> None:
    """Draw :func:`figure` and write it to ``path``."""
    plt = pyplot()
    fig = figure(doc, metrics, ylabel, scale)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure(doc: dict, metrics: Sequence[tuple[str, str | None, str]], ylabel: str, scale: float):
    """A figure of ``metrics`` (``(key, std key or None, label)``) per series (strategy and store).

    Several gallery sizes: a log-log plot against K, one line per series
    and metric, with std error bars where more than one trial passed. One
    size: grouped bars (a line of one point is only a dot). Ticks are
    plain numbers (``0.25``, never ``2.5x10^-1``); an INSECURE preset is
    named in the title.
    """
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    names = list(dict.fromkeys(series(r) for r in doc["configs"]))
    sizes = sorted({r["K"] for r in doc["configs"]})

    def values(recs, key, std_key):
        """(K, value, error, n) of each record with the metric: n the trials averaged (None for a metric
        measured once, without std), error 0 for a single trial."""
        out = []
        for r in recs:
            y = _metric(r, key)
            if y is None:
                continue
            n = r.get("passed") if std_key else None
            e = _metric(r, std_key) if std_key and (n or 0) > 1 else 0.0
            out.append((r["K"], y / scale, (e or 0.0) / scale, n))
        return out

    if len(sizes) == 1:
        bars = [(f"{name}{' ' + label if label else ''}", v)
                for name in names for key, std_key, label in metrics
                for v in values([r for r in doc["configs"] if series(r) == name], key, std_key)]
        x = np.arange(len(bars))
        errors = [b[1][2] for b in bars]
        ax.bar(x, [b[1][1] for b in bars], yerr=errors if any(errors) else None, capsize=3,
               color=[f"C{i % 10}" for i in range(len(bars))])
        for xi, (_label, (_k, y, _e, n)) in zip(x, bars):
            ax.annotate(f"{y:.3g}" + (" (n=1)" if n == 1 else ""), (xi, y), ha="center", va="bottom", fontsize=8, xytext=(0, 2),
                        textcoords="offset points")
        ax.set_xticks(x, [b[0] for b in bars], rotation=20, ha="right", fontsize=8)
        ax.set_xlabel(f"gallery size K = {sizes[0]:,}")
        ax.yaxis.set_major_formatter(plain)
    else:
        for name in names:
            recs = sorted((r for r in doc["configs"] if series(r) == name), key=lambda r: r["K"])
            for key, std_key, label in metrics:
                pts = values(recs, key, std_key)
                if not pts:
                    continue
                k, y, e, _n = zip(*pts)
                ax.errorbar(k, y, yerr=e, marker="o", capsize=3, label=f"{name}{' ' + label if label else ''}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{k:,}" for k in sizes])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
        ax.set_xlabel("gallery size K")
        ax.legend(fontsize=8)
    ax.set_ylabel(ylabel)
    p, hw = doc["parameters"], doc["hardware"]
    insecure = " (INSECURE)" if p.get("insecure") else ""
    ax.set_title(f"{p['workload']}, dim {p['dim']}, kappa {p['kappa']}, {p['preset']}{insecure}; {hw['cores']} cores",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def _metric(rec: dict, key: str | None):
    """A record's metric, looking into ``setup`` for setup metrics; disk is keys + index."""
    if key is None:
        return None
    if key == "disk_bytes":
        return rec["key_disk_bytes"] + rec["index_disk_bytes"]
    return rec.get(key, rec["setup"].get(key))


def check_out_dir(out_dir: str | os.PathLike) -> Path:
    """Raise InvalidArgument unless :func:`write_outputs` can write into ``out_dir``; returns it as a Path.

    Meant before the benchmark runs: ``out_dir`` is a folder or can be
    made (its nearest existing ancestor is a writable folder).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"--out {out} is a file, not a folder")
    probe = out
    while not probe.exists():
        probe = probe.parent
    check_writable_folder(probe, f"--out {out}")
    return out


def write_outputs(doc: dict, out_dir: Path) -> dict[str, Path]:
    """Write results.json, results.csv, time.png, ram.png, disk.png and results.md into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in
             ("results.json", "results.csv", "time.png", "ram.png", "disk.png", "results.md")}
    paths["results.json"].write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")
    with open(paths["results.csv"], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for rec in doc["configs"]:
            w.writerow(_csv_row(doc, rec))
    _plot(doc, paths["time.png"], [("membership_s", "membership_std_s", "membership"),
                                   ("identification_s", "identification_std_s", "identification")], "seconds", 1.0)
    _plot(doc, paths["ram.png"], [("peak_rss_bytes", "peak_rss_bytes_std", "")], "peak RSS (GB)", GB)
    _plot(doc, paths["disk.png"], [("key_disk_bytes", None, "keys"), ("index_disk_bytes", None, "index"),
                                   ("disk_bytes", None, "total")], "disk (GB)", GB)
    paths["results.md"].write_text(markdown_table(doc))
    return paths


def _json_default(obj):
    """JSON encoding of numpy scalars and arrays."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")
