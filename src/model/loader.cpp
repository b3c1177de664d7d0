// Weight upload: parallel preads into a pair of pinned staging buffers whose async host->device
// copies overlap the next reads (GPU), or straight into the weight buffer when it is host memory.
#include "model/loader.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/error.h"
#include "model/safetensors.h"
#include "util/fs.h"
#include "util/progress.h"

namespace frost::model {
namespace {

// One tensor to place: read from a file (fd >= 0) or copied from host memory.
struct Source {
    std::string name;
    DType dtype = DType::BF16;
    int fd = -1;
    std::string path;
    uint64_t file_offset = 0;
    const uint8_t* memory = nullptr;
    size_t bytes = 0;
    size_t dst_offset = 0;
};

// A contiguous piece of one Source placed in a staging buffer.
struct Piece {
    const Source* src;
    size_t src_off;      // bytes into the tensor
    size_t bytes;
    size_t staging_off;
};

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

void collect(const TensorView& v, const Checkpoint& ck, std::vector<Source>* out, std::map<std::string, size_t>* seen) {
    if (!v.present() || seen->count(v.name)) return;
    Source s;
    s.name = v.name;
    s.dtype = v.dtype;
    s.bytes = v.bytes;
    const CheckpointTensor* t = ck.find(v.name);
    if (t && t->data == v.data) {  // a view straight onto the file (or its aligned copy of it)
        s.fd = ck.file(t->file).fd();
        s.path = ck.file(t->file).path();
        s.file_offset = t->file_offset;
    } else {
        s.memory = static_cast<const uint8_t*>(v.data);
    }
    (*seen)[v.name] = out->size();
    out->push_back(std::move(s));
}

// A MoE layer's router, experts (in expert order, gate / up / down each) and shared expert.
// Slices of a fused expert tensor are not file tensors by name, so they come from memory.
void collect_moe(const MoeWeights& m, const Checkpoint& ck, std::vector<Source>* s, std::map<std::string, size_t>* seen) {
    collect(m.router, ck, s, seen);
    for (size_t e = 0; e < m.gate.size(); ++e) {
        collect(m.gate[e], ck, s, seen);
        collect(m.up[e], ck, s, seen);
        collect(m.down[e], ck, s, seen);
    }
    for (const TensorView* v : {&m.shared_gate, &m.shared_up, &m.shared_down, &m.shared_expert_gate})
        collect(*v, ck, s, seen);
}

std::vector<Source> gather(const ModelWeights& w, bool include_mtp, std::map<std::string, size_t>* seen) {
    std::vector<Source> s;
    const Checkpoint& ck = *w.checkpoint;
    collect(w.embed_tokens, ck, &s, seen);
    for (const auto& L : w.layers) {
        for (const TensorView* v : {&L.input_layernorm, &L.post_attention_layernorm, &L.mlp_gate, &L.mlp_up, &L.mlp_down})
            collect(*v, ck, &s, seen);
        if (L.kind == LayerKind::Linear) {
            for (const TensorView* v : {&L.lin.in_proj_qkv, &L.lin.in_proj_z, &L.lin.in_proj_b, &L.lin.in_proj_a,
                                        &L.lin.conv1d, &L.lin.A_log, &L.lin.dt_bias, &L.lin.norm, &L.lin.out_proj})
                collect(*v, ck, &s, seen);
        } else {
            for (const TensorView* v : {&L.full.q_proj, &L.full.k_proj, &L.full.v_proj, &L.full.o_proj,
                                        &L.full.q_norm, &L.full.k_norm})
                collect(*v, ck, &s, seen);
        }
        if (L.is_moe) collect_moe(L.moe, ck, &s, seen);
    }
    collect(w.final_norm, ck, &s, seen);
    if (!w.tied) collect(w.lm_head, ck, &s, seen);
    if (include_mtp)
        for (const auto& [name, v] : w.mtp) collect(v, ck, &s, seen);
    return s;
}

// Runs the reads of one staging fill on up to `threads` threads, each job at most `chunk` bytes.
frost_status read_pieces(const std::vector<Piece>& pieces, uint8_t* staging, int threads, size_t chunk) {
    struct Job { const Piece* p; size_t off, bytes; };
    std::vector<Job> jobs;
    for (const auto& p : pieces)
        for (size_t o = 0; o < p.bytes; o += chunk) jobs.push_back({&p, o, std::min(chunk, p.bytes - o)});
    std::atomic<size_t> next{0};
    std::mutex mu;
    frost_status first = FROST_OK;
    std::string message;
    auto worker = [&] {
        for (size_t j; (j = next.fetch_add(1)) < jobs.size();) {
            const Job& job = jobs[j];
            const Source& s = *job.p->src;
            uint8_t* dst = staging + job.p->staging_off + job.off;
            std::string err;
            bool ok = true;
            frost_status st = FROST_ERR_IO;
            if (s.fd < 0) {
                std::memcpy(dst, s.memory + job.p->src_off + job.off, job.bytes);
            } else if (frost_fault_hit(FROST_FAULT_IO)) {
                ok = false;
                err = "injected I/O fault";
            } else {
                ok = util::pread_full(s.fd, dst, job.bytes, s.file_offset + job.p->src_off + job.off, &err);
            }
            if (!ok) {
                std::lock_guard<std::mutex> lock(mu);
                if (first == FROST_OK) {
                    first = st;
                    message = s.path + ": tensor '" + s.name + "': " + err;
                }
                next = jobs.size();  // stop handing out work
            }
        }
    };
    int n = std::max(1, std::min<int>(threads, int(jobs.size())));
    std::vector<std::thread> pool;
    for (int i = 1; i < n; ++i) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    if (first != FROST_OK) return fail(first, "%s", message.c_str());
    return FROST_OK;
}

// Everything allocated during one upload, released on any failure.
struct Resources {
    frost_stream* stream = nullptr;
    frost_buffer* staging[2] = {nullptr, nullptr};
    frost_event* done[2] = {nullptr, nullptr};
    frost_buffer* weights = nullptr;
    ~Resources() { release(); }
    void release() {
        if (stream) frost_stream_sync(stream);
        for (auto* e : done) frost_event_destroy(e);
        for (auto* b : staging) frost_buffer_free(b);
        if (weights) frost_buffer_free(weights);
        frost_stream_destroy(stream);
        stream = nullptr;
        staging[0] = staging[1] = nullptr;
        done[0] = done[1] = nullptr;
        weights = nullptr;
    }
};

void advise_huge_pages(void* p, size_t bytes) {
    constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
    uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
    uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHugePage - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// The GPU path: fill staging[k] with parallel preads, enqueue its async host->device copies and an
// event, switch to staging[k^1]; before refilling a staging buffer, wait for its event.
frost_status stage_and_copy(frost_ctx* ctx, const std::vector<Source>& sources, size_t payload,
                            const WeightUploadOptions& opt, Resources& r, util::Progress* bar, uint64_t* from_files,
                            uint64_t* from_memory) {
    const size_t staging = std::min(align_up(opt.staging_bytes, kWeightAlignment), align_up(payload, kWeightAlignment));
    FROST_TRY(frost_stream_create(ctx, 0, &r.stream));
    for (int k = 0; k < 2; ++k) {
        FROST_TRY(frost_buffer_alloc(ctx, k ? "weights.staging1" : "weights.staging0", staging, FROST_SPACE_HOST_PINNED,
                                     &r.staging[k]));
        FROST_TRY(frost_event_create(ctx, &r.done[k]));
    }

    // Walk the tensors in order, cutting them into staging-sized fills (a large tensor spans
    // several fills; many small ones share one).
    size_t si = 0, s_off = 0;
    bool used[2] = {false, false};
    for (int k = 0; si < sources.size(); k ^= 1) {
        if (used[k]) FROST_TRY(frost_event_sync(r.done[k]));  // its previous copies have finished
        std::vector<Piece> pieces;
        size_t fill = 0;
        while (si < sources.size() && fill < staging) {
            const Source& s = sources[si];
            size_t n = std::min(s.bytes - s_off, staging - fill);
            if (n > 0) pieces.push_back({&s, s_off, n, fill});
            fill += n;
            s_off += n;
            if (s_off == s.bytes) {
                ++si;
                s_off = 0;
            }
        }
        uint8_t* base = static_cast<uint8_t*>(frost_buffer_ptr(r.staging[k]));
        FROST_TRY(read_pieces(pieces, base, opt.read_threads, opt.read_chunk_bytes));
        for (const auto& p : pieces) {
            FROST_TRY(frost_buffer_copy(r.weights, p.src->dst_offset + p.src_off, r.staging[k], p.staging_off, p.bytes,
                                        r.stream));
            (p.src->fd >= 0 ? *from_files : *from_memory) += p.bytes;
        }
        FROST_TRY(frost_event_record(r.done[k], r.stream));
        used[k] = true;
        bar->add(fill);
    }
    FROST_TRY(frost_stream_sync(r.stream));
    bar->finish();

    return FROST_OK;
}

frost_status upload_into(frost_ctx* ctx, const ModelWeights& w, const WeightUploadOptions& opt, Resources& r,
                         UploadedWeights* out) {
    FROST_CHECK_ARG(opt.staging_bytes >= kWeightAlignment && opt.read_threads >= 1 && opt.read_chunk_bytes > 0);
    const auto t0 = std::chrono::steady_clock::now();
    FROST_TRY(w.checkpoint->check_intact());

    std::map<std::string, size_t> index;
    std::vector<Source> sources = gather(w, opt.include_mtp, &index);
    size_t total = 0, payload = 0;
    for (auto& s : sources) {
        s.dst_offset = total;
        total = align_up(total + s.bytes, kWeightAlignment);
        payload += s.bytes;
    }
    if (total == 0) return fail(FROST_ERR_INVALID_ARG, "upload_weights: no tensors to upload");

    FROST_TRY(frost_buffer_alloc(ctx, "weights", total, opt.space, &r.weights));
    util::Progress bar("loading weights", payload, opt.progress);
    uint64_t from_files = 0, from_memory = 0;
    if (opt.direct_when_host && frost_ctx_backend(ctx) == FROST_BACKEND_CPU) {
        // One fill covering every tensor, read in place: pieces address the weight buffer itself.
        // Fresh host memory costs one page fault per 4 KiB on first touch; transparent huge pages
        // (a hint, ignored where unavailable) cut that by 512x for a multi-GB buffer.
        advise_huge_pages(frost_buffer_ptr(r.weights), total);
        std::vector<Piece> pieces;
        for (const auto& s : sources) {
            pieces.push_back({&s, 0, s.bytes, s.dst_offset});
            (s.fd >= 0 ? from_files : from_memory) += s.bytes;
        }
        FROST_TRY(read_pieces(pieces, static_cast<uint8_t*>(frost_buffer_ptr(r.weights)), opt.read_threads,
                              opt.read_chunk_bytes));
        bar.set(payload);
        bar.finish();
    } else {
        FROST_TRY(stage_and_copy(ctx, sources, payload, opt, r, &bar, &from_files, &from_memory));
    }
    UploadedWeights u;
    u.buffer = r.weights;
    for (const auto& s : sources) u.tensors[s.name] = UploadedTensor{r.weights, s.dst_offset, s.bytes, s.dtype};
    if (w.tied && w.lm_head.present()) u.tensors["lm_head.weight"] = u.tensors[w.embed_tokens.name];
    u.bytes_from_files = from_files;
    u.bytes_from_memory = from_memory;
    u.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.weights = nullptr;  // ownership moves to *out
    *out = std::move(u);
    return FROST_OK;
}

}  // namespace

const UploadedTensor* UploadedWeights::find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
}

frost_status UploadedWeights::release() {
    frost_status s = frost_buffer_free(buffer);
    buffer = nullptr;
    tensors.clear();
    return s;
}

frost_status upload_weights(frost_ctx* ctx, const ModelWeights& w, const WeightUploadOptions& opt, UploadedWeights* out) {
    FROST_CHECK_ARG(ctx && out && w.checkpoint);
    Resources r;
    frost_status s = upload_into(ctx, w, opt, r, out);
    if (s != FROST_OK) {
        // Releasing makes frost calls, which reset the thread's last error: keep the cause.
        std::string cause = last_error();
        r.release();
        set_last_error(cause);
    }
    return s;
}

}  // namespace frost::model
