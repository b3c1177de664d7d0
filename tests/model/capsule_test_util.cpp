// Implementation of the capsule suite helpers (capsule_test_util.h).
#include "model/capsule_test_util.h"

#include <fstream>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "model/capsule_file.h"
#include "model/synth.h"

namespace frost::test {
namespace {

// Removes the per-process temp folders at exit.
struct TempRoot {
    std::string path;
    TempRoot() {
        path = (std::filesystem::temp_directory_path() / ("frost-capsule-test-" + std::to_string(::getpid()))).string();
        std::filesystem::create_directories(path);
    }
    ~TempRoot() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

TempRoot& temp_root() {
    static TempRoot r;
    return r;
}

}  // namespace

std::string capsule_temp_dir(const std::string& tag) {
    static int seq = 0;
    const std::string d = temp_root().path + "/" + tag + "-" + std::to_string(seq++);
    std::filesystem::create_directories(d);
    return d;
}

const std::string& capsule_model_dir(int variant) {
    static std::map<int, std::string> dirs;
    auto it = dirs.find(variant);
    if (it != dirs.end()) return it->second;
    model::SynthOptions o;
    o.out_dir = temp_root().path + "/model-" + std::to_string(variant);
    // The CUDA kernels need head_dim 256 and dk = dv = 128: where CUDA runs, both backends use
    // the smallest such preset so one model serves the whole suite.
    o.preset = frost_backend_available(FROST_BACKEND_CUDA) ? "tiny-gpu" : "tiny";
    o.vocab = kCapsuleVocab;
    o.seed = 1000 + uint64_t(variant);
    const frost_status s = model::synth_checkpoint(o);
    EXPECT_EQ(s, FROST_OK) << frost_last_error();
    return dirs[variant] = o.out_dir;
}

std::vector<frost_backend> capsule_backends() {
    std::vector<frost_backend> v = {FROST_BACKEND_CPU};
    if (frost_backend_available(FROST_BACKEND_CUDA)) v.push_back(FROST_BACKEND_CUDA);
    return v;
}

std::string backend_label(const ::testing::TestParamInfo<frost_backend>& info) {
    return info.param == FROST_BACKEND_CUDA ? "cuda" : "cpu";
}

std::unique_ptr<model::Engine> capsule_engine(frost_backend b, int sessions, int variant) {
    model::EngineOptions o;
    o.backend = b;
    o.max_seq_len = kCapsuleMaxSeq;
    o.prefill_chunk = kCapsuleChunk;
    o.sessions = sessions;
    std::unique_ptr<model::Engine> e;
    const frost_status s = model::Engine::create(capsule_model_dir(variant), o, &e);
    EXPECT_EQ(s, FROST_OK) << frost_last_error();
    return e;
}

std::vector<int32_t> random_ids(size_t n, uint64_t seed, int vocab) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> d(0, vocab - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

Continuation continue_session(model::Engine& e, int session, int32_t first, int steps, bool first_logits) {
    Continuation c;
    int32_t next = first;
    for (int i = 0; i < steps; ++i) {
        if (i > 0) {
            EXPECT_EQ(e.decode(session, &next), FROST_OK) << frost_last_error();
        }
        std::vector<float> l;
        if (i > 0 || first_logits) {
            EXPECT_EQ(e.last_logits(session, &l), FROST_OK) << frost_last_error();
        }
        c.tokens.push_back(next);
        c.logits.push_back(std::move(l));
    }
    return c;
}

Continuation cold_run(model::Engine& e, int session, const std::vector<int32_t>& ids, int steps,
                      const model::SamplingConfig& sc) {
    EXPECT_EQ(e.reset(session, sc), FROST_OK) << frost_last_error();
    int32_t next = -1;
    EXPECT_EQ(e.prefill(session, ids.data(), ids.size(), &next), FROST_OK) << frost_last_error();
    return continue_session(e, session, next, steps);
}

::testing::AssertionResult same_continuation(const Continuation& a, const Continuation& b) {
    if (a.tokens.size() != b.tokens.size())
        return ::testing::AssertionFailure() << "lengths differ: " << a.tokens.size() << " vs " << b.tokens.size();
    for (size_t i = 0; i < a.tokens.size(); ++i) {
        if (a.tokens[i] != b.tokens[i])
            return ::testing::AssertionFailure() << "token " << i << " differs: " << a.tokens[i] << " vs " << b.tokens[i];
        if (a.logits[i].empty() || b.logits[i].empty()) continue;  // not computed (right after a restore)
        if (a.logits[i].size() != b.logits[i].size() ||
            std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * sizeof(float)) != 0)
            return ::testing::AssertionFailure() << "logits of step " << i << " differ bitwise";
    }
    return ::testing::AssertionSuccess();
}

std::vector<std::pair<std::string, std::vector<uint8_t>>> live_state(model::Engine& e, int session) {
    std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
    const int64_t P = e.position(session);
    for (const auto& b : e.state_buffers(session)) {
        std::vector<uint8_t> bytes(b.valid_bytes(P));
        if (!bytes.empty()) {
            frost_buffer* h = nullptr;
            EXPECT_EQ(frost_buffer_wrap(e.ctx(), "test.readback", bytes.data(), bytes.size(), FROST_SPACE_HOST, &h),
                      FROST_OK);
            EXPECT_EQ(frost_buffer_copy(h, 0, b.buf, 0, bytes.size(), e.stream()), FROST_OK);
            EXPECT_EQ(frost_stream_sync(e.stream()), FROST_OK);
            frost_buffer_free(h);
        }
        out.emplace_back(b.name.substr(b.name.find('.') + 1), std::move(bytes));
    }
    return out;
}

void poison_session(model::Engine& e, int session, uint8_t value) {
    for (const auto& b : e.buffers(session)) {
        if (b.role == model::BufferRole::Weights) continue;
        EXPECT_EQ(frost_buffer_fill(b.buf, 0, value, frost_buffer_bytes(b.buf), e.stream()), FROST_OK);
    }
    EXPECT_EQ(frost_stream_sync(e.stream()), FROST_OK);
}

size_t TempFiles::count(const std::string& dir) {
    size_t n = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir))
        if (f.path().filename().string().find(model::kCapsuleTempMarker) != std::string::npos) ++n;
    return n;
}

frost_ctx_stats stats_of(const model::Engine& e) {
    frost_ctx_stats s{};
    EXPECT_EQ(frost_ctx_get_stats(e.ctx(), &s), FROST_OK);
    return s;
}

::testing::AssertionResult same_stats(const frost_ctx_stats& a, const frost_ctx_stats& b) {
    if (a.live_buffers == b.live_buffers && a.bytes_device == b.bytes_device &&
        a.bytes_host_pinned == b.bytes_host_pinned && a.bytes_host == b.bytes_host)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "buffers " << a.live_buffers << " vs " << b.live_buffers << ", device "
                                         << a.bytes_device << " vs " << b.bytes_device << ", pinned "
                                         << a.bytes_host_pinned << " vs " << b.bytes_host_pinned;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace frost::test
