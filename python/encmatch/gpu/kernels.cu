// encmatch's GPU kernels: RNS polynomial arithmetic for CKKS (NTT, basis
// extension, key-switching products, rescaling, automorphisms, products
// and linear steps), written once for two compilers:
//   - NVRTC/nvcc (through CuPy) on a GPU: every kernel is a grid-stride
//     loop;
//   - a host C++ compiler on the CPU (ENCMATCH_HOST): the same loop runs
//     over all indices (OpenMP when available), so that every kernel is
//     tested bit for bit on machines without a GPU.
// Every residue a kernel writes is canonical (below its prime), so results
// equal Lattigo's, which reduces its lazy values at the same points.
//
// Layout: a batch of polynomials is rows of N residues; a row's prime is
// an index into the moduli table (Q's primes, then P's). Kernels that
// touch a subset of rows take a list of row offsets and their moduli.
//
// Index arithmetic: GPUs have no integer divider, and a 64-bit division
// costs tens of instructions, more than the modular product it serves.
// Every size that is a power of two (N, NTT blocks and spans) is divided
// by shifts (log2_pow2, split_n); the others (row counts, degrees) by
// 32-bit divisions (div_small), which are a few instructions.

typedef unsigned long long u64;
typedef long long i64;

#ifdef ENCMATCH_HOST
#define KERNEL extern "C"
#define DEV static inline
#define GRID_LOOP(i, n) _Pragma("omp parallel for") for (i64 i = 0; i < (i64)(n); i++)
#define BLOCK_LOOP(b, n) _Pragma("omp parallel for") for (i64 b = 0; b < (i64)(n); b++)
#define THREAD_LOOP(t, n) for (i64 t = 0; t < (i64)(n); t++)
#define SHARED
#define SYNC
DEV u64 mulhi(u64 a, u64 b) { return (u64)(((unsigned __int128)a * b) >> 64); }
DEV i64 log2_pow2(i64 x) { return __builtin_ctzll((u64)x); }  // x a power of two
DEV double em_ddiv(double a, double b) { return a / b; }
DEV double em_dadd(double a, double b) { return a + b; }
#else
#define KERNEL extern "C" __global__
#define DEV __device__ __forceinline__
#define GRID_LOOP(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (i64)(n); i += (i64)gridDim.x * blockDim.x)
#define BLOCK_LOOP(b, n) for (i64 b = blockIdx.x; b < (i64)(n); b += gridDim.x)
#define THREAD_LOOP(t, n) for (i64 t = threadIdx.x; t < (i64)(n); t += blockDim.x)
#define SHARED __shared__
#define SYNC __syncthreads()
DEV u64 mulhi(u64 a, u64 b) { return __umul64hi(a, b); }
DEV i64 log2_pow2(i64 x) { return __ffsll(x) - 1; }  // x a power of two
DEV double em_ddiv(double a, double b) { return __ddiv_rn(a, b); }
DEV double em_dadd(double a, double b) { return __dadd_rn(a, b); }
#endif

// split_n splits a flat index tid over rows of 2^ln residues into its row
// (returned) and its residue k within the row.
DEV i64 split_n(i64 tid, i64 ln, i64* k) {
    *k = tid & (((i64)1 << ln) - 1);
    return tid >> ln;
}

// div_small returns x / d and sets *m = x % d for 0 <= x < 2^32, 0 < d < 2^32.
DEV i64 div_small(i64 x, i64 d, i64* m) {
    const unsigned ux = (unsigned)x, ud = (unsigned)d;
    const unsigned qt = ux / ud;
    *m = (i64)(ux - qt * ud);
    return (i64)qt;
}

// Moduli table: for each prime, q and floor(2^128 / q) as (high, low).
struct Mod { u64 q, uh, ul; };
DEV Mod mod_at(const u64* mods, i64 m) { Mod r; r.q = mods[3 * m]; r.uh = mods[3 * m + 1]; r.ul = mods[3 * m + 2]; return r; }

DEV u64 add_mod(u64 a, u64 b, u64 q) { u64 s = a + b; return s >= q ? s - q : s; }
DEV u64 sub_mod(u64 a, u64 b, u64 q) { return a >= b ? a - b : a + q - b; }

// reduce128 returns (xh 2^64 + xl) mod q for xh < q (Barrett with
// u = floor(2^128 / q); the estimate is short by at most 3).
DEV u64 reduce128(u64 xh, u64 xl, Mod m) {
    u64 t0 = mulhi(xl, m.ul);
    u64 a_lo = xh * m.ul, a_hi = mulhi(xh, m.ul);
    u64 b_lo = xl * m.uh, b_hi = mulhi(xl, m.uh);
    u64 s = a_lo + b_lo;
    u64 c1 = s < a_lo;
    u64 s2 = s + t0;
    u64 c2 = s2 < s;
    u64 qhat = xh * m.uh + a_hi + b_hi + c1 + c2;
    u64 r = xl - qhat * m.q;
    while (r >= m.q) r -= m.q;
    return r;
}

// reduce64 returns x mod q for any 64-bit x.
DEV u64 reduce64(u64 x, Mod m) { return reduce128(0, x, m); }

// mul_mod returns a b mod q for a, b < q.
DEV u64 mul_mod(u64 a, u64 b, Mod m) { return reduce128(mulhi(a, b), a * b, m); }

// Shoup's product by a constant w < q with ws = floor(w 2^64 / q).
DEV u64 mul_shoup(u64 x, u64 w, u64 ws, u64 q) {
    u64 r = x * w - mulhi(x, ws) * q;
    return r >= q ? r - q : r;
}

// A 128-bit accumulator of products.
struct Acc { u64 hi, lo; };
DEV void acc_add(Acc* a, u64 x, u64 y) {
    u64 lo = x * y, hi = mulhi(x, y);
    a->lo += lo;
    a->hi += hi + (a->lo < lo);
}
DEV u64 acc_reduce(Acc a, Mod m) { return reduce128(reduce64(a.hi, m), a.lo, m); }

// ---------------------------------------------------------------- NTT --

// Block kernels (ntt_fwd_block, ntt_inv_block) are written per block of
// threads: BLOCK_LOOP runs over blocks, THREAD_LOOP over a block's
// threads, SHARED is the block's shared memory and SYNC its barrier. On
// the host a block is one loop iteration: its thread loops run one after
// the other, which is what the barriers between them guarantee on a GPU.

// NTT_BLOCK_ELEMS is the most residues one block holds in shared memory
// (16 KiB): up to 11 stages run in one launch.
#define NTT_BLOCK_ELEMS 2048

// ntt_block_slot maps a block's i-th residue (0 <= i < e, e residues in
// b = 2^lb sub-transforms of 2^s residues spaced T = 2^lt apart) to its
// position in the row, its sub-transform (local, 0 <= sub < b) and its
// index c within it. Residues are numbered in address order, so
// consecutive threads load and store consecutive addresses wherever the
// transform allows.
DEV void ntt_block_slot(i64 i, i64 s, i64 lt, i64 lb, i64 w0, i64* pos, i64* sub, i64* c) {
    const i64 ltb = lt < lb ? lt : lb;  // log2 min(T, b)
    const i64 rl = i & (((i64)1 << ltb) - 1), cc = (i >> ltb) & (((i64)1 << s) - 1), il = i >> (ltb + s);
    const i64 w = w0 + (il << ltb) + rl;  // sub-transform index within the row
    *sub = (il << ltb) + rl;
    *c = cc;
    *pos = ((w >> lt) << (lt + s)) + (w & (((i64)1 << lt) - 1)) + (cc << lt);
}

// ntt_block_load copies a block's e residues of row a into buf (each
// sub-transform contiguous), then waits for the block.
DEV void ntt_block_load(u64* buf, const u64* a, i64 e, i64 s, i64 lt, i64 lb, i64 w0) {
    THREAD_LOOP(i, e) {
        i64 pos, sub, c;
        ntt_block_slot(i, s, lt, lb, w0, &pos, &sub, &c);
        buf[(sub << s) + c] = a[pos];
    }
    SYNC;
}

// ntt_block_store copies buf back to its places in row a (times N^-1,
// given with its Shoup companion, when scale is set), then waits for the
// block.
DEV void ntt_block_store(const u64* buf, u64* a, i64 e, i64 s, i64 lt, i64 lb, i64 w0, i64 scale, u64 nv, u64 nvs, u64 q) {
    THREAD_LOOP(i, e) {
        i64 pos, sub, c;
        ntt_block_slot(i, s, lt, lb, w0, &pos, &sub, &c);
        const u64 v = buf[(sub << s) + c];
        a[pos] = scale ? mul_shoup(v, nv, nvs, q) : v;
    }
    SYNC;
}

// ntt_fwd_block runs s consecutive stages (s <= 11) of Lattigo's
// Cooley-Tukey NTT (bit-reversed twiddles roots[m + i]), starting at the
// stage with m0 groups, on the listed rows, in shared memory: each block
// loads e residues of one row (e / 2^s sub-transforms closed under those
// stages), runs the s stages and stores them. blocks = nrows * (n / e).
KERNEL void ntt_fwd_block(u64* base, const i64* rows, const int* rowmod, i64 nrows, i64 logn, i64 m0, i64 s, i64 e,
                          i64 blocks, const u64* mods, const u64* roots, const u64* roots_shoup) {
    const i64 n = (i64)1 << logn, le = log2_pow2(e);
    const i64 lpr = logn - le, lb = le - s;  // log2 of blocks per row, of sub-transforms per block
    const i64 lt = logn - 1 - log2_pow2(m0) - (s - 1);  // log2 T, T = n / (2 m0) / 2^(s-1)
    BLOCK_LOOP(blk, blocks) {
        SHARED u64 buf[NTT_BLOCK_ELEMS];
        const i64 row = blk >> lpr, w0 = (blk & (((i64)1 << lpr) - 1)) << lb;
        const int mi = rowmod[row];
        const u64 q = mods[3 * mi];
        u64* a = base + rows[row] * n;
        const u64* rt = roots + (i64)mi * n;
        const u64* rs = roots_shoup + (i64)mi * n;
        ntt_block_load(buf, a, e, s, lt, lb, w0);
        for (i64 l = 0; l < s; l++) {
            const i64 m = m0 << l, p = s - 1 - l;
            THREAD_LOOP(k, e / 2) {
                const i64 sub = k >> (s - 1), j = k & ((((i64)1) << (s - 1)) - 1);
                const i64 c = ((j >> p) << (p + 1)) | (j & ((((i64)1) << p) - 1));
                const i64 i0 = (w0 + sub) >> lt;
                const i64 gi = m + (i0 << l) + (c >> (s - l));
                u64* x = buf + (sub << s);
                const u64 v = mul_shoup(x[c + ((i64)1 << p)], rt[gi], rs[gi], q);
                const u64 u = x[c];
                x[c] = add_mod(u, v, q);
                x[c + ((i64)1 << p)] = sub_mod(u, v, q);
            }
            SYNC;
        }
        ntt_block_store(buf, a, e, s, lt, lb, w0, 0, 0, 0, q);
    }
}

// ntt_inv_block runs s consecutive stages (s <= 11) of the
// Gentleman-Sande inverse NTT (twiddles iroots[h + i]), starting at the
// stage with h0 groups, in shared memory as ntt_fwd_block; with scale set
// (the last stages), the outputs are multiplied by N^-1.
KERNEL void ntt_inv_block(u64* base, const i64* rows, const int* rowmod, i64 nrows, i64 logn, i64 h0, i64 s, i64 scale,
                          i64 e, i64 blocks, const u64* mods, const u64* iroots, const u64* iroots_shoup,
                          const u64* ninv) {
    const i64 n = (i64)1 << logn, le = log2_pow2(e);
    const i64 lpr = logn - le, lb = le - s;
    const i64 lt = logn - 1 - log2_pow2(h0);  // log2 T, T = n / (2 h0)
    BLOCK_LOOP(blk, blocks) {
        SHARED u64 buf[NTT_BLOCK_ELEMS];
        const i64 row = blk >> lpr, w0 = (blk & (((i64)1 << lpr) - 1)) << lb;
        const int mi = rowmod[row];
        const u64 q = mods[3 * mi];
        u64* a = base + rows[row] * n;
        const u64* rt = iroots + (i64)mi * n;
        const u64* rs = iroots_shoup + (i64)mi * n;
        ntt_block_load(buf, a, e, s, lt, lb, w0);
        for (i64 l = 0; l < s; l++) {
            const i64 h = h0 >> l;
            THREAD_LOOP(k, e / 2) {
                const i64 sub = k >> (s - 1), j = k & ((((i64)1) << (s - 1)) - 1);
                const i64 c = ((j >> l) << (l + 1)) | (j & ((((i64)1) << l) - 1));
                const i64 iL = (w0 + sub) >> lt;
                const i64 gi = h + (iL << (s - 1 - l)) + (c >> (l + 1));
                u64* x = buf + (sub << s);
                const u64 u = x[c], v = x[c + ((i64)1 << l)];
                x[c] = add_mod(u, v, q);
                x[c + ((i64)1 << l)] = mul_shoup(sub_mod(u, v, q), rt[gi], rs[gi], q);
            }
            SYNC;
        }
        ntt_block_store(buf, a, e, s, lt, lb, w0, scale, ninv[2 * mi], ninv[2 * mi + 1], q);
    }
}

// -------------------------------------------------------- elementwise --

// copy_rows copies the listed rows of src to the listed rows of dst.
KERNEL void copy_rows(u64* dst, const i64* drows, const u64* src, const i64* srows, i64 nrows, i64 n) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, nrows * n) {
        i64 k;
        const i64 row = split_n(tid, ln, &k);
        dst[drows[row] * n + k] = src[srows[row] * n + k];
    }
}

// add_rows: dst = a + b on the listed rows (a, b, dst may alias).
KERNEL void add_rows(u64* dst, const u64* a, const u64* b, const i64* rows, const int* rowmod, i64 nrows, i64 n, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, nrows * n) {
        i64 k;
        const i64 row = split_n(tid, ln, &k);
        const i64 o = rows[row] * n + k;
        dst[o] = add_mod(a[o], b[o], mods[3 * rowmod[row]]);
    }
}

// mul_scalar_rows: dst = a * c_row on the listed rows, c given per row
// with its Shoup companion (c[2 row], c[2 row + 1]).
KERNEL void mul_scalar_rows(u64* dst, const u64* a, const u64* c, const i64* rows, const int* rowmod, i64 nrows, i64 n, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, nrows * n) {
        i64 k;
        const i64 row = split_n(tid, ln, &k);
        const i64 o = rows[row] * n + k;
        dst[o] = mul_shoup(a[o], c[2 * row], c[2 * row + 1], mods[3 * rowmod[row]]);
    }
}

// permute: dst[row][k] = src[row][ix[k]] + (add ? plus[row][ix[k]] : 0),
// ix = idx + idxrow[row] (the row's automorphism's table), rows
// consecutive from 0 with moduli rowmod (automorphisms in the NTT domain).
KERNEL void permute(u64* dst, const u64* src, const u64* plus, const int* idx, const i64* idxrow, const int* rowmod, i64 nrows,
                    i64 n, i64 add, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, nrows * n) {
        i64 k;
        const i64 row = split_n(tid, ln, &k);
        const i64 from = row * n + idx[idxrow[row] + k];
        u64 v = src[from];
        if (add) v = add_mod(v, plus[from], mods[3 * rowmod[row]]);
        dst[row * n + k] = v;
    }
}

// ------------------------------------------------------ ciphertexts --

// tensor_acc adds sum_b t_b (x) d_b to the degree-2 accumulator acc
// (3 x r rows, r = level + 1 rows of moduli 0..level): t (nb x 2 x tr
// rows) and d (nb x 2 x dr rows) are read at their first r rows. With
// first set, acc is overwritten instead.
KERNEL void tensor_acc(u64* acc, const u64* t, const u64* d, i64 nb, i64 r, i64 tr, i64 dr, i64 n, i64 first, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, r * n) {
        i64 k;
        const i64 j = split_n(tid, ln, &k);
        const Mod m = mod_at(mods, j);
        Acc c0 = {0, 0}, c1 = {0, 0}, c2 = {0, 0};
        for (i64 b = 0; b < nb; b++) {
            const u64 t0 = t[((b * 2) * tr + j) * n + k], t1 = t[((b * 2 + 1) * tr + j) * n + k];
            const u64 d0 = d[((b * 2) * dr + j) * n + k], d1 = d[((b * 2 + 1) * dr + j) * n + k];
            acc_add(&c0, t0, d0);
            acc_add(&c1, t0, d1);
            acc_add(&c1, t1, d0);
            acc_add(&c2, t1, d1);
        }
        u64 v0 = acc_reduce(c0, m), v1 = acc_reduce(c1, m), v2 = acc_reduce(c2, m);
        u64* o0 = acc + (0 * r + j) * n + k;
        u64* o1 = acc + (1 * r + j) * n + k;
        u64* o2 = acc + (2 * r + j) * n + k;
        if (!first) { v0 = add_mod(v0, *o0, m.q); v1 = add_mod(v1, *o1, m.q); v2 = add_mod(v2, *o2, m.q); }
        *o0 = v0; *o1 = v1; *o2 = v2;
    }
}

// tensor: out (g x 3 x r rows) = a (x) b for g pairs of degree-1
// ciphertexts (a: g x 2 x ar rows, b: g x 2 x br rows, read at r rows).
KERNEL void tensor(u64* out, const u64* a, const u64* b, i64 g, i64 r, i64 ar, i64 br, i64 n, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, g * r * n) {
        i64 k, j;
        const i64 gi = div_small(split_n(tid, ln, &k), r, &j);
        const Mod m = mod_at(mods, j);
        const u64 a0 = a[((gi * 2) * ar + j) * n + k], a1 = a[((gi * 2 + 1) * ar + j) * n + k];
        const u64 b0 = b[((gi * 2) * br + j) * n + k], b1 = b[((gi * 2 + 1) * br + j) * n + k];
        Acc c1 = {0, 0};
        acc_add(&c1, a0, b1);
        acc_add(&c1, a1, b0);
        out[((gi * 3) * r + j) * n + k] = mul_mod(a0, b0, m);
        out[((gi * 3 + 1) * r + j) * n + k] = acc_reduce(c1, m);
        out[((gi * 3 + 2) * r + j) * n + k] = mul_mod(a1, b1, m);
    }
}

// linear: out_c = sum_i s[i][j][h] in_i,c + [c = 0] cst[j][h] for g
// ciphertexts of degree deg at r rows; input i has degree ideg[i] and
// irows[i] rows per component (read at the first r); h is the half of
// the coefficient index. Up to three inputs (ni).
KERNEL void linear(u64* out, const u64* in0, const u64* in1, const u64* in2, const i64* ideg, const i64* irows, i64 ni,
                   const u64* s, const u64* cst, i64 g, i64 deg, i64 r, i64 n, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, g * (deg + 1) * r * n) {
        i64 k, j, c;
        const i64 gi = div_small(div_small(split_n(tid, ln, &k), r, &j), deg + 1, &c);
        const i64 h = k >= n / 2;
        const Mod m = mod_at(mods, j);
        Acc acc = {0, 0};
        const u64* ins[3] = {in0, in1, in2};
        for (i64 i = 0; i < ni; i++) {
            if (c > ideg[i]) continue;
            const u64 x = ins[i][((gi * (ideg[i] + 1) + c) * irows[i] + j) * n + k];
            acc_add(&acc, x, s[(i * r + j) * 2 + h]);
        }
        u64 v = acc_reduce(acc, m);
        if (c == 0) v = add_mod(v, cst[j * 2 + h], m.q);
        out[tid] = v;
    }
}

// ------------------------------------------------------ key switching --

// decompose: the RNS digits of x (p polynomials of r rows at moduli
// 0..r-1, in the coefficient domain) lifted to every other prime of QP,
// Lattigo's way (DecomposeAndSplit): digit d holds the primes
// [d alpha, min((d+1) alpha, r)); a one-prime digit is lifted centred at
// q >> 1; a larger one by y_j = x_j * (Q_d/q_j)^-1 + half, the float
// estimate v = floor(sum y_j / q_j), and sum y_j (Q_d/q_j) - v Q_d - half.
// out is p x digits x (r + alpha) rows; a digit's own rows are left to the
// caller (who copies them from the NTT domain). Tables per digit d:
//   src[d]       = (count, first row)
//   yc[d][j]     = (Q_d/q_j)^-1 mod q_j  (with Shoup companion)
//   hf[d][j]     = (Q_d >> 1) mod q_j
//   tc[d][t][j]  = (Q_d/q_j) mod t, then Q_d mod t, then (Q_d >> 1) mod t,
//                  for every target row t of the r + alpha rows.
KERNEL void decompose(u64* out, const u64* x, i64 p, i64 r, i64 alpha, i64 digits, i64 n,
                      const i64* src, const u64* yc, const u64* hf, const u64* tc, const int* qprow, const u64* mods) {
    const i64 rows = r + alpha;
    const i64 stride_t = alpha + 2;
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, p * digits * n) {
        i64 k, d;
        const i64 pi = div_small(split_n(tid, ln, &k), digits, &d);
        const i64 cnt = src[2 * d], first = src[2 * d + 1];
        u64* o = out + ((pi * digits + d) * rows) * n + k;
        const u64* xi = x + (pi * r) * n + k;
        const u64* tcd = tc + d * rows * stride_t;
        if (cnt == 1) {
            const Mod mq = mod_at(mods, first);
            u64 c = xi[first * n];
            const int neg = c >= (mq.q >> 1);
            if (neg) c = mq.q - c;
            for (i64 t = 0; t < rows; t++) {
                if (t >= first && t < first + cnt) continue;
                const Mod mt = mod_at(mods, qprow[t]);
                u64 v = reduce64(c, mt);
                if (neg && v) v = mt.q - v;
                o[t * n] = v;
            }
            continue;
        }
        u64 y[8];
        double vf = 0;
        for (i64 j = 0; j < cnt; j++) {
            const Mod mj = mod_at(mods, first + j);
            const u64 xv = add_mod(xi[(first + j) * n], hf[d * alpha + j], mj.q);
            y[j] = mul_shoup(xv, yc[2 * (d * alpha + j)], yc[2 * (d * alpha + j) + 1], mj.q);
            vf = em_dadd(vf, em_ddiv((double)y[j], (double)mj.q));
        }
        const u64 v = (u64)vf;
        for (i64 t = 0; t < rows; t++) {
            if (t >= first && t < first + cnt) continue;
            const Mod mt = mod_at(mods, qprow[t]);
            const u64* c = tcd + t * stride_t;
            Acc acc = {0, 0};
            for (i64 j = 0; j < cnt; j++) acc_add(&acc, reduce64(y[j], mt), c[j]);
            u64 s = acc_reduce(acc, mt);
            s = sub_mod(s, mul_mod(reduce64(v, mt), c[alpha], mt), mt.q);
            o[t * n] = sub_mod(s, c[alpha + 1], mt.q);
        }
    }
}

// key_product: out (p x 2 x rows) = sum_d dec[d] * key[d][c] for p
// decompositions (p x digits x rows, rows = r Q rows then alpha P rows; with
// dshared, one decomposition that every polynomial uses), polynomial pi
// with the key at key + kidx[pi] * kstride, a key being (kdigits x 2 x
// krows) rows whose Q rows start at 0 and P rows at kq (its first r Q rows
// and its P rows are read).
KERNEL void key_product(u64* out, const u64* dec, const u64* key, const i64* kidx, i64 kstride, i64 p, i64 digits, i64 r,
                        i64 alpha, i64 krows, i64 kq, i64 n, i64 dshared, const int* qprow, const u64* mods) {
    const i64 rows = r + alpha;
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, p * rows * n) {
        i64 k, t;
        const i64 pi = div_small(split_n(tid, ln, &k), rows, &t);
        const Mod m = mod_at(mods, qprow[t]);
        const i64 kr = t < r ? t : kq + (t - r);
        const u64* kp = key + kidx[pi] * kstride;
        const u64* dp = dec + (dshared ? 0 : pi * digits * rows * n);
        Acc a0 = {0, 0}, a1 = {0, 0};
        for (i64 d = 0; d < digits; d++) {
            const u64 x = dp[(d * rows + t) * n + k];
            acc_add(&a0, x, kp[((d * 2) * krows + kr) * n + k]);
            acc_add(&a1, x, kp[((d * 2 + 1) * krows + kr) * n + k]);
        }
        out[((pi * 2) * rows + t) * n + k] = acc_reduce(a0, m);
        out[((pi * 2 + 1) * rows + t) * n + k] = acc_reduce(a1, m);
    }
}

// mod_up_p: ext (p x r rows) = the P rows of x (p x (r + alpha) rows,
// coefficient domain) lifted to Q's first r primes, centred (Lattigo's
// ModUpPtoQ): y_j = (x_j + half) (P/p_j)^-1, v = floor(sum y_j / p_j),
// sum y_j (P/p_j) - v P - half. Tables: yc[j] (with Shoup companion),
// hf[j] = (P >> 1) mod p_j, tc[t] = (P/p_j mod q_t for j, P mod q_t,
// (P >> 1) mod q_t).
KERNEL void mod_up_p(u64* ext, const u64* x, i64 p, i64 r, i64 alpha, i64 n, i64 pmod0,
                     const u64* yc, const u64* hf, const u64* tc, const u64* mods) {
    const i64 stride_t = alpha + 2;
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, p * n) {
        i64 k;
        const i64 pi = split_n(tid, ln, &k);
        const u64* xi = x + (pi * (r + alpha) + r) * n + k;
        u64 y[8];
        double vf = 0;
        for (i64 j = 0; j < alpha; j++) {
            const Mod mj = mod_at(mods, pmod0 + j);
            const u64 xv = add_mod(xi[j * n], hf[j], mj.q);
            y[j] = mul_shoup(xv, yc[2 * j], yc[2 * j + 1], mj.q);
            vf = em_dadd(vf, em_ddiv((double)y[j], (double)mj.q));
        }
        const u64 v = (u64)vf;
        for (i64 t = 0; t < r; t++) {
            const Mod mt = mod_at(mods, t);
            const u64* c = tc + t * stride_t;
            Acc acc = {0, 0};
            for (i64 j = 0; j < alpha; j++) acc_add(&acc, reduce64(y[j], mt), c[j]);
            u64 s = acc_reduce(acc, mt);
            s = sub_mod(s, mul_mod(reduce64(v, mt), c[alpha], mt), mt.q);
            ext[(pi * r + t) * n + k] = sub_mod(s, c[alpha + 1], mt.q);
        }
    }
}

// mod_down_finish: out (p x r rows) = (x_Q - ext) * P^-1 (+ plus when
// given), x being p x (r + alpha) rows; pinv[t] = P^-1 mod q_t with its
// Shoup companion.
KERNEL void mod_down_finish(u64* out, const u64* x, const u64* ext, const u64* plus, i64 p, i64 r, i64 alpha, i64 n, i64 add,
                            const u64* pinv, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, p * r * n) {
        i64 k, t;
        const i64 pi = div_small(split_n(tid, ln, &k), r, &t);
        const u64 q = mods[3 * t];
        u64 v = mul_shoup(sub_mod(x[(pi * (r + alpha) + t) * n + k], ext[tid], q), pinv[2 * t], pinv[2 * t + 1], q);
        if (add) v = add_mod(v, plus[tid], q);
        out[tid] = v;
    }
}

// ------------------------------------------------------------ rescale --

// rescale_lift: for p polynomials of r rows whose last row was inverse
// transformed into last (p rows, coefficient domain), writes
// tmp (p x (r-1) rows) = ((last + half) mod q_l - half) mod q_i, the
// rounding term of Lattigo's DivRoundByLastModulusNTT (half = (q_l-1)/2).
KERNEL void rescale_lift(u64* tmp, const u64* last, i64 p, i64 r, i64 n, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, p * (r - 1) * n) {
        i64 k, i;
        const i64 pi = div_small(split_n(tid, ln, &k), r - 1, &i);
        const Mod ml = mod_at(mods, r - 1), mi = mod_at(mods, i);
        const u64 half = (ml.q - 1) >> 1;
        const u64 b = add_mod(last[pi * n + k], half, ml.q);
        tmp[tid] = sub_mod(reduce64(b, mi), reduce64(half, mi), mi.q);
    }
}

// rescale_finish: out (p x (r-1) rows) = (x_i - tmp_i) * q_l^-1, x being
// p x r rows; qlinv[i] with its Shoup companion.
KERNEL void rescale_finish(u64* out, const u64* x, const u64* tmp, i64 p, i64 r, i64 n, const u64* qlinv, const u64* mods) {
    const i64 ln = log2_pow2(n);
    GRID_LOOP(tid, p * (r - 1) * n) {
        i64 k, i;
        const i64 pi = div_small(split_n(tid, ln, &k), r - 1, &i);
        const u64 q = mods[3 * i];
        out[tid] = mul_shoup(sub_mod(x[(pi * r + i) * n + k], tmp[tid], q), qlinv[2 * i], qlinv[2 * i + 1], q);
    }
}
