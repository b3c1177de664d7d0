// Quantized decode GEMV against the CPU reference: fresh random quantized weights (every fp8 code
// but NaN, every e2m1 / int4 code, random scales and zero points) are dequantized by
// model/quant/dequant.h, multiplied with the same bf16 x in fp64, and compared with the kernel's
// fp32 output (relative L2 <= 1e-5) and bf16 output (<= 1e-2); the output is poisoned first and
// two runs are bitwise equal. Odd row counts cover the last warp's half-empty row pair. The
// device dequantization to bf16 must equal the CPU one rounded to bf16, bit for bit. Where the
// tensor-core kernel applies, a batch of M = 8 (and 3) x rows with padded strides matches the
// reference row by row and each row's bits equal its solo launch (M = 1), for the plain, the
// residual (accumulate) and the SwiGLU forms. W8A8 (act_fp8): the same checks against the fp64
// product of the dequantized weights with x quantized by the CPU's quantize_act_e4m3. The MoE
// down-and-mix launch: bitwise the down GEMV's 8-warp form followed by moe_combine_launch, and
// within the fp64 reference of the mix. The 4-bit cases run again with the weights rewritten in
// the paired nibble order (GemvQuantParams::nibble_pairs): the same checks hold. INT4 in 128-wide
// groups also converts to the W4A8 GEMM's e4m3 operand, checked value by value.
#include <gtest/gtest.h>

#if !FROST_WITH_CUDA
TEST(CudaGemvQuant, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#else
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/lm_gemm_fp8.h"
#include "kernels/cuda/lm_gemv_quant.h"
#include "kernels/cuda/lm_moe.h"
#include "kernels/cuda_test_util.h"
#include "model/quant/dequant.h"
#include "util/fp8.h"

namespace frost::test {
namespace {

namespace mq = frost::model::quant;
constexpr double kF32Tol = 1e-5;
constexpr double kBf16Tol = 1e-2;
// W8A8 fp32 outputs against the fp64 product of the same e4m3 operands: the products are exact but
// Hopper's FP8 mma adds with fewer mantissa bits than fp32 (the kernel sums each 128-wide step's
// chain in fp32, as DeepSeek-V3's recipe does). Multiplying bf16 x instead gives ~2e-2.
constexpr double kW8A8Tol = 1e-3;

// x's rows [rows, K] (ld apart) as W8A8 sees them: the CPU reference's e4m3 quantization per
// 128-wide group, decoded (kernels/cpu quantize_act_e4m3, in place on a copy).
std::vector<float> act_quantized(std::vector<float> x, int rows, int K, int ld) {
    EXPECT_EQ(kernels::cpu::quantize_act_e4m3(x.data(), rows, K, ld), FROST_OK);
    return x;
}

struct Case {
    int format, N, K;
    int block = 128;     // fp8 block size (both dims)
    int group = 128;     // int4 group size
    bool zero_point = false;
    const char* name;
    int block_k = 0;     // fp8 block: the k size when not `block` (per-row scales: block 1, block_k 128)
    bool paired = false; // 4-bit: the uploaded weights rewritten in the paired nibble order (nibble_pairs)
    bool blocked = false; // 4-bit: then also in 8-row blocks (row_blocks; N a multiple of 8, K of 128)
    int bk() const { return block_k > 0 ? block_k : block; }
};

// Case c with its 4-bit weights in the paired nibble order (quant4_pair_nibbles_launch): every
// check of the checkpoint's order must hold for it too (the same reference, the same dequantized
// bf16 bits; only the order of the fp32 sums differs).
Case paired(Case c) {
    c.paired = true;
    return c;
}
// The same with its rows in 8-row blocks too (quant4_row_blocks_launch), as the engine stores a
// 4-bit weight whose shape allows it: the same checks, the same bits as the paired order alone
// (only where the bytes lie changes).
Case blocked(Case c) {
    c.paired = c.blocked = true;
    return c;
}

uint8_t random_fp8(std::mt19937& rng) {
    for (;;) {
        const uint8_t b = uint8_t(rng());
        if ((b & 0x7F) != 0x7F) return b;  // 0x7f / 0xff are NaN
    }
}

// Row-major [rows, K] weights times x row r (fp64).
std::vector<double> ref_rows(const std::vector<float>& w, int64_t N, int64_t K, const float* x) {
    std::vector<double> ref(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += double(w[size_t(n * K + k)]) * x[size_t(k)];
        ref[size_t(n)] = acc;
    }
    return ref;
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// The tensor-core kernel on M x rows at once (strides padded past K and N): every row against the
// fp64 reference, and bitwise against its own solo launch, for y = xW^T (fp32), y += xW^T (fp32 and
// bf16) and the SwiGLU form (N even). p holds the weights; x, y, M and the epilogue are set here.
// `launch`: the default tensor-core launch or one variant of it (`variant` names it).
using Launch = cudaError_t (*)(const kernels::GemvQuantParams&, cudaStream_t);
void check_batched(const Case& c, kernels::GemvQuantParams p, const std::vector<float>& w, Launch launch, const char* variant) {
    auto rng = fresh_rng((std::string(c.name) + "_batched").c_str());
    const int64_t N = c.N, K = c.K;
    for (const int M : {8, 3}) {
        const int ldx = c.K + 8, ldy = c.N + 5;
        const std::string what = std::string(c.name) + " (" + variant + ") M=" + std::to_string(M);
        const auto x = uniform(rng, size_t(M) * ldx, -1, 1);
        Dev<uint16_t> dx(to_bf(x));
        // W8A8: the reference multiplies the quantized rows, and the launch must be one launch.
        const auto xr = p.act_fp8 ? act_quantized(x, M, c.K, ldx) : x;
        const double f32_tol = p.act_fp8 ? kW8A8Tol : kF32Tol;
        std::vector<std::vector<double>> ref(static_cast<size_t>(M));
        for (int r = 0; r < M; ++r) ref[size_t(r)] = ref_rows(w, N, K, &xr[size_t(r) * ldx]);
        // Residual inputs: the same in the batched and the solo runs.
        const auto y0 = uniform(rng, size_t(M) * ldy, -4, 4);
        const auto y0b = to_bf(y0);
        for (int form = 0; form < 3; ++form) {  // 0: plain f32, 1: accumulate f32, 2: accumulate bf16
            const bool f32 = form < 2, acc = form > 0;
            const std::string fw = what + (form == 0 ? " plain" : form == 1 ? " residual f32" : " residual bf16");
            Dev<float> yf(size_t(M) * ldy), ys(static_cast<size_t>(N));
            Dev<uint16_t> yb(size_t(M) * ldy), ysb(static_cast<size_t>(N));
            if (acc) {
                yf.upload(y0);
                yb.upload(y0b);
            }
            kernels::GemvQuantParams q = p;
            q.x = bf(dx);
            q.M = M;
            q.ldx = ldx;
            q.ldy = ldy;
            q.out_f32 = f32 ? 1 : 0;
            q.accumulate = acc ? 1 : 0;
            q.y = f32 ? static_cast<void*>(yf.get()) : static_cast<void*>(yb.get());
            CUDA_OK(launch(q, nullptr));
            const auto got = yf.download();
            const auto gotb = yb.download();
            for (int r = 0; r < M; ++r) {
                std::vector<double> want(static_cast<size_t>(N));
                std::vector<float> row(static_cast<size_t>(N));
                for (int64_t n = 0; n < N; ++n) {
                    const size_t at = size_t(r) * ldy + size_t(n);
                    want[size_t(n)] = ref[size_t(r)][size_t(n)] + (!acc ? 0.0 : f32 ? double(y0[at]) : double(bf2f(y0b[at])));
                    row[size_t(n)] = f32 ? got[at] : bf2f(gotb[at]);
                }
                EXPECT_LE(rel_l2(want, row), f32 ? f32_tol : kBf16Tol) << fw << " row " << r;
                // The same row alone (M = 1): bitwise equal.
                kernels::GemvQuantParams one = q;
                one.M = 1;
                one.ldx = one.ldy = 0;
                one.x = bf(dx) + size_t(r) * ldx;
                std::vector<float> solo_in(y0.begin() + long(r) * ldy, y0.begin() + long(r) * ldy + N);
                std::vector<uint16_t> solo_inb(y0b.begin() + long(r) * ldy, y0b.begin() + long(r) * ldy + N);
                if (acc) {
                    ys.upload(solo_in);
                    ysb.upload(solo_inb);
                } else {
                    ys.poison();
                }
                one.y = f32 ? static_cast<void*>(ys.get()) : static_cast<void*>(ysb.get());
                CUDA_OK(launch(one, nullptr));
                bool same = true;
                if (f32) {
                    const auto solo = ys.download();
                    same = std::memcmp(solo.data(), &got[size_t(r) * ldy], size_t(N) * sizeof(float)) == 0;
                } else {
                    const auto solo = ysb.download();
                    same = std::memcmp(solo.data(), &gotb[size_t(r) * ldy], size_t(N) * sizeof(uint16_t)) == 0;
                }
                EXPECT_TRUE(same) << fw << " row " << r << ": batched bits differ from the solo launch";
            }
        }
        if (N % 2 != 0) continue;
        // SwiGLU: W = [gate; up], y[i] = silu(bf16(gate_i)) * bf16(up_i), bf16 [N/2] per row.
        const int64_t F = N / 2;
        const int ldys = int(F) + 3;
        Dev<uint16_t> ysw(size_t(M) * ldys), ysolo(static_cast<size_t>(F));
        kernels::GemvQuantParams q = p;
        q.x = bf(dx);
        q.M = M;
        q.ldx = ldx;
        q.ldy = ldys;
        q.swiglu = 1;
        q.out_f32 = q.accumulate = 0;
        q.y = ysw.get();
        CUDA_OK(launch(q, nullptr));
        const auto got = ysw.download();
        for (int r = 0; r < M; ++r) {
            std::vector<double> want(static_cast<size_t>(F));
            std::vector<float> row(static_cast<size_t>(F));
            for (int64_t i = 0; i < F; ++i) {
                const double g = round_bf(float(ref[size_t(r)][size_t(i)])), u = round_bf(float(ref[size_t(r)][size_t(F + i)]));
                want[size_t(i)] = silu(g) * u;
                row[size_t(i)] = bf2f(got[size_t(r) * ldys + size_t(i)]);
            }
            EXPECT_LE(rel_l2(want, row), kBf16Tol) << what << " swiglu row " << r;
            kernels::GemvQuantParams one = q;
            one.M = 1;
            one.ldx = one.ldy = 0;
            one.x = bf(dx) + size_t(r) * ldx;
            one.y = ysolo.get();
            ysolo.poison();
            CUDA_OK(launch(one, nullptr));
            const auto solo = ysolo.download();
            EXPECT_EQ(0, std::memcmp(solo.data(), &got[size_t(r) * ldys], size_t(F) * sizeof(uint16_t)))
                << what << " swiglu row " << r << ": batched bits differ from the solo launch";
        }
    }
}

// Random quantized weights of case c as stored (packed bytes, scales, zero points) and their CPU
// dequantization (the reference).
struct QuantWeights {
    std::vector<float> w;  // [N, K]
    std::vector<uint8_t> wbytes, scale_bytes;
    std::vector<int32_t> zp;
    float global_scale = 0;
};
QuantWeights make_weights(const Case& c, std::mt19937& rng) {
    const int64_t N = c.N, K = c.K;
    QuantWeights q;
    q.w.resize(size_t(N * K));
    std::vector<float>& w = q.w;
    std::vector<uint8_t>& wbytes = q.wbytes;
    std::vector<uint8_t>& scale_bytes = q.scale_bytes;
    std::vector<int32_t>& zp = q.zp;
    float& global_scale = q.global_scale;
    std::uniform_real_distribution<float> pos(0.5f, 2.0f);
    switch (c.format) {
        case kernels::kGemvQuantFp8Block:
        case kernels::kGemvQuantFp8Channel: {
            wbytes.resize(size_t(N * K));
            for (auto& b : wbytes) b = random_fp8(rng);
            const bool block = c.format == kernels::kGemvQuantFp8Block;
            const int64_t rows = block ? (N + c.block - 1) / c.block : N, cols = block ? (K + c.bk() - 1) / c.bk() : 1;
            std::vector<float> s(size_t(rows * cols));
            for (auto& v : s) v = pos(rng) / 448.0f;
            mq::dequant_fp8_block(wbytes.data(), s.data(), N, K, block ? c.block : 1, block ? c.bk() : K, w.data());
            scale_bytes.resize(s.size() * sizeof(float));
            std::memcpy(scale_bytes.data(), s.data(), scale_bytes.size());
            break;
        }
        case kernels::kGemvQuantNvfp4: {
            wbytes.resize(size_t(N * K / 2));
            for (auto& b : wbytes) b = uint8_t(rng());
            scale_bytes.resize(size_t(N * K / 16));
            for (auto& b : scale_bytes) b = uint8_t(0x30 + rng() % 0x30);  // e4m3 in [2^-1, 2^5): positive, finite
            global_scale = pos(rng) * 100.0f;
            mq::dequant_nvfp4(wbytes.data(), scale_bytes.data(), global_scale, N, K, w.data());
            break;
        }
        default: {
            const int64_t words = K / 8, groups = K / c.group;
            std::vector<int32_t> packed(size_t(N * words));
            for (auto& v : packed) v = int32_t(rng());
            std::vector<float> s(size_t(N * groups));
            for (auto& v : s) v = round_bf(pos(rng) / 8.0f);  // the kernel reads bf16 scales
            if (c.zero_point) {
                zp.resize(size_t((N + 7) / 8 * groups));
                for (auto& v : zp) v = int32_t(rng());
            }
            mq::dequant_int4(packed.data(), s.data(), c.zero_point ? zp.data() : nullptr, nullptr, N, K, c.group, w.data());
            wbytes.resize(packed.size() * 4);
            std::memcpy(wbytes.data(), packed.data(), wbytes.size());
            const auto sb = to_bf(s);
            scale_bytes.resize(sb.size() * 2);
            std::memcpy(scale_bytes.data(), sb.data(), scale_bytes.size());
            break;
        }
    }
    return q;
}

// The weight params of case c over uploaded weights (x, y and the epilogue unset).
kernels::GemvQuantParams weight_params(const Case& c, const Dev<uint8_t>& dw, const Dev<uint8_t>& ds,
                                       const Dev<int32_t>* dzp, float global_scale) {
    kernels::GemvQuantParams p{};
    p.w = dw.get();
    p.scale = ds.get();
    p.zero_point = dzp ? dzp->get() : nullptr;
    p.global_scale = global_scale;
    p.N = c.N;
    p.K = c.K;
    p.format = c.format;
    p.block_n = c.block;
    p.block_k = c.bk();
    p.group_size = c.group;
    if (c.paired) {  // the bytes rewritten in place, once per upload (the order is not an involution)
        EXPECT_TRUE(c.format == kernels::kGemvQuantNvfp4 || c.format == kernels::kGemvQuantInt4) << c.name;
        EXPECT_EQ(kernels::quant4_pair_nibbles_launch(dw.get(), dw.size(), nullptr), cudaSuccess) << c.name;
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
        p.nibble_pairs = 1;
    }
    if (c.blocked) {  // every stored row (all experts of a stacked case) in 8-row blocks
        const int64_t rows = int64_t(dw.size()) * 2 / c.K;
        EXPECT_TRUE(kernels::quant4_row_blocks_eligible(rows, c.K)) << c.name;
        EXPECT_EQ(kernels::quant4_row_blocks_launch(dw.get(), rows, c.K, nullptr), cudaSuccess) << c.name;
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
        p.row_blocks = 1;
    }
    return p;
}

void run_case(const Case& c) {
    auto rng = fresh_rng(c.name);
    const int64_t N = c.N, K = c.K;
    auto x = uniform(rng, size_t(K), -1, 1);
    const QuantWeights qw = make_weights(c, rng);
    const std::vector<float>& w = qw.w;
    const std::vector<int32_t>& zp = qw.zp;
    const auto ref = ref_rows(w, N, K, x.data());
    Dev<uint16_t> dx(to_bf(x));
    Dev<uint8_t> dw(qw.wbytes), ds(qw.scale_bytes);
    Dev<int32_t> dzp(std::max<size_t>(zp.size(), 1));
    if (!zp.empty()) dzp.upload(zp);
    Dev<float> yf(static_cast<size_t>(N)), yf2(static_cast<size_t>(N));
    Dev<uint16_t> yb(static_cast<size_t>(N));
    kernels::GemvQuantParams p = weight_params(c, dw, ds, zp.empty() ? nullptr : &dzp, qw.global_scale);
    p.x = bf(dx);
    // Both kernels behind gemv_quant_launch: the SIMT one always, the tensor-core one where the
    // shape allows it (that is where gemv_quant_launch sends it).
    std::vector<std::pair<const char*, Launch>> kernels_run = {{"simt", kernels::gemv_quant_simt_launch}};
    if (kernels::gemv_quant_tc_eligible(p)) kernels_run.push_back({"tensor core", kernels::gemv_quant_tc_launch});
    for (const auto& [kname, launch] : kernels_run) {
        const std::string what = std::string(c.name) + " (" + kname + ")";
        for (Dev<float>* d : {&yf, &yf2}) d->upload(std::vector<float>(size_t(N), std::nanf("")));  // poison
        yb.upload(std::vector<uint16_t>(size_t(N), 0x7FC0));
        for (int run = 0; run < 2; ++run) {
            p.out_f32 = 1;
            p.y = run ? yf2.get() : yf.get();
            CUDA_OK(launch(p, nullptr));
        }
        p.out_f32 = 0;
        p.y = yb.get();
        CUDA_OK(launch(p, nullptr));
        const auto got = yf.download();
        EXPECT_EQ(0, std::memcmp(got.data(), yf2.download().data(), got.size() * sizeof(float))) << what << ": not deterministic";
        EXPECT_LE(rel_l2(ref, got), kF32Tol) << what;
        EXPECT_LE(rel_l2(ref, from_bf(yb.download())), kBf16Tol) << what;
    }
    if (kernels::gemv_quant_tc_eligible(p)) {
        // Every tuning variant of the 8-warp one-tile kernel: the same bits (the default launch
        // may pick another block shape, whose partial sums run in another order).
        p.out_f32 = 1;
        p.y = yf.get();
        CUDA_OK(kernels::gemv_quant_tc_launch_tuned(p, 1, 3, 1, nullptr));
        const auto want = yf.download();
        const int variants[][3] = {{2, 2, 0}, {2, 3, 0}, {2, 4, 0}, {4, 2, 0}, {1, 2, 1}, {1, 3, 1}, {2, 2, 1}, {2, 3, 1}};
        for (const auto& [unroll, blocks, pipe] : variants) {
            yf2.poison();
            p.y = yf2.get();
            CUDA_OK(kernels::gemv_quant_tc_launch_tuned(p, unroll, blocks, pipe, nullptr));
            EXPECT_EQ(0, std::memcmp(want.data(), yf2.download().data(), want.size() * sizeof(float)))
                << c.name << ": variant unroll " << unroll << " blocks " << blocks << " pipe " << pipe
                << " differs from {1,3,1}";
        }
        EXPECT_EQ(kernels::gemv_quant_tc_launch_tuned(p, 3, 2, 0, nullptr), cudaErrorInvalidValue) << "unroll 3 is no variant";
        check_batched(c, p, w, kernels::gemv_quant_tc_launch, "default");
        // The pipelined loop (two register buffers), its SwiGLU and residual forms too.
        check_batched(
            c, p, w, [](const kernels::GemvQuantParams& q, cudaStream_t s) { return kernels::gemv_quant_tc_launch_tuned(q, 2, 2, 1, s); },
            "pipe");
        // Two tiles per block (tile_warps 4): other bits than the default (the partial sums in
        // another order) but the same for every M, and within the reference.
        check_batched(
            c, p, w, [](const kernels::GemvQuantParams& q, cudaStream_t s) { return kernels::gemv_quant_tc_launch_tuned(q, 1, 3, 1, s, 4); },
            "two tiles per block");
        // Four tiles per block (tile_warps 2): likewise (two rounds of outputs per thread).
        check_batched(
            c, p, w, [](const kernels::GemvQuantParams& q, cudaStream_t s) { return kernels::gemv_quant_tc_launch_tuned(q, 1, 3, 1, s, 2); },
            "four tiles per block");
        // One tile of 12 warps (tile_warps 12, {1,2,1} only): likewise.
        check_batched(
            c, p, w, [](const kernels::GemvQuantParams& q, cudaStream_t s) { return kernels::gemv_quant_tc_launch_tuned(q, 1, 2, 1, s, 12); },
            "one tile of 12 warps");
        EXPECT_EQ(kernels::gemv_quant_tc_launch_tuned(p, 1, 3, 1, nullptr, 12), cudaErrorInvalidValue) << "12 warps run {1,2,1} only";
    }
    // The whole weight dequantized on the device: bitwise the CPU reference rounded to bf16.
    Dev<uint16_t> wb(static_cast<size_t>(N * K));
    CUDA_OK(kernels::dequant_bf16_launch(p, bf(wb), nullptr));
    const auto wdev = wb.download();
    size_t differ = 0;
    for (size_t i = 0; i < w.size(); ++i) differ += wdev[i] != f2bf(w[i]);
    EXPECT_EQ(differ, 0u) << c.name << ": device dequantization differs from the CPU one";
    // The same bits from a grid of at most 3 blocks (kDequantMaxBlocks bounds large weights): one
    // row of blocks walks every row (or 8-row group) grid-stride.
    wb.poison();
    CUDA_OK(kernels::dequant_bf16_launch(p, bf(wb), nullptr, 3));
    EXPECT_TRUE(wb.download() == wdev) << c.name << ": dequantization from a bounded grid differs";
    EXPECT_EQ(kernels::dequant_bf16_launch(p, bf(wb), nullptr, 0), cudaErrorInvalidValue) << c.name;
    // INT4 in 128-wide groups as the W8A8 GEMM's operand (W4A8, lm_gemm_fp8.h): every e4m3 byte
    // decodes to the integer q - zp and, times its group's scale from the per-row VEC128 layout,
    // gives the CPU reference's fp32 value bit for bit (the same single product).
    if (kernels::int4_e4m3_ok(p)) {
        Dev<uint8_t> wq(static_cast<size_t>(N * K));
        Dev<float> ws(kernels::act_scale_floats(int32_t(N), int32_t(K)));
        wq.poison();
        ws.poison();
        CUDA_OK(kernels::int4_to_e4m3_launch(p, wq.get(), ws.get(), nullptr));
        const auto q8 = wq.download();
        const auto s8 = ws.download();
        const int64_t ld = kernels::act_scale_ld(int32_t(N));
        size_t bad = 0, first = 0;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k) {
                const size_t i = size_t(n * K + k);
                const float v = util::e4m3_to_f32(q8[i]);
                const bool ok = v == std::nearbyint(v) && std::fabs(v) <= 15.0f && v * s8[size_t((k / 128) * ld + n)] == w[i];
                if (!ok && bad++ == 0) first = i;
            }
        EXPECT_EQ(bad, 0u) << c.name << ": int4 -> e4m3 differs from the CPU dequantization, first at row "
                           << first / size_t(K) << " column " << first % size_t(K);
    } else if (c.format == kernels::kGemvQuantInt4) {
        EXPECT_NE(c.group, 128) << c.name << ": refused for W4A8";
        EXPECT_EQ(kernels::int4_to_e4m3_launch(p, reinterpret_cast<uint8_t*>(bf(wb)), reinterpret_cast<float*>(bf(wb)), nullptr),
                  cudaErrorInvalidValue);
    }
}

// Offsets of expert e's rows in each stored array of E experts of c.N rows stacked (the layouts of
// lm_gemv_quant.h): weight and scale bytes, zero-point int32 words.
size_t expert_w_offset(const Case& c, int e) {
    return size_t(e) * size_t(c.N) * size_t(c.K) * (c.format <= kernels::kGemvQuantFp8Channel ? 2 : 1) / 2;
}
size_t expert_scale_offset(const Case& c, int e) {
    const size_t N = size_t(c.N), K = size_t(c.K);
    switch (c.format) {
        case kernels::kGemvQuantFp8Block: return size_t(e) * (N / size_t(c.block)) * ((K + size_t(c.block) - 1) / size_t(c.block)) * 4;
        case kernels::kGemvQuantFp8Channel: return size_t(e) * N * 4;
        case kernels::kGemvQuantNvfp4: return size_t(e) * N * (K / 16);
        default: return size_t(e) * N * (K / size_t(c.group)) * 2;
    }
}
size_t expert_zp_offset(const Case& c, int e) { return size_t(e) * size_t(c.N / 8) * size_t(c.K / c.group); }

// Routed experts (GemvQuantParams::expert_ids, the MoE decode): E experts of c.N rows stacked into
// one weight; a launch of R rows x k entries, whose expert ids come from device memory, must give
// each entry the bits of a plain launch on its expert's own rows (weights, scales and zero points
// offset by the expert's first row) with that entry's x row, for y = xW^T in fp32 and the SwiGLU
// form, and stay within the CPU reference. Both kernels; the outputs are poisoned first.
// fold: expert 1 (never routed) also serves as a shared expert folded into the launch
// (GemvQuantParams::routed_entries, tensor-core kernel only): R more entries on its own weight
// pointers, reading x rows x_row0 + r, each with the bits of a plain launch on expert 1.
void run_experts_case(const Case& c, bool act8 = false, bool fold = false) {
    constexpr int E = 3, R = 2, kTop = 2, entries = R * kTop, kShared = 1;
    const int32_t ids[entries] = {2, 0, 0, 2};  // row 0 picks experts 2 and 0, row 1 experts 0 and 2
    const int total = entries + (fold ? R : 0);
    auto rng = fresh_rng((std::string(c.name) + "_experts").c_str());
    Case all = c;
    all.N = E * c.N;
    const QuantWeights qw = make_weights(all, rng);
    const int64_t N = c.N, K = c.K;
    const int ldx = c.K + 16;  // x rows padded (entries read x row entry / x_entry_div)
    auto w_off = [&](int e) { return expert_w_offset(c, e); };
    auto s_off = [&](int e) { return expert_scale_offset(c, e); };
    auto z_off = [&](int e) { return expert_zp_offset(c, e); };
    Dev<uint8_t> dw(qw.wbytes), ds(qw.scale_bytes);
    Dev<int32_t> dzp(std::max<size_t>(qw.zp.size(), 1));
    if (!qw.zp.empty()) dzp.upload(qw.zp);
    Dev<int32_t> did(std::vector<int32_t>(ids, ids + entries));
    const auto x = uniform(rng, size_t(total) * ldx, -1, 1);
    Dev<uint16_t> dx(to_bf(x));
    const kernels::GemvQuantParams base = weight_params(all, dw, ds, qw.zp.empty() ? nullptr : &dzp, qw.global_scale);
    std::vector<std::pair<const char*, Launch>> launches;
    if (!act8 && !fold) launches.push_back({"simt", kernels::gemv_quant_simt_launch});  // W8A8, fold: tensor cores only
    kernels::GemvQuantParams probe = base;
    probe.N = c.N;
    probe.x = bf(dx);
    probe.y = dx.get();
    probe.act_fp8 = act8 ? 1 : 0;
    if (kernels::gemv_quant_tc_eligible(probe)) launches.push_back({act8 ? "tensor core w8a8" : "tensor core", kernels::gemv_quant_tc_launch});
    ASSERT_FALSE(launches.empty()) << c.name << ": W8A8 is not eligible";
    const auto xr = act8 ? act_quantized(x, total, c.K, ldx) : x;
    for (const auto& [kname, launch] : launches) {
        for (const int div : {kTop, 1}) {  // gate/up: the k entries of a row share its x; down: one x row per entry
            for (const bool swiglu : {false, true}) {
                if (swiglu && N % 2 != 0) continue;
                const std::string what = std::string(c.name) + " experts (" + kname + (swiglu ? ", swiglu" : "") +
                                         (fold ? ", shared folded" : "") + ", x per " + std::to_string(div) + ")";
                const int x_row0 = div == kTop ? 0 : entries;  // the shared entries' first x row
                const int64_t out = swiglu ? N / 2 : N;
                const int ldy = int(out) + 4;
                Dev<float> yf(size_t(total) * ldy), one_f(static_cast<size_t>(out));
                Dev<uint16_t> yb(size_t(total) * ldy), one_b(static_cast<size_t>(out));
                yf.poison();
                yb.poison();
                kernels::GemvQuantParams q = base;
                q.N = c.N;
                q.x = bf(dx);
                q.ldx = ldx;
                q.ldy = ldy;
                q.expert_ids = did.get();
                q.entries = entries;
                q.x_entry_div = div;
                q.act_fp8 = act8 ? 1 : 0;
                q.swiglu = swiglu ? 1 : 0;
                q.out_f32 = swiglu ? 0 : 1;
                q.y = swiglu ? static_cast<void*>(yb.get()) : static_cast<void*>(yf.get());
                if (fold) {
                    q.routed_entries = entries;
                    q.entries = total;
                    q.shared_x_row0 = x_row0;
                    q.shared_w = dw.get() + w_off(kShared);
                    q.shared_scale = ds.get() + s_off(kShared);
                    q.shared_zero_point = q.zero_point ? dzp.get() + z_off(kShared) : nullptr;
                    q.shared_row_global_scale = q.row_global_scale;
                    ASSERT_TRUE(kernels::gemv_quant_tc_eligible(q)) << what;
                    EXPECT_EQ(kernels::gemv_quant_simt_launch(q, nullptr), cudaErrorInvalidValue) << what << ": SIMT folds nothing";
                    yf.poison();
                    yb.poison();
                }
                CUDA_OK(launch(q, nullptr));
                const auto got_f = yf.download();
                const auto got_b = yb.download();
                for (int j = 0; j < total; ++j) {
                    const bool shared = j >= entries;
                    const int e = shared ? kShared : ids[j];
                    const int xrow = shared ? x_row0 + (j - entries) : j / div;
                    kernels::GemvQuantParams one = q;
                    one.expert_ids = nullptr;
                    one.entries = 0;
                    one.x_entry_div = 1;
                    one.ldx = one.ldy = 0;
                    one.routed_entries = 0;
                    one.x = bf(dx) + size_t(xrow) * ldx;
                    one.w = dw.get() + w_off(e);
                    one.scale = ds.get() + s_off(e);
                    if (one.zero_point) one.zero_point = dzp.get() + z_off(e);
                    one_f.poison();
                    one_b.poison();
                    one.y = swiglu ? static_cast<void*>(one_b.get()) : static_cast<void*>(one_f.get());
                    CUDA_OK(launch(one, nullptr));
                    const std::vector<float> wexp(qw.w.begin() + long(size_t(e) * N * K), qw.w.begin() + long(size_t(e + 1) * N * K));
                    const auto ref = ref_rows(wexp, N, K, &xr[size_t(xrow) * ldx]);
                    if (swiglu) {
                        const auto solo = one_b.download();
                        EXPECT_EQ(0, std::memcmp(solo.data(), &got_b[size_t(j) * ldy], size_t(out) * 2))
                            << what << " entry " << j << ": bits differ from the plain launch on expert " << e;
                        std::vector<double> want(static_cast<size_t>(out));
                        std::vector<float> row(static_cast<size_t>(out));
                        for (int64_t i = 0; i < out; ++i) {
                            want[size_t(i)] = silu(round_bf(float(ref[size_t(i)]))) * round_bf(float(ref[size_t(out + i)]));
                            row[size_t(i)] = bf2f(got_b[size_t(j) * ldy + size_t(i)]);
                        }
                        EXPECT_LE(rel_l2(want, row), kBf16Tol) << what << " entry " << j;
                    } else {
                        const auto solo = one_f.download();
                        EXPECT_EQ(0, std::memcmp(solo.data(), &got_f[size_t(j) * ldy], size_t(out) * 4))
                            << what << " entry " << j << ": bits differ from the plain launch on expert " << e;
                        const std::vector<float> row(got_f.begin() + long(size_t(j) * ldy), got_f.begin() + long(size_t(j) * ldy + out));
                        EXPECT_LE(rel_l2(ref, row), act8 ? kW8A8Tol : kF32Tol) << what << " entry " << j;
                    }
                }
            }
        }
    }
}

TEST(CudaGemvQuant, RoutedExpertsEqualPlainLaunchesOnTheirExpert) {
    FROST_SKIP_WITHOUT_CUDA();
    run_experts_case({kernels::kGemvQuantFp8Block, 256, 1024, 128, 128, false, "fp8_block"});
    run_experts_case({kernels::kGemvQuantFp8Block, 256, 64, 128, 128, false, "fp8_block_k64"});  // SIMT only (the tiny down)
    run_experts_case({kernels::kGemvQuantFp8Channel, 130, 512, 128, 128, false, "fp8_channel"});
    run_experts_case({kernels::kGemvQuantNvfp4, 66, 1024, 128, 128, false, "nvfp4"});
    run_experts_case({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"});
    run_experts_case({kernels::kGemvQuantInt4, 64, 256, 128, 64, false, "int4_group64"});
    run_experts_case(paired({kernels::kGemvQuantNvfp4, 66, 1024, 128, 128, false, "nvfp4"}));
    run_experts_case(paired({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}));
    run_experts_case(paired({kernels::kGemvQuantInt4, 64, 256, 128, 64, false, "int4_group64"}));
    run_experts_case(blocked({kernels::kGemvQuantNvfp4, 72, 1024, 128, 128, false, "nvfp4_n72"}));
    run_experts_case(blocked({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}));
    run_experts_case(blocked({kernels::kGemvQuantInt4, 64, 256, 128, 64, false, "int4_group64"}));  // SIMT only
}

TEST(CudaGemvQuant, SharedExpertFoldedIntoRoutedLaunchKeepsItsBits) {
    FROST_SKIP_WITHOUT_CUDA();
    run_experts_case({kernels::kGemvQuantFp8Block, 256, 1024, 128, 128, false, "fp8_block"}, false, true);
    run_experts_case({kernels::kGemvQuantFp8Channel, 130, 512, 128, 128, false, "fp8_channel"}, false, true);
    run_experts_case({kernels::kGemvQuantNvfp4, 66, 1024, 128, 128, false, "nvfp4"}, false, true);
    run_experts_case({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}, false, true);
    run_experts_case(paired({kernels::kGemvQuantNvfp4, 66, 1024, 128, 128, false, "nvfp4"}), false, true);
    run_experts_case(blocked({kernels::kGemvQuantNvfp4, 72, 1024, 128, 128, false, "nvfp4_n72"}), false, true);
    run_experts_case(blocked({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}), false, true);
    run_experts_case(paired({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}), false, true);
    run_experts_case({kernels::kGemvQuantFp8Block, 256, 1024, 128, 128, false, "fp8_block"}, true, true);  // W8A8
}

// The MoE down projection and the mix in one launch (gemv_quant_moe_down_launch): R rows, each
// with k routed experts (distinct random ids among E stacked experts, read from device memory) and
// a shared expert on its own weights, mixed into a bf16 residual. The launch must equal, bit for
// bit, the folded down GEMV in its 8-warp form (fp32 outputs, poisoned first) followed by
// moe_combine_launch, with and without the early id read (ids_ready) and with a padded residual
// stride (padding untouched), and stay within the fp64 reference of the mix.
void run_moe_mix_case(const Case& c, int k) {
    const int E = k + 2, R = 2, kShared = E;  // experts 0 .. E-1 routed, E the shared one
    auto rng = fresh_rng((std::string(c.name) + "_moe_mix").c_str());
    Case all = c;
    all.N = (E + 1) * c.N;
    const QuantWeights qw = make_weights(all, rng);
    const int64_t N = c.N, K = c.K;
    Dev<uint8_t> dw(qw.wbytes), ds(qw.scale_bytes);
    Dev<int32_t> dzp(std::max<size_t>(qw.zp.size(), 1));
    if (!qw.zp.empty()) dzp.upload(qw.zp);
    std::vector<int32_t> ids;
    for (int r = 0; r < R; ++r) {
        std::vector<int32_t> perm(static_cast<size_t>(E));
        for (int e = 0; e < E; ++e) perm[size_t(e)] = e;
        std::shuffle(perm.begin(), perm.end(), rng);
        ids.insert(ids.end(), perm.begin(), perm.begin() + k);
    }
    Dev<int32_t> did(ids);
    const int rows_x = R * (k + 1), ldx = c.K + 16;  // x: routed entries' rows, then the shared ones
    const auto x = uniform(rng, size_t(rows_x) * ldx, -1, 1);
    Dev<uint16_t> dx(to_bf(x));
    const auto tw = uniform(rng, size_t(R) * k, 0.05f, 1.0f, false), sw = uniform(rng, size_t(R), 0.05f, 1.0f, false);
    Dev<float> dtw(tw), dsw(sw);
    const auto out0 = to_bf(uniform(rng, size_t(R) * N, -0.5f, 0.5f));

    kernels::GemvQuantParams p = weight_params(all, dw, ds, qw.zp.empty() ? nullptr : &dzp, qw.global_scale);
    p.N = c.N;
    p.x = bf(dx);
    p.ldx = ldx;
    p.expert_ids = did.get();
    p.entries = rows_x;
    p.routed_entries = R * k;
    p.x_entry_div = 1;
    p.shared_x_row0 = R * k;
    p.shared_w = dw.get() + expert_w_offset(c, kShared);
    p.shared_scale = ds.get() + expert_scale_offset(c, kShared);
    p.shared_zero_point = p.zero_point ? dzp.get() + expert_zp_offset(c, kShared) : nullptr;
    // The two launches: the folded down GEMV's 8-warp form into fp32 rows, then the combine.
    Dev<float> routed(size_t(rows_x) * N);
    Dev<uint16_t> want_out(out0);
    kernels::GemvQuantParams g = p;
    g.out_f32 = 1;
    g.y = routed.get();
    g.ldy = int(N);
    CUDA_OK(kernels::gemv_quant_tc_launch_tuned(g, 1, 3, 1, nullptr, 8));
    const kernels::MoeCombineParams cp{routed.get(), routed.get() + size_t(R) * k * N, dtw.get(), dsw.get(), bf(want_out),
                                       R, k, int32_t(N), 0};
    CUDA_OK(kernels::moe_combine_launch(cp, nullptr));
    const auto want = want_out.download();

    // The fp64 reference of the mix.
    std::vector<double> ref(size_t(R) * N);
    std::vector<float> got_f(size_t(R) * N);
    for (int r = 0; r < R; ++r) {
        for (int j = 0; j <= k; ++j) {
            const int e = j < k ? ids[size_t(r * k + j)] : kShared;
            const int xrow = j < k ? r * k + j : R * k + r;
            const double wgt = j < k ? double(tw[size_t(r * k + j)]) : double(sw[size_t(r)]);
            const std::vector<float> wexp(qw.w.begin() + long(size_t(e) * N * K), qw.w.begin() + long(size_t(e + 1) * N * K));
            const auto d = ref_rows(wexp, N, K, &x[size_t(xrow) * ldx]);
            for (int64_t h = 0; h < N; ++h) ref[size_t(r * N + h)] += wgt * d[size_t(h)];
        }
        for (int64_t h = 0; h < N; ++h) ref[size_t(r * N + h)] += double(bf2f(out0[size_t(r * N + h)]));
    }
    for (size_t i = 0; i < want.size(); ++i) got_f[i] = bf2f(want[i]);
    EXPECT_LE(rel_l2(ref, got_f), kBf16Tol) << c.name << " moe mix: the two-launch path against the reference";

    for (const int ids_ready : {0, 1}) {
        for (const int pad : {0, 8}) {
            const std::string what = std::string(c.name) + " moe down+mix (k " + std::to_string(k) + ", ids_ready " +
                                     std::to_string(ids_ready) + ", ldo pad " + std::to_string(pad) + ")";
            const int ldo = int(N) + pad;
            std::vector<uint16_t> init(size_t(R) * ldo, 0x7FC0);  // padding: a NaN that must stay
            for (int r = 0; r < R; ++r)
                std::copy(out0.begin() + long(r * N), out0.begin() + long((r + 1) * N), init.begin() + long(r) * ldo);
            Dev<uint16_t> out(init);
            kernels::GemvQuantMoeMix mix{dtw.get(), dsw.get(), bf(out), R, k, ldo, ids_ready};
            ASSERT_TRUE(kernels::gemv_quant_moe_down_eligible(p, mix)) << what;
            CUDA_OK(kernels::gemv_quant_moe_down_launch(p, mix, nullptr));
            const auto got = out.download();
            for (int r = 0; r < R; ++r) {
                EXPECT_EQ(0, std::memcmp(&got[size_t(r) * ldo], &want[size_t(r * N)], size_t(N) * 2))
                    << what << " row " << r << ": bits differ from the down GEMV + combine";
                for (int i = int(N); i < ldo; ++i) EXPECT_EQ(got[size_t(r) * ldo + size_t(i)], 0x7FC0) << what << ": padding written";
            }
        }
    }
    // What it refuses: W8A8, too many experts, entries that are not rows x (k + 1).
    kernels::GemvQuantMoeMix mix{dtw.get(), dsw.get(), bf(want_out), R, k, int32_t(N), 0};
    kernels::GemvQuantParams bad = p;
    bad.act_fp8 = 1;
    EXPECT_FALSE(kernels::gemv_quant_moe_down_eligible(bad, mix)) << c.name << ": W8A8";
    EXPECT_EQ(kernels::gemv_quant_moe_down_launch(bad, mix, nullptr), cudaErrorInvalidValue) << c.name;
    bad = p;
    bad.entries = rows_x - 1;
    EXPECT_FALSE(kernels::gemv_quant_moe_down_eligible(bad, mix)) << c.name << ": entries";
    kernels::GemvQuantMoeMix many = mix;
    many.k = kernels::kGemvQuantMoeMaxK + 1;
    bad = p;
    bad.routed_entries = R * many.k;
    bad.entries = R * (many.k + 1);
    EXPECT_FALSE(kernels::gemv_quant_moe_down_eligible(bad, many)) << c.name << ": k";
    many = mix;
    many.ldo = int(N) - 1;
    EXPECT_FALSE(kernels::gemv_quant_moe_down_eligible(p, many)) << c.name << ": ldo";
}

TEST(CudaGemvQuant, MoeDownAndMixEqualsDownGemvThenCombine) {
    FROST_SKIP_WITHOUT_CUDA();
    run_moe_mix_case({kernels::kGemvQuantFp8Block, 256, 512, 128, 128, false, "fp8_block"}, 8);  // the 35B-A3B form
    run_moe_mix_case({kernels::kGemvQuantFp8Block, 128, 1280, 128, 128, false, "fp8_block_k1280"}, 3);  // units of 2 steps
    run_moe_mix_case({kernels::kGemvQuantFp8Channel, 130, 512, 128, 128, false, "fp8_channel"}, 2);
    run_moe_mix_case({kernels::kGemvQuantNvfp4, 66, 1024, 128, 128, false, "nvfp4"}, 4);
    run_moe_mix_case({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}, 8);
    run_moe_mix_case({kernels::kGemvQuantInt4, 64, 128, 128, 128, false, "int4_k128"}, 10);  // one step, 11 units
    run_moe_mix_case(paired({kernels::kGemvQuantNvfp4, 66, 1024, 128, 128, false, "nvfp4"}), 4);
    run_moe_mix_case(paired({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}), 8);
    run_moe_mix_case(blocked({kernels::kGemvQuantNvfp4, 72, 1024, 128, 128, false, "nvfp4_n72"}), 4);
    run_moe_mix_case(blocked({kernels::kGemvQuantInt4, 128, 512, 128, 128, true, "int4_zero_point"}), 8);
}

// W8A8 decode (act_fp8) on one row: within kW8A8Tol of the fp64 product with the CPU-quantized x,
// and far from the product with bf16 x (so the activations were quantized); deterministic, every
// W8A8 variant bitwise the default; then the batched and routed-expert checks above. x carries a
// few large values, so some groups' scales are set by outliers as in real activations.
void run_w8a8_case(const Case& c) {
    auto rng = fresh_rng((std::string(c.name) + "_w8a8").c_str());
    const int64_t N = c.N, K = c.K;
    auto x = uniform(rng, size_t(K), -1, 1);
    x[3] = 24.0f;
    x[size_t(K) - 5] = -40.0f;
    const QuantWeights qw = make_weights(c, rng);
    const auto ref = ref_rows(qw.w, N, K, act_quantized(x, 1, c.K, c.K).data());
    const auto ref_bf16_x = ref_rows(qw.w, N, K, x.data());
    Dev<uint16_t> dx(to_bf(x));
    Dev<uint8_t> dw(qw.wbytes), ds(qw.scale_bytes);
    Dev<float> yf(static_cast<size_t>(N)), yf2(static_cast<size_t>(N));
    Dev<uint16_t> yb(static_cast<size_t>(N));
    kernels::GemvQuantParams p = weight_params(c, dw, ds, nullptr, 0.0f);
    p.x = bf(dx);
    p.y = yf.get();
    p.act_fp8 = 1;
    ASSERT_TRUE(kernels::gemv_quant_tc_eligible(p)) << c.name;
    yf.poison();
    yf2.poison();
    yb.poison();
    p.out_f32 = 1;
    p.y = yf.get();
    CUDA_OK(kernels::gemv_quant_launch(p, nullptr));
    p.y = yf2.get();
    CUDA_OK(kernels::gemv_quant_launch(p, nullptr));
    p.out_f32 = 0;
    p.y = yb.get();
    CUDA_OK(kernels::gemv_quant_launch(p, nullptr));
    const auto got = yf.download();
    EXPECT_EQ(0, std::memcmp(got.data(), yf2.download().data(), got.size() * sizeof(float))) << c.name << ": not deterministic";
    const double err = rel_l2(ref, got), err_bf16_x = rel_l2(ref_bf16_x, got);
    std::printf("%s w8a8: rel L2 %.2e to the quantized-x product, %.2e to the bf16-x one\n", c.name, err, err_bf16_x);
    EXPECT_LE(err, kW8A8Tol) << c.name;
    EXPECT_GE(err_bf16_x, 5e-3) << c.name << ": as close to the bf16-x product as to the quantized one: x was not quantized";
    EXPECT_LE(rel_l2(ref, from_bf(yb.download())), kBf16Tol) << c.name;
    p.out_f32 = 1;
    yf2.poison();
    p.y = yf2.get();
    CUDA_OK(kernels::gemv_quant_tc_launch_tuned(p, 1, 3, 1, nullptr));
    EXPECT_LE(rel_l2(ref, yf2.download()), kW8A8Tol) << c.name << ": w8a8 {1,3,1}";
    EXPECT_EQ(kernels::gemv_quant_tc_launch_tuned(p, 2, 2, 0, nullptr), cudaErrorInvalidValue) << "w8a8 runs {1,3,1} only";
    check_batched(c, p, qw.w, kernels::gemv_quant_tc_launch, "w8a8");
    check_batched(
        c, p, qw.w, [](const kernels::GemvQuantParams& q, cudaStream_t s) { return kernels::gemv_quant_tc_launch_tuned(q, 1, 3, 1, s, 4); },
        "w8a8 two tiles per block");
    check_batched(
        c, p, qw.w, [](const kernels::GemvQuantParams& q, cudaStream_t s) { return kernels::gemv_quant_tc_launch_tuned(q, 1, 2, 1, s, 12); },
        "w8a8 one tile of 12 warps");
}

TEST(CudaGemvQuant, W8A8QuantizesActivationsAsTheCpuDoes) {
    FROST_SKIP_WITHOUT_CUDA();
    run_w8a8_case({kernels::kGemvQuantFp8Block, 301, 1024, 128, 128, false, "fp8_block"});
    run_w8a8_case({kernels::kGemvQuantFp8Block, 258, 4096 + 128, 128, 128, false, "fp8_block_k4224"});
    run_w8a8_case({kernels::kGemvQuantFp8Block, 130, 2048, 1, 128, false, "fp8_rows1x128", 128});
    run_w8a8_case({kernels::kGemvQuantFp8Channel, 257, 2048, 128, 128, false, "fp8_channel"});
    run_experts_case({kernels::kGemvQuantFp8Block, 256, 1024, 128, 128, false, "fp8_block"}, true);
    run_experts_case({kernels::kGemvQuantFp8Channel, 130, 512, 128, 128, false, "fp8_channel"}, true);
}

TEST(CudaGemvQuant, Fp8Block128) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({kernels::kGemvQuantFp8Block, 301, 1024, 128, 128, false, "fp8_block"});
    run_case({kernels::kGemvQuantFp8Block, 64, 4096 + 64, 128, 128, false, "fp8_block_partial_k_block"});
    run_case({kernels::kGemvQuantFp8Block, 258, 4096, 128, 128, false, "fp8_block_k4096"});
}
TEST(CudaGemvQuant, Fp8Channel) {
    FROST_SKIP_WITHOUT_CUDA();
    run_case({kernels::kGemvQuantFp8Channel, 257, 2048, 128, 128, false, "fp8_channel"});
    run_case({kernels::kGemvQuantFp8Channel, 130, 4096 + 128, 128, 128, false, "fp8_channel_k4224"});
}
TEST(CudaGemvQuant, Nvfp4) {
    FROST_SKIP_WITHOUT_CUDA();
    for (const Case& c : {Case{kernels::kGemvQuantNvfp4, 299, 1024, 128, 128, false, "nvfp4"},
                          Case{kernels::kGemvQuantNvfp4, 33, 4096, 128, 128, false, "nvfp4_k4096"},
                          Case{kernels::kGemvQuantNvfp4, 1000, 12288, 128, 128, false, "nvfp4_k12288"}}) {
        run_case(c);
        run_case(paired(c));
    }
    for (const Case& c : {Case{kernels::kGemvQuantNvfp4, 296, 1024, 128, 128, false, "nvfp4_n296"},
                          Case{kernels::kGemvQuantNvfp4, 1000, 12288, 128, 128, false, "nvfp4_k12288"},
                          // The blocked dequantization's units: 3 steps per group (one short unit each)
                          Case{kernels::kGemvQuantNvfp4, 104, 384, 128, 128, false, "nvfp4_k384"}})
        run_case(blocked(c));
}
TEST(CudaGemvQuant, Int4SymmetricAndZeroPoints) {
    FROST_SKIP_WITHOUT_CUDA();
    for (const Case& c : {Case{kernels::kGemvQuantInt4, 300, 1024, 128, 128, false, "int4"},
                          Case{kernels::kGemvQuantInt4, 77, 2048, 128, 128, true, "int4_zero_point"},
                          Case{kernels::kGemvQuantInt4, 64, 1024, 128, 32, true, "int4_group32"},
                          Case{kernels::kGemvQuantInt4, 515, 4096, 128, 256, true, "int4_group256"},
                          Case{kernels::kGemvQuantInt4, 300, 4096, 128, 128, false, "int4_k4096"}}) {
        run_case(c);
        run_case(paired(c));
    }
    for (const Case& c : {Case{kernels::kGemvQuantInt4, 304, 1024, 128, 128, false, "int4_n304"},
                          Case{kernels::kGemvQuantInt4, 64, 1024, 128, 32, true, "int4_group32"},  // SIMT only
                          Case{kernels::kGemvQuantInt4, 520, 4096, 128, 256, true, "int4_n520_group256"},
                          // The blocked dequantization's units (8 steps of one group): groups of 4 steps
                          // (one short unit each) and of 9 (a unit of 8 and one of 1)
                          Case{kernels::kGemvQuantInt4, 200, 512, 128, 128, true, "int4_k512"},
                          Case{kernels::kGemvQuantInt4, 48, 1152, 128, 128, false, "int4_k1152"}})
        run_case(blocked(c));
    // More rows than a grid's y dimension holds (65535): the dequantization walks rows grid-stride.
    run_case({kernels::kGemvQuantInt4, 65600, 128, 128, 128, true, "int4_rows_past_grid_y"});
}

// The paired nibble order itself: every word of a random buffer rewritten as the host function
// says (bytes compared), and refused on a length or address that is not whole 32-bit words.
TEST(CudaGemvQuant, PairNibblesRewritesEveryWord) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("pair_nibbles");
    std::vector<uint32_t> words(100003);
    for (auto& v : words) v = uint32_t(rng());
    Dev<uint32_t> d(words);
    CUDA_OK(kernels::quant4_pair_nibbles_launch(d.get(), words.size() * 4, nullptr));
    const auto got = d.download();
    size_t differ = 0;
    for (size_t i = 0; i < words.size(); ++i) differ += got[i] != kernels::quant4_pair_nibbles(words[i]);
    EXPECT_EQ(differ, 0u);
    // Element 2j at bits 4j, 2j + 1 at 16 + 4j: 0x76543210 (element e = e) becomes 0x75316420.
    EXPECT_EQ(kernels::quant4_pair_nibbles(0x76543210u), 0x75316420u);
    EXPECT_EQ(kernels::quant4_pair_nibbles_launch(d.get(), 6, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::quant4_pair_nibbles_launch(reinterpret_cast<uint8_t*>(d.get()) + 2, 8, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::quant4_pair_nibbles_launch(nullptr, 8, nullptr), cudaErrorInvalidValue);
}
// The 8-row block map on the host (no GPU needed, so it runs where CI has none): a permutation of
// the chunks that keeps every 8-row group on the chunks it spans row-major, so a row range starting
// at a multiple of 8 (one expert of a stack, which the kernels address from its own first row) is a
// blocked weight by itself; and row-major it is the plain index.
TEST(CudaGemvQuant, RowBlockIndexPermutesChunksWithinEachGroup) {
    for (const auto& [N, K] : {std::pair<int64_t, int64_t>{8, 128}, std::pair<int64_t, int64_t>{40, 384},
                               std::pair<int64_t, int64_t>{64, 4096}}) {
        const int64_t chunks = K / 32;
        std::vector<int> hits(size_t(N * chunks), 0);
        size_t outside = 0, slice_differs = 0, plain_differs = 0;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t c = 0; c < chunks; ++c) {
                const int64_t at = kernels::quant4_chunk_index(n, c, K, true);
                ASSERT_TRUE(at >= 0 && at < N * chunks) << N << " x " << K << ": row " << n << " chunk " << c;
                ++hits[size_t(at)];
                const int64_t g0 = n / 8 * 8;  // the group's first row
                outside += at < g0 * chunks || at >= (g0 + 8) * chunks;
                slice_differs += at - g0 * chunks != kernels::quant4_chunk_index(n - g0, c, K, true);
                plain_differs += kernels::quant4_chunk_index(n, c, K, false) != n * chunks + c;
            }
        EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; })) << N << " x " << K << ": not a permutation";
        EXPECT_EQ(outside, 0u) << N << " x " << K;
        EXPECT_EQ(slice_differs, 0u) << N << " x " << K;
        EXPECT_EQ(plain_differs, 0u) << N << " x " << K;
    }
    EXPECT_TRUE(kernels::quant4_row_blocks_eligible(24576, 12288));
    EXPECT_FALSE(kernels::quant4_row_blocks_eligible(12, 256));  // rows not a multiple of 8
    EXPECT_FALSE(kernels::quant4_row_blocks_eligible(16, 192));  // K not a multiple of 128
    EXPECT_FALSE(kernels::quant4_row_blocks_eligible(0, 256));
}

// The 8-row block layout itself: every 16-byte chunk of a random buffer where quant4_chunk_index
// puts it (the nibbles inside untouched), at a K staged past the 48 KiB shared-memory default; and
// refused where the shape does not allow it.
TEST(CudaGemvQuant, RowBlocksMoveEveryChunkWhereTheIndexSays) {
    FROST_SKIP_WITHOUT_CUDA();
    auto rng = fresh_rng("row_blocks");
    for (const auto& [rows, K] : {std::pair<int64_t, int64_t>{40, 384}, std::pair<int64_t, int64_t>{16, 17408}}) {
        const int64_t chunks = K / 32;
        std::vector<uint32_t> words(size_t(rows * chunks * 4));
        for (auto& v : words) v = uint32_t(rng());
        Dev<uint32_t> d(words);
        CUDA_OK(kernels::quant4_row_blocks_launch(d.get(), rows, K, nullptr));
        const auto got = d.download();
        size_t differ = 0;
        for (int64_t n = 0; n < rows; ++n)
            for (int64_t c = 0; c < chunks; ++c)
                for (int64_t i = 0; i < 4; ++i)
                    differ += got[size_t(kernels::quant4_chunk_index(n, c, K, true) * 4 + i)] != words[size_t((n * chunks + c) * 4 + i)];
        EXPECT_EQ(differ, 0u) << rows << " x " << K;
        EXPECT_EQ(kernels::quant4_chunk_index(3, 5, K, false), 3 * chunks + 5);  // row-major: the plain index
    }
    // In blocks (K 256: two steps), chunk 4 of row 1, its second step's first chunk, follows the
    // first step's 8 rows x 4 chunks; row 9 is in the second block, after both steps of the first.
    EXPECT_EQ(kernels::quant4_chunk_index(1, 4, 256, true), 32 + 4);
    EXPECT_EQ(kernels::quant4_chunk_index(9, 1, 256, true), 2 * 32 + 4 + 1);
    Dev<uint32_t> d(size_t(16 * 256 / 8));
    EXPECT_EQ(kernels::quant4_row_blocks_launch(d.get(), 12, 256, nullptr), cudaErrorInvalidValue);  // rows not a multiple of 8
    EXPECT_EQ(kernels::quant4_row_blocks_launch(d.get(), 8, 192, nullptr), cudaErrorInvalidValue);   // K not a multiple of 128
    EXPECT_EQ(kernels::quant4_row_blocks_launch(reinterpret_cast<uint8_t*>(d.get()) + 4, 8, 256, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(kernels::quant4_row_blocks_launch(nullptr, 8, 256, nullptr), cudaErrorInvalidValue);
    EXPECT_FALSE(kernels::quant4_row_blocks_eligible(8, kernels::kQuant4RowBlocksMaxK + 128));
}
TEST(CudaGemvQuant, RefusesUnsupportedParams) {
    FROST_SKIP_WITHOUT_CUDA();
    Dev<uint16_t> dx(512);
    Dev<uint8_t> dw(64 * 128), ds(64 * 64);  // up to 64 x 128 fp8 weights
    Dev<float> y(256);
    kernels::GemvQuantParams p{};
    p.x = bf(dx);
    p.w = dw.get();
    p.scale = ds.get();
    p.y = y.get();
    p.N = 64;
    p.K = 48;  // not a multiple of 32
    p.format = kernels::kGemvQuantNvfp4;
    p.global_scale = 1;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.K = 64;
    p.format = kernels::kGemvQuantInt4;
    p.group_size = 48;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.format = 9;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    // Batched rows: only the tensor-core kernel takes them (int4 group 32 is SIMT-only), at most 8.
    p.K = 128;
    p.format = kernels::kGemvQuantInt4;
    p.group_size = 32;
    p.M = 2;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.group_size = 128;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaSuccess);
    p.M = 9;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.M = 2;
    p.ldx = 100;  // not a multiple of 8
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    // Routed experts: ids without entries, entries without ids, M > 1, x rows not 16-byte apart.
    Dev<int32_t> ids(std::vector<int32_t>{0, 0});
    p.M = 1;
    p.ldx = 128;
    p.ldy = 64;
    p.expert_ids = ids.get();
    p.entries = 0;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.entries = 2;
    p.M = 2;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.M = 1;
    p.ldx = 132;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    p.ldx = 128;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaSuccess);
    p.expert_ids = nullptr;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue);
    // W8A8: FP8 formats only, K a multiple of 128, the staged rows within kGemvAct8MaxSmem.
    p.entries = 0;
    p.ldx = p.ldy = 0;
    p.act_fp8 = 1;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue) << "w8a8 on int4";
    p.format = kernels::kGemvQuantFp8Channel;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaSuccess);
    p.K = 64;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue) << "w8a8 with K 64";
    p.K = 128;
    p.M = 8;
    p.ldx = 8192;
    EXPECT_FALSE(kernels::gemv_quant_tc_eligible([&] { auto q = p; q.K = 8192; return q; }()))
        << "8 rows of K 8192 staged: more shared memory than the kernel takes";
    // 8-row blocks: 4-bit formats only, K a multiple of 128, the flag 0 or 1.
    p.act_fp8 = 0;
    p.M = 1;
    p.ldx = 0;
    p.row_blocks = 1;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue) << "row blocks on fp8";
    p.format = kernels::kGemvQuantInt4;
    p.group_size = 32;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaSuccess) << "row blocks, int4, K 128";
    p.K = 64;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue) << "row blocks with K 64";
    EXPECT_EQ(kernels::dequant_bf16_launch(p, bf(dx), nullptr), cudaErrorInvalidValue) << "row blocks with K 64";
    p.K = 128;
    p.row_blocks = 2;
    EXPECT_EQ(kernels::gemv_quant_launch(p, nullptr), cudaErrorInvalidValue) << "row_blocks 2";
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace frost::test
#endif
