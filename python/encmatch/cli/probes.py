"""Searching several probes from the command line: encrypt, search, write, decrypt, with the times apart.

``encmatch query`` runs it against a local (or Ray) server and, with
``--server``, against the service: one loaded index, many probes.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Callable

import numpy as np

from .._util.ui import fmt_bytes

from .answers import print_answer
from ..keyholder import Client
from ..results import PayloadResult, incomplete_message
from . import resultfiles

__all__ = ["run_probes"]


def run_probes(vectors: np.ndarray, names: list[str], mode: str, client: Client,
               search: Callable[[bytes], bytes], sink: resultfiles.ResultFiles | None, *, decrypt: bool = False,
               labels: list[str] | None = None, json_lines: bool = False, where: str = "",
               search_batch: Callable[[list[bytes]], list[bytes]] | None = None, batch: int = 1) -> int:
    """Encrypt, search (``search(query bytes) -> result bytes``), write and optionally decrypt each probe.

    With ``search_batch`` and ``batch`` > 1 the probes go to it ``batch``
    at a time (a streamed server's one pass over the gallery for several);
    each probe's search time is then its share of the batch's. ``decrypt``:
    print each answer, its positions named by the index's
    opened ``labels`` (when there are any); with ``json_lines`` one JSON
    line per probe (a payload answer: the core's decrypted JSON). Prints the
    encryption, search and decryption times apart (per probe and in
    total). Returns the number of payload answers that were not complete
    (each also an ``error:`` line on stderr).
    """
    incomplete = 0
    t_enc = t_dec = 0.0
    searches: list[float] = []
    size = 0
    step = batch if search_batch is not None and batch > 1 else 1
    for first in range(0, len(vectors), step):
        t0 = time.perf_counter()
        qs = [client.encrypt_query(vec) for vec in vectors[first:first + step]]
        t1 = time.perf_counter()
        results = search_batch(qs) if step > 1 else [search(qs[0])]
        t2 = time.perf_counter()
        t_enc += t1 - t0
        for i, result in enumerate(results, start=first):
            searches.append((t2 - t1) / len(results))
            size += len(result)
            where_to = ""
            if sink is not None:
                where_to = f" -> {sink.write(i, names[i], result)}"
            if decrypt:
                t3 = time.perf_counter()
                answer = client.decrypt(result, labels=labels)
                t_dec += time.perf_counter() - t3
                if json_lines:
                    print(json.dumps({"probe": names[i], **answer.to_dict()}))
                else:
                    print(f"probe {names[i]}:{where_to}")
                    print_answer(answer)
                if isinstance(answer, PayloadResult) and not answer.complete:
                    incomplete += 1
                    print(f"error: probe {names[i]}: {incomplete_message(answer)}", file=sys.stderr)
            elif not json_lines:
                print(f"probe {names[i]}: {searches[-1]:.2f} s{where_to}")
    if sink is not None:
        sink.finish()
    t_search = sum(searches)
    n = len(searches)
    per = f", median {float(np.median(searches)):.2f} s per probe" if n > 1 else ""
    log = sys.stderr if json_lines else sys.stdout
    print(f"{n} probe(s): encrypted in {t_enc:.2f} s; {mode} search{where} {t_search:.2f} s{per}; "
          f"{fmt_bytes(size)} of results" + (f"; decrypted in {t_dec:.2f} s" if decrypt else ""),
          file=log)
    if sink is not None and sink.folder:
        print(f"results: {sink.out} ({n} file(s) and {resultfiles.MANIFEST}; `encmatch decrypt {sink.out}`)",
              file=log)
    return incomplete
