"""RNS-CKKS arithmetic on a :class:`~encmatch.gpu.backend.Backend`, equal
residue for residue to Lattigo v6.2's.

A ciphertext at level ``l`` is an array of shape ``(..., degree + 1,
l + 1, N)`` of residues (uint64, canonical, NTT domain, standard form)
modulo Q's first ``l + 1`` primes; an extended ("QP") polynomial holds
Q's ``l + 1`` rows, then the ``alpha`` rows of the special primes P.

:class:`Ring` holds the moduli and the tables of the kernels, and
composes the kernels into Lattigo's operations: NTTs, the gadget
decomposition (``DecomposeNTT``), the key product (``GadgetProductLazy``),
the division by P (``ModDown``), automorphisms, rescaling, tensors,
relinearisation and linear steps. Each method says which Lattigo routine
it reproduces; the kernels' docstrings say how.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import InvalidArgument
from .backend import Backend

__all__ = ["Ring"]

_MASK = (1 << 64) - 1

#: Residues one NTT block holds in shared memory (kernels.cu's
#: NTT_BLOCK_ELEMS) and the stages that fit: 2^11.
_NTT_BLOCK_ELEMS = 2048
_NTT_MAX_STAGES = 11


def _shoup(w: int, q: int) -> int:
    return (w << 64) // q


def _bitrev(logn: int) -> np.ndarray:
    return _bitrev_wide(np.arange(1 << logn, dtype=np.int64), logn)


def _powers(base: int, n: int, q: int) -> list[int]:
    out = [1] * n
    for j in range(1, n):
        out[j] = out[j - 1] * base % q
    return out


class Ring:
    """The ring of one parameter set (:class:`offload.Description` from the
    core), with its tables on ``backend``."""

    def __init__(self, backend: Backend, desc: dict):
        self.be = backend
        self.logn = int(desc["log_n"])
        self.n = 1 << self.logn
        self.q = [int(x) for x in desc["q"]]
        self.p = [int(x) for x in desc["p"]]
        if not 1 <= len(self.p) <= 8:
            raise InvalidArgument(f"the GPU engine needs 1 to 8 special primes P, the parameters have {len(self.p)}")
        self.nq, self.alpha = len(self.q), len(self.p)
        self.moduli = self.q + self.p
        psi = [int(x) for x in desc["psi"]]
        if len(psi) != len(self.moduli):
            raise InvalidArgument("the ring description lists a root of unity per prime")
        n = self.n
        mods = []
        for q in self.moduli:
            if q >= 1 << 61:
                raise InvalidArgument(f"prime {q} exceeds 61 bits (the kernels' bound)")
            u = (1 << 128) // q
            mods += [q, u >> 64, u & _MASK]
        self.mods = backend.put(np.array(mods, dtype=np.uint64))
        rev = _bitrev(self.logn)
        fwd = np.zeros((len(self.moduli), n), dtype=np.uint64)
        fwd_s = np.zeros_like(fwd)
        inv = np.zeros_like(fwd)
        inv_s = np.zeros_like(fwd)
        ninv = []
        for m, (q, w) in enumerate(zip(self.moduli, psi)):
            if pow(w, n, q) != q - 1:
                raise InvalidArgument(f"psi for prime {q} is not a primitive 2N-th root of unity")
            pw = _powers(w, n, q)
            ipw = _powers(pow(w, -1, q), n, q)
            fwd[m, rev] = np.array(pw, dtype=np.uint64)
            inv[m, rev] = np.array(ipw, dtype=np.uint64)
            fwd_s[m, rev] = np.array([_shoup(x, q) for x in pw], dtype=np.uint64)
            inv_s[m, rev] = np.array([_shoup(x, q) for x in ipw], dtype=np.uint64)
            ni = pow(n, -1, q)
            ninv += [ni, _shoup(ni, q)]
        self.roots, self.roots_shoup = backend.put(fwd), backend.put(fwd_s)
        self.iroots, self.iroots_shoup = backend.put(inv), backend.put(inv_s)
        self.ninv = backend.put(np.array(ninv, dtype=np.uint64))
        self._cache: dict[Any, Any] = {}

    # ------------------------------------------------------------ tables
    def _cached(self, key: Any, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def _rows(self, key: Any, rows: Sequence[int], mods: Sequence[int]) -> tuple[Any, Any, int]:
        """Device arrays of row offsets and their moduli, cached under key."""

        def make():
            return (self.be.put(np.asarray(rows, dtype=np.int64)), self.be.put(np.asarray(mods, dtype=np.int32)), len(rows))

        return self._cached(("rows",) + key, make)

    def q_rows(self, p: int, r: int) -> tuple[Any, Any, int]:
        """p polynomials of r rows at Q's primes 0..r-1."""
        return self._rows(("q", p, r), range(p * r), [j for _ in range(p) for j in range(r)])

    def qp_mods(self, r: int) -> list[int]:
        return list(range(r)) + [self.nq + j for j in range(self.alpha)]

    def _const_rows(self, key: Any, values: Sequence[int], mods: Sequence[int]) -> Any:
        """Per-row constants with their Shoup companions."""

        def make():
            out = []
            for v, m in zip(values, mods):
                q = self.moduli[m]
                out += [v % q, _shoup(v % q, q)]
            return self.be.put(np.array(out, dtype=np.uint64))

        return self._cached(("const",) + key, make)

    @property
    def big_p(self) -> int:
        out = 1
        for x in self.p:
            out *= x
        return out

    def digits(self, r: int) -> int:
        """Digits of the gadget decomposition at r Q rows (Lattigo's
        BaseRNSDecompositionVectorSize)."""
        return (r + self.alpha - 1) // self.alpha

    # --------------------------------------------------------------- NTT
    def _ntt_chunks(self, count: int, block_elems: int | None) -> list[tuple[int, int]]:
        """The NTT's stages split into launches: (stages, residues per
        block) each, at most 11 stages (NTT_BLOCK_ELEMS residues) per
        launch, the splits as even as possible. Without block_elems, blocks
        hold as many residues as keep the device busy with count rows."""
        chunks = -(-self.logn // _NTT_MAX_STAGES)
        sizes = [self.logn // chunks + (1 if i < self.logn % chunks else 0) for i in range(chunks)]
        out = []
        for s in sizes:
            e = min(self.n, _NTT_BLOCK_ELEMS) if block_elems is None else block_elems
            if block_elems is None:
                while e > max(1 << s, 512) and count * (self.n // e) < self.be.parallelism:
                    e //= 2
            if not (1 << s) <= e <= min(self.n, _NTT_BLOCK_ELEMS) or e & (e - 1):
                raise InvalidArgument(f"an NTT block of {e} residues cannot hold {s} stages of a ring of degree {self.n}")
            out.append((s, e))
        return out

    def ntt(self, base: Any, rows: tuple[Any, Any, int], block_elems: int | None = None) -> None:
        """Forward NTT (Lattigo's NTT) of the listed rows of base, in place."""
        off, mods, count = rows
        m0 = 1
        for s, e in self._ntt_chunks(count, block_elems):
            blocks = count * (self.n // e)
            self.be.launch_blocks("ntt_fwd_block", blocks, base, off, mods, count, self.logn, m0, s, e, blocks,
                                  self.mods, self.roots, self.roots_shoup)
            m0 <<= s

    def intt(self, base: Any, rows: tuple[Any, Any, int], block_elems: int | None = None) -> None:
        """Inverse NTT (Lattigo's INTT, canonical) of the listed rows, in place."""
        off, mods, count = rows
        h0, done = self.n // 2, 0
        for s, e in self._ntt_chunks(count, block_elems):
            done += s
            blocks = count * (self.n // e)
            self.be.launch_blocks("ntt_inv_block", blocks, base, off, mods, count, self.logn, h0, s,
                                  int(done == self.logn), e, blocks, self.mods, self.iroots, self.iroots_shoup,
                                  self.ninv)
            h0 >>= s

    # ------------------------------------------------------ key switching
    def _decompose_tables(self, r: int) -> tuple:
        def make():
            a, rows, nd = self.alpha, r + self.alpha, self.digits(r)
            qprow = self.qp_mods(r)
            src, yc, hf, tc = [], [], [], []
            for d in range(nd):
                first, cnt = d * a, min(a, r - d * a)
                src += [cnt, first]
                primes = self.q[first:first + cnt]
                qd = 1
                for x in primes:
                    qd *= x
                half = qd >> 1
                for j in range(a):
                    if j < cnt:
                        qj = primes[j]
                        inv = pow(qd // qj % qj, -1, qj)
                        yc += [inv, _shoup(inv, qj)]
                        hf.append(half % qj)
                    else:
                        yc += [0, 0]
                        hf.append(0)
                for t in range(rows):
                    mt = self.moduli[qprow[t]]
                    row = [(qd // primes[j]) % mt if j < cnt else 0 for j in range(a)]
                    tc += row + [qd % mt, half % mt]
            u64 = lambda v: self.be.put(np.array(v, dtype=np.uint64))
            return (self.be.put(np.array(src, dtype=np.int64)), u64(yc), u64(hf), u64(tc),
                    self.be.put(np.array(qprow, dtype=np.int32)))

        return self._cached(("decompose", r), make)

    def decompose(self, x: Any, p: int, r: int) -> Any:
        """The gadget decomposition of p polynomials x (p x r rows, NTT) in
        the NTT domain, as p x digits x (r + alpha) rows (Lattigo's
        DecomposeNTT)."""
        be, a, nd = self.be, self.alpha, self.digits(r)
        rows = r + a
        coef = be.xp.ascontiguousarray(x.reshape(p, r, self.n)).copy()
        self.intt(coef, self.q_rows(p, r))
        out = be.empty((p, nd, rows, self.n))
        src, yc, hf, tc, qprow = self._decompose_tables(r)
        be.launch("decompose", p * nd * self.n, out, coef, p, r, a, nd, self.n, src, yc, hf, tc, qprow, self.mods)

        def lists():
            other, own_dst, own_src, other_mods = [], [], [], []
            qp = self.qp_mods(r)
            for pi in range(p):
                for d in range(nd):
                    lo, hi = d * a, min((d + 1) * a, r)
                    for t in range(rows):
                        row = (pi * nd + d) * rows + t
                        if lo <= t < hi:
                            own_dst.append(row)
                            own_src.append(pi * r + t)
                        else:
                            other.append(row)
                            other_mods.append(qp[t])
            return other, other_mods, own_dst, own_src

        other, other_mods, own_dst, own_src = self._cached(("declists", p, r), lists)
        self.ntt(out, self._rows(("decother", p, r), other, other_mods))
        dst = self._rows(("decown", p, r), own_dst, [0] * len(own_dst))
        srcr = self._rows(("decsrc", p, r), own_src, [0] * len(own_src))
        be.launch("copy_rows", dst[2] * self.n, out, dst[0], be.xp.ascontiguousarray(x), srcr[0], dst[2], self.n)
        return out

    def key_product(self, dec: Any, key: Any, p: int, r: int, which: Sequence[int] | None = None,
                    shared: bool = False) -> Any:
        """sum_d dec[d] * key[d] for p decompositions: p x 2 x (r + alpha)
        rows modulo QP (Lattigo's GadgetProduct(Hoisted)Lazy, reduced).
        With ``which``, key is a stack of keys and polynomial i uses key
        which[i]; with ``shared``, dec is one decomposition that all p
        polynomials use (hoisted rotations)."""
        nd, a = self.digits(r), self.alpha
        out = self.be.empty((p, 2, r + a, self.n))
        _, _, _, _, qprow = self._decompose_tables(r)
        if which is None:
            kidx, stride = self._index_list(("kidx0", p), [0] * p), 0
        else:
            if len(which) != p:
                raise InvalidArgument(f"{len(which)} keys named for {p} polynomials")
            kidx, stride = self._index_list(("kidx", tuple(which)), which), key[0].size
            key = key.reshape(-1)
        self.be.launch("key_product", p * (r + a) * self.n, out, dec, key, kidx, stride, p, nd, r, a, self.nq + a,
                       self.nq, self.n, int(shared), qprow, self.mods)
        return out

    def _index_list(self, key: Any, values: Sequence[int]) -> Any:
        """A device array of int64 values, cached under key."""
        return self._cached(("ilist",) + key, lambda: self.be.put(np.asarray(values, dtype=np.int64)))

    def _mod_up_p_tables(self, r: int) -> tuple:
        def make():
            bp, half = self.big_p, self.big_p >> 1
            yc, hf, tc = [], [], []
            for pj in self.p:
                inv = pow(bp // pj % pj, -1, pj)
                yc += [inv, _shoup(inv, pj)]
                hf.append(half % pj)
            for t in range(r):
                qt = self.q[t]
                tc += [(bp // pj) % qt for pj in self.p] + [bp % qt, half % qt]
            pinv = []
            for t in range(r):
                v = pow(bp % self.q[t], -1, self.q[t])
                pinv += [v, _shoup(v, self.q[t])]
            u64 = lambda v: self.be.put(np.array(v, dtype=np.uint64))
            return u64(yc), u64(hf), u64(tc), u64(pinv)

        return self._cached(("modup", r), make)

    def mod_down(self, x: Any, p: int, r: int, plus: Any = None) -> Any:
        """(x_Q - lift(x_P)) / P for p polynomials x (p x (r + alpha) rows,
        NTT; x's P rows are overwritten), plus ``plus`` (p x r rows) when
        given (Lattigo's ModDownQPtoQNTT)."""
        a = self.alpha
        prow = [pi * (r + a) + r + j for pi in range(p) for j in range(a)]
        self.intt(x, self._rows(("prows", p, r), prow, [self.nq + j for _ in range(p) for j in range(a)]))
        yc, hf, tc, pinv = self._mod_up_p_tables(r)
        ext = self.be.empty((p, r, self.n))
        self.be.launch("mod_up_p", p * self.n, ext, x, p, r, a, self.n, self.nq, yc, hf, tc, self.mods)
        self.ntt(ext, self.q_rows(p, r))
        out = self.be.empty((p, r, self.n))
        add = plus is not None
        self.be.launch("mod_down_finish", p * r * self.n, out, x, ext, plus if add else ext, p, r, a, self.n, int(add),
                       pinv, self.mods)
        return out

    def mul_p(self, x: Any, p: int, r: int) -> Any:
        """x * P for p polynomials of r Q rows."""
        c = self._const_rows(("P", p, r), [self.big_p] * (p * r), [j for _ in range(p) for j in range(r)])
        off, mods, count = self.q_rows(p, r)
        out = self.be.empty((p, r, self.n))
        self.be.launch("mul_scalar_rows", count * self.n, out, self.be.xp.ascontiguousarray(x), c, off, mods, count,
                       self.n, self.mods)
        return out

    def add(self, a: Any, b: Any, p: int, mods: Sequence[int], key: Any) -> Any:
        """a + b (same shape: p polynomials with rows of moduli mods)."""
        rows = len(mods)
        off, m, count = self._rows(("add",) + key, range(p * rows), list(mods) * p)
        out = self.be.empty(a.shape)
        self.be.launch("add_rows", count * self.n, out, a, b, off, m, count, self.n, self.mods)
        return out

    def add_q(self, a: Any, b: Any, p: int, r: int) -> Any:
        return self.add(a, b, p, list(range(r)), ("q", p, r))

    def add_qp(self, a: Any, b: Any, p: int, r: int) -> Any:
        return self.add(a, b, p, self.qp_mods(r), ("qp", p, r))

    def _automorphism_index(self, galois: int) -> Any:
        """Lattigo's AutomorphismNTTIndex for Galois element galois: output
        coefficient i of the NTT domain reads input coefficient index[i]."""

        def make():
            mask = 2 * self.n - 1
            tmp1 = 2 * _bitrev_wide(np.arange(self.n, dtype=np.int64), self.logn) + 1
            tmp2 = (((galois * tmp1) & mask) - 1) >> 1
            return self.be.put(_bitrev_wide(tmp2, self.logn).astype(np.int32))

        return self._cached(("autidx", galois), make)

    def permute(self, x: Any, galois: int | Sequence[int], p: int, mods: Sequence[int], plus: Any = None) -> Any:
        """The automorphism of Galois element galois on p polynomials in the
        NTT domain (Lattigo's AutomorphismNTTWithIndex), plus ``plus``
        (same shape, permuted too) when given. galois is one element for all
        p polynomials or a list of p, one per polynomial."""
        rows = len(mods)
        els = (int(galois),) * p if isinstance(galois, (int, np.integer)) else tuple(int(g) for g in galois)
        if len(els) != p:
            raise InvalidArgument(f"{len(els)} Galois elements for {p} polynomials")
        distinct = sorted(set(els))
        idx = self._cached(("autidxs", tuple(distinct)),
                           lambda: self.be.xp.concatenate([self._automorphism_index(g) for g in distinct]))
        idxrow = self._index_list(("idxrow", els, rows), [distinct.index(g) * self.n for g in els for _ in range(rows)])
        _, m, count = self._rows(("perm", p, tuple(mods)), range(p * rows), list(mods) * p)
        out = self.be.empty(x.shape)
        add = plus is not None
        self.be.launch("permute", count * self.n, out, x, plus if add else x, idx, idxrow, m, count, self.n, int(add),
                       self.mods)
        return out

    # ------------------------------------------------------- ciphertexts
    def automorphisms(self, ct: Any, dec: Any, keys: Any, galois: Sequence[int], which: Sequence[int], r: int) -> Any:
        """Lattigo's automorphisms with the Galois keys keys[which[i]] (keys
        a stack): len(galois) x 2 x r rows. ct is one ciphertext (2 x r
        rows) with dec the decomposition of its c1, mapped by each element
        galois[i] (AutomorphismHoisted); or len(galois) ciphertexts
        (b x 2 x r rows) with dec their c1's decompositions, ciphertext i
        mapped by galois[i] (Automorphism, e.g. Conjugate). Either way one
        key product, one division by P and one permutation launch."""
        b, a, xp = len(galois), self.alpha, self.be.xp
        shared = ct.ndim == 3
        ks = self.key_product(dec, keys, b, r, which=which, shared=shared)
        plus = xp.zeros((b, 2, r, self.n), dtype=np.uint64)
        plus[:, 0] = ct[0] if shared else ct[:, 0]
        tmp = self.mod_down(ks.reshape(2 * b, r + a, self.n), 2 * b, r, plus=plus)
        return self.permute(tmp, [g for g in galois for _ in range(2)], 2 * b, list(range(r))).reshape(b, 2, r, self.n)

    def relinearize(self, ct3: Any, rlk: Any, g: int, r: int) -> Any:
        """Lattigo's Relinearize of g degree-2 ciphertexts (g x 3 x r rows)."""
        c2 = self.be.xp.ascontiguousarray(ct3[:, 2])
        dec = self.decompose(c2, g, r)
        ks = self.key_product(dec, rlk, g, r)
        plus = self.be.xp.ascontiguousarray(ct3[:, :2])
        return self.mod_down(ks.reshape(2 * g, r + self.alpha, self.n), 2 * g, r, plus=plus).reshape(g, 2, r, self.n)

    def tensor(self, a: Any, b: Any, g: int, r: int) -> Any:
        """g tensors of degree-1 ciphertexts a, b (read at r rows)."""
        out = self.be.empty((g, 3, r, self.n))
        self.be.launch("tensor", g * r * self.n, out, a, b, g, r, a.shape[-2], b.shape[-2], self.n, self.mods)
        return out

    def rescale(self, x: Any, p: int, r: int) -> Any:
        """Lattigo's Rescale (DivRoundByLastModulusNTT) of p polynomials of
        r rows: p polynomials of r - 1 rows."""
        if r < 2:
            raise InvalidArgument("cannot rescale a ciphertext at level 0")
        xp = self.be.xp
        x = xp.ascontiguousarray(x.reshape(p, r, self.n))
        last = xp.ascontiguousarray(x[:, r - 1]).copy()
        self.intt(last, self._rows(("last", p, r), range(p), [r - 1] * p))
        tmp = self.be.empty((p, r - 1, self.n))
        self.be.launch("rescale_lift", p * (r - 1) * self.n, tmp, last, p, r, self.n, self.mods)
        self.ntt(tmp, self.q_rows(p, r - 1))
        ql = self.q[r - 1]
        c = self._const_rows(("qlinv", r), [pow(ql, -1, self.q[i]) for i in range(r - 1)], list(range(r - 1)))
        out = self.be.empty((p, r - 1, self.n))
        self.be.launch("rescale_finish", p * (r - 1) * self.n, out, x, tmp, p, r, self.n, c, self.mods)
        return out

    def linear(self, ins: Sequence[Any], scalars: Any, constant: Any, g: int, degree: int, r: int) -> Any:
        """out_c = sum_i s_i in_i,c + [c = 0] b (per prime, per half) for
        g ciphertexts of degree ``degree`` at r rows."""
        if len(ins) > 3:
            raise InvalidArgument("a linear step of more than three ciphertexts")
        ideg = tuple(x.shape[-3] - 1 for x in ins) + (0,) * (3 - len(ins))
        irows = tuple(x.shape[-2] for x in ins) + (1,) * (3 - len(ins))
        meta = self._cached(("linear", ideg, irows), lambda: self.be.put(np.array(ideg + irows, dtype=np.int64)))
        ptrs = list(ins) + [constant] * (3 - len(ins))
        out = self.be.empty((g, degree + 1, r, self.n))
        self.be.launch("linear", out.size, out, ptrs[0], ptrs[1], ptrs[2], meta[:3], meta[3:], len(ins),
                       scalars, constant, g, degree, r, self.n, self.mods)
        return out


def _bitrev_wide(x: np.ndarray, bits: int) -> np.ndarray:
    """Bit reversal of each value of x over ``bits`` bits."""
    x = x.astype(np.int64)
    out = np.zeros_like(x)
    for b in range(bits):
        out |= ((x >> b) & 1) << (bits - 1 - b)
    return out
