// The two passes of the alpha-ReLU loss (paper Section 2, eq. (sp_loss), Lemma 1) as
// vectorized CPU loops over an (N, V) logits matrix, one row per task of ATen's own
// thread pool (at::parallel_for), math in float (double for double input).
//
// With t = [z - c]_+ (c = tau / (alpha - 1), e = 1 / (alpha - 1)):
//   loss_sums:  s_i = sum_j t_ij^(e + 1)          (one read pass)
//   loss_and_logit_sums: s_i and w_i = sum_j z_ij (one read pass; label smoothing's term)
//   probs_into: out_ij = scale_i * (ka * t_ij^e - shift)
//                                                 (one read + one write pass; out may be z)
//   support:    the flat indices i * V + j of the entries with t_ij > 0 or NaN (one read pass;
//               the fused linear layer's sparse gradient, transforms/_torch_linear.py)
// shift = eps / V is label smoothing's uniform part of the gradient p - q; shift = 0 and
// the plain loss_sums run the loops without it.
// Integer e in 1..4 (alpha = 2, 1.5, 4/3, 1.25) are straight-line SIMD loops; any other e
// calls pow only inside blocks of kBlock entries that hold a positive t (the support of
// alpha-ReLU on a vocabulary is a few dozen entries).
//
// Decoding (paper Section 2: alpha-ReLU needs no normalizing reduction):
//   top_k_logits: the k largest logits of each row, larger first and equal logits lower
//                 index first, in one read pass (a row holding a NaN: NaN values); their
//                 log-scores, k per row, are then alpha_relu_log_scores' own (top_scores.py).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

namespace {

// Entries per block: the general power calls pow only in blocks holding a positive t.
constexpr int64_t kBlock = 64;
// Independent partial sums, so that the reduction vectorizes without reassociation flags.
constexpr int64_t kLanes = 16;

// The power of t in the gradient, e = 1 / (alpha - 1): 1..4 are exact products
// (alpha = 2, 1.5, 4/3, 1.25); 0 means any other e, through std::pow.
int integer_power(double e) {
  for (int k = 1; k <= 4; ++k) {
    if (e == k) return k;
  }
  return 0;
}

// Rows per task: at least ~32K entries, so small inputs stay on one thread.
int64_t grain_rows(int64_t vocab) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(vocab, 1));
}

template <int K, typename acc_t>
inline acc_t ipow(acc_t t) {
  if constexpr (K == 1) {
    return t;
  } else {
    return t * ipow<K - 1>(t);
  }
}

// [z_j - c]_+ with NaN kept (a NaN compares false). A value, not std::max's reference,
// so that the loops vectorize.
template <typename scalar_t, typename acc_t>
inline acc_t shifted(const scalar_t* z, int64_t j, acc_t c) {
  const acc_t t = static_cast<acc_t>(z[j]) - c;
  return t < acc_t(0) ? acc_t(0) : t;
}

// sum_j z_j over one block, while the block is in L1 (the smoothed loss's extra sum).
template <typename scalar_t, typename acc_t>
inline acc_t block_logit_sum(const scalar_t* zb, int64_t m) {
  acc_t lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= m; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<acc_t>(zb[j + l]);
  }
  for (; j < m; ++j) lanes[0] += static_cast<acc_t>(zb[j]);
  acc_t s = 0;
  for (int64_t l = 0; l < kLanes; ++l) s += lanes[l];
  return s;
}

// sum_j t_j^(K + 1) over one row (K = 0: t_j^e1 through pow) and, if Logits, sum_j z_j
// into *logit_sum in the same pass.
template <int K, bool Logits, typename scalar_t, typename acc_t>
double row_sum(const scalar_t* z, int64_t vocab, acc_t c, acc_t e1, double* logit_sum) {
  double total = 0, logits = 0;
  for (int64_t j0 = 0; j0 < vocab; j0 += kBlock) {
    const int64_t m = std::min(kBlock, vocab - j0);
    const scalar_t* zb = z + j0;
    acc_t t[kBlock];
    acc_t lanes[kLanes] = {};
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) t[j] = shifted(zb, j, c);
    if constexpr (Logits) logits += block_logit_sum<scalar_t, acc_t>(zb, m);
    if constexpr (K > 0) {
      int64_t j = 0;
      for (; j + kLanes <= m; j += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] += ipow<K + 1>(t[j + l]);
      }
      for (; j < m; ++j) lanes[0] += ipow<K + 1>(t[j]);
    } else {
      int live = 0;  // entries that are positive or NaN
#pragma omp simd reduction(+ : live)
      for (int64_t j = 0; j < m; ++j) live += !(t[j] <= acc_t(0));
      if (live > 0) {
        for (int64_t j = 0; j < m; ++j) lanes[0] += t[j] != 0 ? std::pow(t[j], e1) : acc_t(0);
      }
    }
    acc_t s = 0;
    for (int64_t l = 0; l < kLanes; ++l) s += lanes[l];
    total += s;
  }
  if constexpr (Logits) *logit_sum = logits;
  return total;
}

// x - o where the loop subtracts a shift; x itself otherwise (no change to unshifted code).
template <bool Shift, typename acc_t>
inline acc_t minus(acc_t x, acc_t o) {
  if constexpr (Shift) {
    return x - o;
  } else {
    return x;
  }
}

// out_j = k * t_j^K - o (K = 0: k * t_j^e through pow; o only if Shift); out may be z. t
// goes through a block buffer: fused into one loop, GCC sinks the product into a branch
// and stops vectorizing.
template <int K, bool Shift, typename scalar_t, typename acc_t>
void row_probs(const scalar_t* z, scalar_t* out, int64_t vocab, acc_t c, acc_t e, acc_t k,
               acc_t o) {
  acc_t t[kBlock];
  for (int64_t j0 = 0; j0 < vocab; j0 += kBlock) {
    const int64_t m = std::min(kBlock, vocab - j0);
    const scalar_t* zb = z + j0;
    scalar_t* ob = out + j0;
    if constexpr (K > 0) {
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) t[j] = shifted(zb, j, c);
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) {
        ob[j] = static_cast<scalar_t>(minus<Shift>(k * ipow<K>(t[j]), o));
      }
    } else {
      int live = 0;  // entries that are positive or NaN
#pragma omp simd reduction(+ : live)
      for (int64_t j = 0; j < m; ++j) {
        t[j] = shifted(zb, j, c);
        live += !(t[j] <= acc_t(0));
      }
      for (int64_t j = 0; j < m; ++j) {
        const acc_t p = live > 0 && t[j] != 0 ? k * std::pow(t[j], e) : acc_t(0);
        ob[j] = static_cast<scalar_t>(minus<Shift>(p, o));
      }
    }
  }
}

// logit_sums is null unless Logits.
template <int K, bool Logits, typename scalar_t, typename acc_t>
void sums_rows(const scalar_t* z, acc_t* sums, acc_t* logit_sums, int64_t n, int64_t vocab,
               acc_t c, acc_t e1) {
  at::parallel_for(0, n, grain_rows(vocab), [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double logits = 0;
      sums[i] = static_cast<acc_t>(row_sum<K, Logits>(z + i * vocab, vocab, c, e1, &logits));
      if constexpr (Logits) logit_sums[i] = static_cast<acc_t>(logits);
    }
  });
}

template <int K, bool Shift, typename scalar_t, typename acc_t>
void probs_rows(const scalar_t* z, const acc_t* scale, scalar_t* out, int64_t n, int64_t vocab,
                acc_t c, acc_t e, acc_t ka, acc_t shift) {
  at::parallel_for(0, n, grain_rows(vocab), [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      row_probs<K, Shift>(z + i * vocab, out + i * vocab, vocab, c, e, scale[i] * ka,
                          scale[i] * shift);
    }
  });
}

void check_matrix(const at::Tensor& z) {
  TORCH_CHECK(z.dim() == 2 && z.is_contiguous() && z.device().is_cpu(),
              "arelu_cpu: expected a contiguous 2-D CPU tensor, got ", z.sizes());
}

// The per-row sums of the loss (and, if Logits, of the logits) into sums / logit_sums.
template <bool Logits>
void fill_sums(const at::Tensor& z, double c, double e, const at::Tensor& sums,
               const at::Tensor& logit_sums) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, z.scalar_type(), "loss_sums", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto* zp = z.const_data_ptr<scalar_t>();
    auto* sp = sums.mutable_data_ptr<acc_t>();
    auto* wp = Logits ? logit_sums.mutable_data_ptr<acc_t>() : nullptr;
    const acc_t cc = static_cast<acc_t>(c), e1 = static_cast<acc_t>(e + 1.0);
    const int64_t n = z.size(0), v = z.size(1);
    switch (integer_power(e)) {
      case 1: sums_rows<1, Logits>(zp, sp, wp, n, v, cc, e1); break;
      case 2: sums_rows<2, Logits>(zp, sp, wp, n, v, cc, e1); break;
      case 3: sums_rows<3, Logits>(zp, sp, wp, n, v, cc, e1); break;
      case 4: sums_rows<4, Logits>(zp, sp, wp, n, v, cc, e1); break;
      default: sums_rows<0, Logits>(zp, sp, wp, n, v, cc, e1);
    }
  });
}

at::Tensor empty_sums(const at::Tensor& z) {
  const auto acc = z.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return at::empty({z.size(0)}, z.options().dtype(acc));
}

at::Tensor loss_sums(const at::Tensor& z, double c, double e) {
  check_matrix(z);
  at::Tensor sums = empty_sums(z);
  fill_sums<false>(z, c, e, sums, sums);
  return sums;
}

std::tuple<at::Tensor, at::Tensor> loss_and_logit_sums(const at::Tensor& z, double c, double e) {
  check_matrix(z);
  at::Tensor sums = empty_sums(z), logit_sums = empty_sums(z);
  fill_sums<true>(z, c, e, sums, logit_sums);
  return {sums, logit_sums};
}

template <bool Shift>
void fill_probs(const at::Tensor& z, const at::Tensor& scale, double c, double e, double ka,
                double shift, const at::Tensor& out) {
  check_matrix(z);
  check_matrix(out);
  TORCH_CHECK(out.sizes() == z.sizes() && out.scalar_type() == z.scalar_type(),
              "arelu_cpu: out must match z");
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, z.scalar_type(), "probs_into", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    TORCH_CHECK(scale.is_contiguous() && scale.numel() == z.size(0) &&
                scale.scalar_type() == c10::CppTypeToScalarType<acc_t>::value,
                "arelu_cpu: scale must be a contiguous (N,) tensor in the accumulation dtype");
    const auto* zp = z.const_data_ptr<scalar_t>();
    const auto* sp = scale.const_data_ptr<acc_t>();
    auto* op = out.mutable_data_ptr<scalar_t>();
    const auto cc = static_cast<acc_t>(c), ee = static_cast<acc_t>(e), kk = static_cast<acc_t>(ka);
    const auto ss = static_cast<acc_t>(shift);
    const int64_t n = z.size(0), v = z.size(1);
    switch (integer_power(e)) {
      case 1: probs_rows<1, Shift>(zp, sp, op, n, v, cc, ee, kk, ss); break;
      case 2: probs_rows<2, Shift>(zp, sp, op, n, v, cc, ee, kk, ss); break;
      case 3: probs_rows<3, Shift>(zp, sp, op, n, v, cc, ee, kk, ss); break;
      case 4: probs_rows<4, Shift>(zp, sp, op, n, v, cc, ee, kk, ss); break;
      default: probs_rows<0, Shift>(zp, sp, op, n, v, cc, ee, kk, ss);
    }
  });
}

void probs_into(const at::Tensor& z, const at::Tensor& scale, double c, double e, double ka,
                const at::Tensor& out, double shift) {
  if (shift == 0) {
    fill_probs<false>(z, scale, c, e, ka, shift, out);
  } else {
    fill_probs<true>(z, scale, c, e, ka, shift, out);
  }
}

// ------------------------------------------------- the support and sparse products
// The flat indices (row-major) of the entries of z above c or NaN: alpha-ReLU's support, the
// nonzeros of p. Rows go in parts of `rows`, each collected apart and then concatenated in
// order; once more than `most` are found the scan stops (the caller then runs dense).
template <typename scalar_t>
void support_parts(const scalar_t* z, int64_t n, int64_t vocab, int64_t rows, double c,
                   int64_t most, std::vector<std::vector<int64_t>>& found,
                   std::atomic<int64_t>& total) {
  using acc_t = at::opmath_type<scalar_t>;
  const acc_t cc = static_cast<acc_t>(c);
  at::parallel_for(0, static_cast<int64_t>(found.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end && total.load(std::memory_order_relaxed) <= most; ++p) {
      const int64_t last = std::min(n, (p + 1) * rows) * vocab;
      for (int64_t k0 = p * rows * vocab; k0 < last; k0 += kBlock) {
        const int64_t m = std::min(kBlock, last - k0);
        int live = 0;
#pragma omp simd reduction(+ : live)
        for (int64_t j = 0; j < m; ++j) live += !(static_cast<acc_t>(z[k0 + j]) <= cc);
        if (live == 0) continue;
        for (int64_t j = 0; j < m; ++j) {
          if (!(static_cast<acc_t>(z[k0 + j]) <= cc)) found[p].push_back(k0 + j);
        }
      }
      total.fetch_add(static_cast<int64_t>(found[p].size()), std::memory_order_relaxed);
    }
  });
}

// The indices and their count; more than `most`: no indices.
std::tuple<at::Tensor, int64_t> support(const at::Tensor& z, double c, int64_t most) {
  check_matrix(z);
  const int64_t n = z.size(0), vocab = z.size(1), rows = grain_rows(vocab);
  std::vector<std::vector<int64_t>> found((n + rows - 1) / rows);
  std::atomic<int64_t> total{0};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, z.scalar_type(), "support", [&] {
    support_parts(z.const_data_ptr<scalar_t>(), n, vocab, rows, c, most, found, total);
  });
  const int64_t count = total.load();
  at::Tensor flat = at::empty({count > most ? 0 : count}, z.options().dtype(at::kLong));
  if (count <= most) {
    std::vector<int64_t> offsets(found.size() + 1, 0);
    for (size_t p = 0; p < found.size(); ++p) offsets[p + 1] = offsets[p] + found[p].size();
    int64_t* fp = flat.mutable_data_ptr<int64_t>();
    at::parallel_for(0, static_cast<int64_t>(found.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        std::copy(found[p].begin(), found[p].end(), fp + offsets[p]);
      }
    });
  }
  return {flat, count};
}

// ---------------------------------------------------------------- decoding: top-k logits
// A token's log-score log([(alpha - 1) z - tau]_+) / (alpha - 1) never decreases with its
// logit z, so the k best scores of a row are those of its k largest logits.

// Entries per block of the top-k scan: a block with no logit above the current k-th
// largest (nearly all, past the first few) costs one vectorized compare per entry.
constexpr int64_t kTopBlock = 32;

// Puts (x, j) into the descending list val/idx of n <= k entries; if full, x beats val[k-1]
// and drops it. Strict < keeps an equal value that came first (lower index) ahead.
inline void top_insert(float* val, int64_t* idx, int64_t& n, int64_t k, float x, int64_t j) {
  int64_t p = n < k ? n++ : k - 1;
  for (; p > 0 && val[p - 1] < x; --p) {
    val[p] = val[p - 1];
    idx[p] = idx[p - 1];
  }
  val[p] = x;
  idx[p] = j;
}

// The k largest logits of one row into val/idx (descending); whether the row holds a NaN.
bool row_top_k(const float* z, int64_t vocab, int64_t k, float* val, int64_t* idx) {
  int64_t n = 0;
  int nans = 0;
  for (int64_t j0 = 0; j0 < vocab; j0 += kTopBlock) {
    const int64_t m = std::min(kTopBlock, vocab - j0);
    const float* zb = z + j0;
    const float floor = n < k ? -std::numeric_limits<float>::infinity() : val[k - 1];
    int above = 0, bad = 0;
#pragma omp simd reduction(+ : above, bad)
    for (int64_t j = 0; j < m; ++j) {
      above += zb[j] > floor;
      bad += zb[j] != zb[j];
    }
    nans += bad;
    if (above == 0 && n == k) continue;
    for (int64_t j = 0; j < m; ++j) {
      const float x = zb[j];
      if (n < k ? x == x : x > val[k - 1]) top_insert(val, idx, n, k, x, j0 + j);
    }
  }
  return nans > 0 || n < k;  // n < k only if NaNs took the places of real logits
}

std::tuple<at::Tensor, at::Tensor> top_k_logits(const at::Tensor& z, int64_t k) {
  check_matrix(z);
  TORCH_CHECK(z.scalar_type() == at::kFloat, "arelu_cpu: top_k_logits takes float32 logits");
  TORCH_CHECK(k >= 1 && k <= z.size(1), "arelu_cpu: k must lie in [1, V], got ", k);
  const int64_t n = z.size(0), vocab = z.size(1);
  at::Tensor values = at::empty({n, k}, z.options());
  at::Tensor indices = at::empty({n, k}, z.options().dtype(at::kLong));
  const float* zp = z.const_data_ptr<float>();
  float* vp = values.mutable_data_ptr<float>();
  int64_t* ip = indices.mutable_data_ptr<int64_t>();
  at::parallel_for(0, n, grain_rows(vocab), [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (row_top_k(zp + i * vocab, vocab, k, vp + i * k, ip + i * k)) {
        for (int64_t p = 0; p < k; ++p) {  // a row with a NaN logit: NaN values, indices 0..k-1
          vp[i * k + p] = std::numeric_limits<float>::quiet_NaN();
          ip[i * k + p] = p;
        }
      }
    }
  });
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY(arelu_cpu, m) {
  m.def("loss_sums(Tensor z, float c, float e) -> Tensor");
  m.def("loss_and_logit_sums(Tensor z, float c, float e) -> (Tensor, Tensor)");
  m.def("probs_into(Tensor z, Tensor scale, float c, float e, float ka, Tensor(a!) out, "
        "float shift=0.0) -> ()");
  m.def("top_k_logits(Tensor z, int k) -> (Tensor, Tensor)");
  m.def("support(Tensor z, float c, int most) -> (Tensor, int)");
}

TORCH_LIBRARY_IMPL(arelu_cpu, CPU, m) {
  m.impl("loss_sums", &loss_sums);
  m.impl("loss_and_logit_sums", &loss_and_logit_sums);
  m.impl("probs_into", &probs_into);
  m.impl("top_k_logits", &top_k_logits);
  m.impl("support", &support);
}
