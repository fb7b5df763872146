"""Check the encrypted search against exact brute force on the same gallery and queries.

:func:`run` enrolls a gallery, runs every query in both modes through the
full encrypted pipeline (keygen or reused keys, enroll, encrypt, search,
decrypt; each step timed) and hands the answers to :func:`compare`, which
judges them against :mod:`encmatch.evaluation.bruteforce` with the guard bands of the
core's comparator (method ``comparator``):

- **identification**, per (query, gallery entry) pair: the encrypted
  decision (position returned or not) against ``score >= delta``. A
  disagreement is an *error* only if ``|score - delta| > decision_band``;
  inside the band the comparator is allowed either answer.
- **membership**, per query: the decrypted count against the exact count.
  It is an *error* only if it lies outside
  ``[#(score >= delta + value_band) - 0.5, #(score >= delta - value_band) + 0.5]``.

TP/FP/TN/FN take the brute force as the truth (identification: over all
pairs; membership: the ``enrolled`` answer per query), with recall and
precision. :class:`ValidationReport` prints as a table.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import _core
from .._util.defaults import DEFAULT_KAPPA
from .._util.progress import progress as progress_bar
from .._util.ui import describe_strategy
from ..params import AUTO, choose_strategy, comparator
from ..keyholder import Client
from ..enroller import Enroller
from ..server import Server
from ..errors import Corrupt, Exists, InvalidArgument, Mismatch, NotFound
from ..results import MODES, IdentificationResult, MembershipResult, check_mode
from .bruteforce import cosine_scores

#: MobileFaceNet cosine threshold at a false-match rate of 1e-4 per comparison,
#: measured over all 87 million impostor pairs of LFW (FNMR 1.9 % there). A 1:N
#: search compares a query with every entry, so over one 16,384-entry group
#: the 1:1 threshold at FMR 1e-3 (0.457, shared/data/README.md) would give
#: about 16 false matches per query; at 1e-4 it gives about 1.6.
DEFAULT_DELTA = 0.541

__all__ = ["Confusion", "QueryCheck", "ValidationReport", "compare", "run", "open_or_generate_keys", "Steps"]


@dataclass
class Confusion:
    """Confusion counts of the encrypted decisions against brute force, plus guard-band errors."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    disagreements: int = 0
    errors: int = 0

    @property
    def recall(self) -> float | None:
        """TP / (TP + FN), ``None`` when brute force has no positive."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def precision(self) -> float | None:
        """TP / (TP + FP), ``None`` when the encrypted search returned no positive."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    def add(self, encrypted: bool | np.ndarray, exact: bool | np.ndarray) -> None:
        """Count decisions (scalars or boolean arrays of the same shape)."""
        e, x = np.asarray(encrypted, dtype=bool), np.asarray(exact, dtype=bool)
        self.tp += int(np.sum(e & x))
        self.fp += int(np.sum(e & ~x))
        self.fn += int(np.sum(~e & x))
        self.tn += int(np.sum(~e & ~x))
        self.disagreements += int(np.sum(e != x))

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {
            "tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn,
            "disagreements": self.disagreements, "errors": self.errors,
            "recall": self.recall, "precision": self.precision,
        }


@dataclass
class QueryCheck:
    """The verdict on one query, both modes."""

    index: int
    name: str
    best_score: float
    exact_count: int
    count_low: int
    count_high: int
    model_count: float | None = None
    membership: MembershipResult | None = None
    membership_ok: bool = True
    exact_positions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    identification: IdentificationResult | None = None
    band_disagreements: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    errors: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    expected_enrolled: bool | None = None
    #: Scores of the positions either side matched (for display: best first).
    match_scores: dict = field(default_factory=dict)

    def by_score(self, positions: np.ndarray) -> np.ndarray:
        """``positions`` ordered by decreasing score (best match first)."""
        return np.array(sorted(positions.tolist(), key=lambda p: -self.match_scores.get(int(p), -2.0)), dtype=np.int64)

    @property
    def ok(self) -> bool:
        """No answer of this query is wrong outside the guard band."""
        return self.membership_ok and len(self.errors) == 0

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {
            "index": self.index, "name": self.name, "best_score": self.best_score,
            "exact_count": self.exact_count, "count_band": [self.count_low, self.count_high],
            "model_count": self.model_count,
            "membership": self.membership.to_dict() if self.membership else None,
            "membership_ok": self.membership_ok,
            "exact_positions": self.exact_positions.tolist(),
            "identification": self.identification.to_dict() if self.identification else None,
            "band_disagreements": self.band_disagreements.tolist(), "errors": self.errors.tolist(),
            "expected_enrolled": self.expected_enrolled, "ok": self.ok,
        }


@dataclass
class ValidationReport:
    """Outcome of a validation run: per-query checks, confusion counts, bands and timings."""

    delta: float
    kappa: int
    decision_band: float
    value_band: float
    gallery_size: int
    queries: list[QueryCheck]
    identification: Confusion | None
    membership: Confusion | None
    preset: str = ""
    insecure: bool = False
    #: Similarity strategy of the key set and the index, its baby-step size, and whether the server streamed.
    strategy: str = ""
    n1: int = 0
    streamed: bool = False
    gallery_labels: Sequence[str] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    comparator: dict = field(default_factory=dict)

    @property
    def errors(self) -> int:
        """Number of answers wrong outside the guard band (identification pairs + membership queries)."""
        return sum(c.errors for c in (self.identification, self.membership) if c is not None)

    @property
    def ok(self) -> bool:
        """True when every answer agrees with brute force outside the guard band."""
        return self.errors == 0

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {
            "ok": self.ok, "errors": self.errors, "preset": self.preset, "insecure": self.insecure,
            "strategy": self.strategy, "n1": self.n1, "streamed": self.streamed,
            "kappa": self.kappa, "delta": self.delta, "decision_band": self.decision_band,
            "value_band": self.value_band, "gallery_size": self.gallery_size,
            "identification": self.identification.to_dict() if self.identification else None,
            "membership": self.membership.to_dict() if self.membership else None,
            "queries": [q.to_dict() for q in self.queries], "timings": self.timings,
        }

    # ---- pretty printing -------------------------------------------------

    def _names(self, positions: np.ndarray, limit: int = 2) -> str:
        """Positions (with gallery labels when known), at most ``limit`` of them."""
        if len(positions) == 0:
            return "-"
        parts = []
        for p in positions[:limit]:
            label = self.gallery_labels[p] if self.gallery_labels is not None and p < len(self.gallery_labels) else None
            if label and len(label) > 22:
                label = label[:21] + "~"
            parts.append(f"{p} {label}" if label else str(p))
        more = f" +{len(positions) - limit}" if len(positions) > limit else ""
        return ", ".join(parts) + more

    def table(self) -> str:
        """A per-query table: brute force vs encrypted, both modes, and whether they agree."""
        headers = ["#", "query", "best", "member exact", "encrypted", "raw", "agree",
                   "identification exact", "encrypted", "agree"]
        rows = []
        for q in self.queries:
            truth = "" if q.expected_enrolled is None else (" (enrolled)" if q.expected_enrolled else " (not enrolled)")
            m = q.membership
            if m is not None:
                m_enc = f"{'yes' if m.enrolled else 'no'} {m.count}"
                m_raw = f"{m.raw_count:.2f}" if m.raw_count is not None else "-"
                m_agree = _agree(m.count == q.exact_count, q.membership_ok)
            else:
                m_enc = m_raw = m_agree = "-"
            ident = q.identification
            if ident is not None:
                same = np.array_equal(ident.positions, q.exact_positions)
                i_enc = "same" if same else self._names(q.by_score(ident.positions))
                i_agree = _agree(same, len(q.errors) == 0)
            else:
                i_enc = i_agree = "-"
            rows.append([
                str(q.index), q.name + truth, f"{q.best_score:.3f}",
                f"{'yes' if q.exact_count else 'no'} {q.exact_count}", m_enc, m_raw, m_agree,
                self._names(q.by_score(q.exact_positions)), i_enc, i_agree,
            ])
        return format_table(headers, rows)

    def summary(self) -> str:
        """Confusion counts, recall/precision, bands and the verdict, as a few lines."""
        lines = []
        if self.strategy:
            lines.append(f"strategy {describe_strategy(self.strategy, self.n1)}"
                         + (", groups streamed from disk" if self.streamed else ""))
        lines += [
            f"delta {self.delta:g}, kappa {self.kappa}, guard bands: decision +-{self.decision_band:.4g}, "
            f"value +-{self.value_band:.4g}; gallery {self.gallery_size:,}, {len(self.queries)} queries"
        ]
        for name, c in (("identification (pairs)", self.identification), ("membership (queries)", self.membership)):
            if c is None:
                continue
            lines.append(
                f"{name}: TP {c.tp} FP {c.fp} TN {c.tn} FN {c.fn}  recall {_pct(c.recall)}  "
                f"precision {_pct(c.precision)}  disagreements {c.disagreements} "
                f"(outside the guard band: {c.errors})"
            )
        lines.append("verdict: " + ("AGREE with brute force (outside the guard band)" if self.ok
                                    else f"DISAGREE: {self.errors} answer(s) wrong outside the guard band"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table() + "\n" + self.summary()


def _agree(exact_same: bool, ok: bool) -> str:
    """'yes' (identical), 'band' (differs only inside the guard band) or 'NO'."""
    return "yes" if exact_same else ("band" if ok else "NO")


def _pct(x: float | None) -> str:
    """A ratio as a percentage, or n/a."""
    return "n/a" if x is None else f"{100 * x:.2f} %"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned plain-text table."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


# --------------------------------------------------------------------------


def compare(
    scores: np.ndarray,
    delta: float,
    bands: dict,
    membership: Sequence[MembershipResult] | None = None,
    identification: Sequence[IdentificationResult] | None = None,
    *,
    query_names: Sequence[str] | None = None,
    query_enrolled: Sequence[bool] | None = None,
    gallery_labels: Sequence[str] | None = None,
    model_values: np.ndarray | None = None,
    kappa: int = 0,
) -> ValidationReport:
    """Judge encrypted answers against the exact decisions on ``scores`` (``[q, n]`` cosine).

    ``bands`` is the core comparator's answer (``decision_band``,
    ``value_band``); ``model_values`` (``[q, n]``, optional) is the
    comparator's plaintext model at ``scores``, reported as the model's
    expected membership count.
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    nq, n = scores.shape
    db, vb = float(bands["decision_band"]), float(bands["value_band"])
    ident_c = Confusion() if identification is not None else None
    member_c = Confusion() if membership is not None else None
    checks = []
    for i in range(nq):
        s = scores[i]
        exact = s >= delta
        exact_pos = np.flatnonzero(exact)
        check = QueryCheck(
            index=i,
            name=query_names[i] if query_names is not None else f"query {i}",
            best_score=float(s.max()) if n else float("nan"),
            exact_count=int(exact.sum()),
            count_low=int(np.sum(s >= delta + vb)),
            count_high=int(np.sum(s >= delta - vb)),
            model_count=float(model_values[i].sum()) if model_values is not None else None,
            exact_positions=exact_pos,
            expected_enrolled=None if query_enrolled is None else bool(query_enrolled[i]),
            match_scores={int(p): float(s[p]) for p in exact_pos},
        )
        if identification is not None:
            res = identification[i]
            check.identification = res
            enc = np.zeros(n, dtype=bool)
            pos = res.positions[(res.positions >= 0) & (res.positions < n)]
            enc[pos] = True
            out_of_range = len(res.positions) - len(pos)
            ident_c.add(enc, exact)
            wrong = enc != exact
            outside = np.abs(s - delta) > db
            check.errors = np.flatnonzero(wrong & outside)
            check.band_disagreements = np.flatnonzero(wrong & ~outside)
            ident_c.errors += len(check.errors) + out_of_range
            check.match_scores.update({int(p): float(s[p]) for p in pos})
        if membership is not None:
            res = membership[i]
            check.membership = res
            member_c.add(res.enrolled, check.exact_count > 0)
            check.membership_ok = check.count_low - 0.5 <= res.count <= check.count_high + 0.5
            member_c.errors += 0 if check.membership_ok else 1
        checks.append(check)
    return ValidationReport(
        delta=float(delta), kappa=int(kappa), decision_band=db, value_band=vb, gallery_size=n,
        queries=checks, identification=ident_c, membership=member_c, gallery_labels=gallery_labels,
        comparator={k: v for k, v in bands.items() if k != "values"},
    )


# --------------------------------------------------------------------------


class Steps:
    """Times named steps and prints one readable line per step through ``log``."""

    def __init__(self, total: int, log: Callable[[str], None] | None = print):
        """``total`` is the number of steps announced as ``[i/total]``."""
        self.total = total
        self.log = log
        self.timings: dict[str, float] = {}
        self._i = 0

    @contextmanager
    def step(self, name: str, detail: str = "") -> Iterator[dict]:
        """Time the block; the yielded dict may receive a ``note`` printed after the time."""
        self._i += 1
        info: dict = {}
        if self.log:
            self.log(f"[{self._i}/{self.total}] {name}{' - ' + detail if detail else ''} ...")
        t0 = time.perf_counter()
        yield info
        dt = time.perf_counter() - t0
        self.timings[name] = dt
        if self.log:
            note = f" ({info['note']})" if info.get("note") else ""
            self.log(f"      {name}: {dt:.2f} s{note}")


def open_or_generate_keys(
    key_dir: Path,
    preset: str,
    kappa: int,
    dim: int,
    *,
    strategy: str = AUTO,
    n1: int = 0,
    expected_size: int | None = None,
    memory_budget: int | None = None,
) -> tuple[Client, bool]:
    """Open the keys in ``key_dir`` if they match ``preset``/``kappa``/``dim`` and the strategy, else (re)generate them.

    The strategy is resolved first (:func:`choose_strategy`: ``auto``
    becomes the model's choice for ``expected_size`` vectors and
    ``memory_budget`` bytes, ``n1=0`` the default baby-step size), so keys
    are reused only when they were made for exactly that strategy and n1.
    Returns ``(client, reused)``. Keys made otherwise are deleted first
    (only when the directory holds a ``client.json``).
    """
    key_dir = Path(key_dir)
    chosen = choose_strategy(
        dim, preset, kappa, strategy=strategy, n1=n1, expected_size=expected_size, memory_budget=memory_budget
    )
    want = (str(chosen["strategy"]), int(chosen["n1"]))
    if (key_dir / "client.json").is_file():
        try:
            client = Client(key_dir)
        except (Mismatch, Corrupt, NotFound):
            client = None
        else:
            p = client.params
            same = p.get("preset") == preset and int(p.get("kappa", -1)) == kappa and int(p.get("dim", -1)) == dim
            if same and (client.strategy, client.n1) == want:
                return client, True
            client.close()
        shutil.rmtree(key_dir)
    elif key_dir.exists() and any(key_dir.iterdir()):
        raise Exists(f"{key_dir} exists and does not hold encmatch keys; refusing to overwrite it")
    return Client.generate(key_dir, preset=preset, kappa=kappa, dim=dim, strategy=want[0], n1=want[1]), False


def _fresh_index_dir(index_dir: Path) -> None:
    """Remove a previous index at ``index_dir`` (only if it has a manifest), so it can be recreated."""
    if index_dir.exists():
        if not (index_dir / "manifest.json").is_file() and any(index_dir.iterdir()):
            raise Exists(f"{index_dir} exists and is not an encmatch index; refusing to delete it")
        shutil.rmtree(index_dir)


def run(
    gallery: Any,
    queries: Any,
    *,
    preset: str = "default",
    kappa: int = DEFAULT_KAPPA,
    delta: float = DEFAULT_DELTA,
    strategy: str = AUTO,
    n1: int = 0,
    memory_budget: int | None = None,
    work_dir: str | Path | None = None,
    gallery_labels: Sequence[str] | None = None,
    query_names: Sequence[str] | None = None,
    query_enrolled: Sequence[bool] | None = None,
    modes: Sequence[str] = MODES,
    log: Callable[[str], None] | None = None,
    progress: bool = False,
) -> ValidationReport:
    """Run the encrypted pipeline on ``gallery``/``queries`` and compare it with brute force.

    ``strategy``/``n1`` choose the similarity strategy (``auto``: the cost
    model's choice for this gallery's size and ``memory_budget``);
    ``memory_budget`` (bytes, ``None``: unlimited) is also the server's, so
    a gallery that does not fit is streamed from disk. Keys in
    ``work_dir/keys`` are reused when their parameters and strategy match; the
    index ``work_dir/index`` is always rebuilt. Without ``work_dir`` a
    temporary directory is used and removed. ``log`` (e.g. ``print``)
    receives one line per step; ``progress`` shows progress bars (enrollment,
    and one tick per query during searches).
    """
    for m in modes:
        check_mode(m)
    g = _core.as_matrix(gallery, name="gallery")
    q = _core.as_matrix(queries, g.shape[1], "queries")
    if gallery_labels is not None and len(gallery_labels) != len(g):
        raise InvalidArgument(f"gallery_labels: {len(gallery_labels)} labels for {len(g)} vectors")
    tmp = None
    if work_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="encmatch-validate-")
        work_dir = tmp.name
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    steps = Steps(4 + 2 * len(modes) + 1, log)
    try:
        with steps.step("keygen", f"preset {preset}, kappa {kappa}, dim {g.shape[1]}, strategy {strategy}") as info:
            client, reused = open_or_generate_keys(
                work / "keys", preset, kappa, g.shape[1], strategy=strategy, n1=n1,
                expected_size=len(g), memory_budget=memory_budget,
            )
            what = f"strategy {describe_strategy(client.strategy, client.n1)}"
            if client.keygen_info and "rotation_keys" in client.keygen_info:
                what += f", {client.keygen_info['rotation_keys']} rotation keys"
            info["note"] = f"reused existing keys, {what}" if reused else f"key id {client.key_id}, {what}"
        with client:
            index_dir = work / "index"
            _fresh_index_dir(index_dir)
            with steps.step("enroll", f"{len(g):,} vectors") as info:
                enroller = Enroller(client.server_key_dir)
                enroller.create_index(index_dir, delta)
                summary = enroller.enroll(index_dir, g, gallery_labels, progress=True if progress else None)
                info["note"] = f"{summary.added:,} added"
            with steps.step("encrypt queries", f"{len(q)} queries") as info:
                encrypted = [client.encrypt_query(v) for v in q]
                info["note"] = f"{len(encrypted[0]):,} bytes each" if encrypted else ""
            results: dict[str, list[bytes]] = {}
            with steps.step("load index", "server loads the encrypted index and its keys") as info:
                server = Server(index_dir, client.server_key_dir, memory_budget)
                info["note"] = "groups streamed from disk per query" if server.streamed else "groups in memory"
                streamed = server.streamed
            with server:
                for m in modes:
                    with steps.step(f"{m} search", f"{len(q)} queries") as info:
                        bar = progress_bar(encrypted, desc=m, unit="query", show=bool(progress))
                        results[m] = [server.search(b, m) for b in bar]
                        info["note"] = f"{len(results[m][0]):,} bytes per result" if results[m] else ""
            decrypted: dict[str, list] = {}
            for m in modes:
                with steps.step(f"decrypt {m}", f"{len(q)} results"):
                    decrypted[m] = [client.decrypt(r, labels=gallery_labels) for r in results[m]]
            with steps.step("brute force + guard bands"):
                scores = cosine_scores(g, q)
                bands = comparator(kappa, delta, scores)
                values = np.asarray(bands.get("values") or [], dtype=np.float64)
                model = values.reshape(scores.shape) if values.size == scores.size else None
            params = client.params
    finally:
        if tmp is not None:
            tmp.cleanup()
    report = compare(
        scores, delta, bands,
        membership=decrypted.get("membership"), identification=decrypted.get("identification"),
        query_names=query_names, query_enrolled=query_enrolled, gallery_labels=gallery_labels,
        model_values=model, kappa=kappa,
    )
    report.preset = str(params.get("preset", preset))
    report.insecure = bool(params.get("insecure", False))
    report.strategy, report.n1, report.streamed = client.strategy, client.n1, streamed
    report.timings = steps.timings
    return report
