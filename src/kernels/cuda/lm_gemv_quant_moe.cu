// The MoE decode's routed down projection and the mix in one launch (lm_gemv_quant.h,
// gemv_quant_moe_down_launch). Before it a decode step over quantized experts ran the down GEMV
// (rows * (k + 1) entries, one block per (16-row tile, entry): on the 35B-A3B shape 128 x 9
// blocks of which half the warps idle, since K = 512 is 4 steps for 8 warps) and then a combine
// kernel reading the k + 1 fp32 outputs back (ncu, H200, isolated and cold: down 9.3 us for 9 MB,
// 4.4x its floor; combine 6.1 us).
//
// Here a block owns one 16-row tile of H for one row and all of that row's entries. Its work is
// (k + 1) x V units: entry slot q (0 the shared expert, then routed slot q - 1) times v, one of
// the V = min(steps, 8) warps of the 8-warp GEMV, whose steps v, v + 8, ... it runs with that
// warp's accumulation (qtc::tc_step) into that warp's partial sum. The block's 12 warps take the
// units round-robin, kSlots (unit, step) pairs at a time in registers (weights, scales and x of all
// of them in flight at once: on the 35B shape 36 units, 3 per warp, so the block's whole 72 KB
// tile of the 9 experts is requested in one go). The shared expert's weights do not depend on
// the router: its units are loaded before the PDL wait, and with ids_ready every unit's are. Then
// the partials meet in shared memory and 16 threads form each output row as the 8-warp GEMV
// would (warp partials in warp order, the row factor), weight it and add it to the residual as
// moe_combine_kernel does (slot order, then the shared expert, fmaf, one bf16 rounding).
//
// Measured (H200 2026-11-29; bench_quant_gemv 25 --moe, 35B-A3B down, 8 routed + shared, fresh
// experts every back-to-back launch, us per launch): the folded down GEMV + the combine 11.47 ->
// 9.34 (fp8 block), 10.47 -> 9.31 (NVFP4), 10.97 -> 8.90 (INT4); the GEMV alone runs 8.78 / 7.88
// / 8.39. Engine (35B-A3B FP8, `frost bench engine --decode 1024 --decode-steps 64`, alternated):
// 8 layers 0.690 / 0.696 -> 0.683 / 0.683 ms/token, 40 layers 2.430 -> 2.353. ids_ready (the
// experts' loads before the wait, FROST_MOE_EARLY_IDS=1) gains in the bench (INT4 8.90 -> 8.42)
// but not in the engine (8 layers 0.669 vs 0.670): a block of 384 threads x ~150 registers
// cannot share an SM with the gate/up blocks it would overlap, so it is off by default.
#include "kernels/cuda/lm_gemv_quant_tc.cuh"

#include "kernels/cuda/lm_gemv_common.cuh"
#include "kernels/cuda/lm_gemv_quant_dispatch.cuh"

namespace frost::kernels {
namespace {
using namespace lm;
using namespace qtc;

constexpr int kMixWarps = 12;
constexpr int kMixThreads = kMixWarps * kWarp;
constexpr int kSlots = 3;  // (unit, step) pairs a warp holds in registers at once

template <int F, bool kPaired>
__global__ void __launch_bounds__(kMixThreads, 1) gemv_quant_moe_down_kernel(GemvQuantParams p, GemvQuantMoeMix mix) {
    extern __shared__ float part[];  // [(k + 1) * V][16]: unit u's partial sums of the tile's rows
    constexpr int L = loads_per_row<F>();
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int t = lane % 4, gid = lane / 4;
    const int tile = blockIdx.x, row = blockIdx.y;
    const int k = mix.k, steps = p.K / kStepK;
    const int V = steps < kWarps ? steps : kWarps;
    const int units = (k + 1) * V;
    const int ldx = p.ldx > 0 ? p.ldx : p.K;
    const int wstep = step_stride<F>(p.row_blocks);
    int n_in[2];  // the lane's two rows within an expert
    bool ok[2];
    tc_tile_rows<false>(tile, gid, p.N, n_in, ok);
    const int32_t* ids = p.expert_ids + static_cast<int64_t>(row) * k;

    // The warp's (unit, step) walk: units warp, warp + 12, ...; unit u's steps v, v + 8, ... with
    // v = u % V. Slot i of a round holds pair (su[i], ss[i]); su -1: empty.
    int cu = warp, cs = warp % V;
    int su[kSlots], ss[kSlots];
    auto fill = [&] {
#pragma unroll
        for (int i = 0; i < kSlots; ++i) {
            su[i] = cu < units ? cu : -1;
            ss[i] = cs;
            if (cu < units) {
                cs += kWarps;
                if (cs >= steps) {
                    cu += kMixWarps;
                    cs = cu % V;
                }
            }
        }
    };
    uint4 w[kSlots][2][L];
    StepRaw sr[kSlots][2];
    uint4 xv[kSlots][4];
    // Weights and scales of slot i. A unit of slot q >= 1 reads its expert id (through L2: the
    // ids are rewritten every step) and that expert's rows of the stack; q = 0 the shared weights.
    auto load_w = [&](int i) {
        const int q = su[i] / V, s = ss[i];
        const void* base = q == 0 ? p.shared_w : p.w;
        const int row0 = q == 0 ? 0 : __ldcg(ids + q - 1) * p.N;
        int n[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) n[r] = ok[r] ? row0 + n_in[r] : row0;  // a dropped row reads the first row
        const RowScales<F> rs(p, q == 0 ? p.shared_scale : p.scale, q == 0 ? p.shared_zero_point : p.zero_point, n);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const uint4* wrow = lane_row<F>(base, n[r], p.K, t, p.row_blocks);
#pragma unroll
            for (int l = 0; l < L; ++l) w[i][r][l] = __ldg(wrow + static_cast<int64_t>(s) * wstep + l);
            sr[i][r] = rs.load(r, s);
        }
    };
    // x of slot i (column 0 of B: lanes gid 0): the entry's activations, gate/up's output.
    auto load_x = [&](int i) {
        const int q = su[i] / V;
        const int x_row = q == 0 ? p.shared_x_row0 + row : row * k + q - 1;
        const uint4* xrow = reinterpret_cast<const uint4*>(p.x + static_cast<int64_t>(x_row) * ldx) + 4 * t;
#pragma unroll
        for (int c = 0; c < 4; ++c) xv[i][c] = gid == 0 ? xrow[ss[i] * (kStepK / kVec) + c] : make_uint4(0, 0, 0, 0);
    };

    fill();
#pragma unroll
    for (int i = 0; i < kSlots; ++i)
        if (su[i] >= 0 && (su[i] < V || mix.ids_ready)) load_w(i);
    pdl_wait();
    pdl_launch_dependents();
#pragma unroll
    for (int i = 0; i < kSlots; ++i)
        if (su[i] >= V && !mix.ids_ready) load_w(i);
#pragma unroll
    for (int i = 0; i < kSlots; ++i)
        if (su[i] >= 0) load_x(i);

    // kBf16Magic128 where ptxas cannot see the constant (N > 0 here), so and_or stays one LOP3.
    const uint32_t magic = kBf16Magic128 ^ (static_cast<uint32_t>(p.N) & 0x80000000u);
    float acc[2][4] = {};
    for (;;) {
#pragma unroll
        for (int i = 0; i < kSlots; ++i) {
            if (su[i] < 0) break;
            if (ss[i] < kWarps) {  // the unit's first step: the 8-warp GEMV's warp starts at zero
#pragma unroll
                for (int c = 0; c < 2; ++c)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[c][e] = 0.0f;
            }
            tc_step<F, kPaired>(w[i], sr[i], xv[i], magic, acc);
            if (ss[i] + kWarps >= steps && t == 0) {  // its last step: the warp's partial of column 0
                part[su[i] * kTileRows + gid] = acc[0][0] + acc[1][0];
                part[su[i] * kTileRows + gid + 8] = acc[0][2] + acc[1][2];
            }
        }
        if (cu >= units) break;
        fill();
#pragma unroll
        for (int i = 0; i < kSlots; ++i) {
            if (su[i] >= 0) {
                load_w(i);
                load_x(i);
            }
        }
    }
    __syncthreads();

    // Output row h of the tile: each entry's value as the 8-warp GEMV sums it (its V warp
    // partials in warp order, then the row factor), mixed as moe_combine_kernel does.
    if (threadIdx.x >= kTileRows) return;
    const int h = tile * kTileRows + static_cast<int>(threadIdx.x);
    if (h >= p.N) return;
    auto entry_value = [&](int q) {
        float v = 0.0f;
        for (int vi = 0; vi < V; ++vi) v += part[(q * V + vi) * kTileRows + threadIdx.x];
        return v;
    };
    float total = 0.0f;
    for (int j = 0; j < k; ++j) {
        const int nr = __ldcg(ids + j) * p.N + h;
        const float v = row_factor<F>(entry_value(j + 1), nr, p.scale, p.row_global_scale, p.global_scale);
        total = fmaf(mix.topk_w[static_cast<int64_t>(row) * k + j], v, total);
    }
    const float vs = row_factor<F>(entry_value(0), h, p.shared_scale, p.shared_row_global_scale, p.global_scale);
    total = fmaf(mix.shared_w[row], vs, total);
    bf16* out = mix.out + static_cast<int64_t>(row) * mix.ldo + h;
    *out = __float2bfloat16_rn(__bfloat162float(*out) + total);
}

template <int F>
cudaError_t launch_mix(const GemvQuantParams& p, const GemvQuantMoeMix& mix, cudaStream_t stream) {
    const int steps = p.K / kStepK;
    const int V = steps < kWarps ? steps : kWarps;
    const size_t smem = static_cast<size_t>(mix.k + 1) * V * kTileRows * sizeof(float);
    const dim3 grid(ceil_div(p.N, kTileRows), mix.rows);
    constexpr bool k4 = !is_fp8<F>();  // only the 4-bit formats have a paired order
    auto kernel = k4 && p.nibble_pairs ? gemv_quant_moe_down_kernel<F, k4> : gemv_quant_moe_down_kernel<F, false>;
    return launch_kernel(kernel, grid, dim3(kMixThreads), smem, stream, p.pdl != 0, p, mix);
}

}  // namespace

bool gemv_quant_moe_down_eligible(const GemvQuantParams& p, const GemvQuantMoeMix& mix) {
    if (!mix.topk_w || !mix.shared_w || !mix.out || mix.rows < 1 || mix.k < 1 || mix.k > kGemvQuantMoeMaxK ||
        mix.ldo < p.N || reinterpret_cast<uintptr_t>(mix.out) % 2 != 0)
        return false;
    if (!p.expert_ids || p.routed_entries != mix.rows * mix.k || p.entries != mix.rows * (mix.k + 1) || p.x_entry_div != 1 ||
        p.M != 1 || p.swiglu || p.accumulate || p.act_fp8)
        return false;
    GemvQuantParams q = p;  // the tensor-core GEMV's conditions, with the residual as its output
    q.y = mix.out;
    q.ldy = mix.ldo;
    q.out_f32 = 0;
    return gemv_quant_tc_eligible(q);
}

cudaError_t gemv_quant_moe_down_launch(const GemvQuantParams& p, const GemvQuantMoeMix& mix, cudaStream_t stream) {
    if (!gemv_quant_moe_down_eligible(p, mix)) return cudaErrorInvalidValue;
    return launch_for_format(p.format, [&](auto f) { return launch_mix<decltype(f)::value>(p, mix, stream); });
}

}  // namespace frost::kernels
