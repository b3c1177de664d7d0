// FakeEngine / FakeText implementation (see fake_backend.h). Test-only.
#include "serve/fake_backend.h"

#include "exec/error.h"
#include "text/tool_calls.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <utility>

namespace frost::serve::testing {

namespace {
constexpr char kImStart[] = "<|im_start|>";
constexpr char kImEnd[] = "<|im_end|>";
constexpr int kLetters = 26;
}  // namespace

frost_status FakeEngine::reset(int slot) {
    std::lock_guard<std::mutex> lock(mu_);
    slots_[size_t(slot)] = SlotState{};
    return FROST_OK;
}

frost_status FakeEngine::set_sampling(int slot, const Sampling& s) {
    // The real engine refuses these (model::Engine::set_sampling); so does the fake.
    if (s.top_k < 0 || !(s.top_p > 0.0f && s.top_p <= 1.0f)) return FROST_ERR_INVALID_ARG;
    std::lock_guard<std::mutex> lock(mu_);
    slots_[size_t(slot)].draws = 0;
    slots_[size_t(slot)].seed = s.seed;
    slots_[size_t(slot)].temperature = s.temperature;
    slots_[size_t(slot)].decoded = 0;
    slots_[size_t(slot)].top_logprobs = s.top_logprobs;
    return FROST_OK;
}

frost_status FakeEngine::last_logprobs(int slot, TokenLogprobs* out) {
    std::lock_guard<std::mutex> lock(mu_);
    const SlotState& s = slots_[size_t(slot)];
    if (s.top_logprobs < 0) return FROST_ERR_STATE;
    out->token = s.pending;
    out->logprob = -0.25f;
    out->top.clear();
    for (int i = 0; i < s.top_logprobs; ++i) out->top.emplace_back(int32_t('a' + i), -1.0f - float(i));
    return FROST_OK;
}

frost_status FakeEngine::prefill_scored(int slot, const int32_t* ids, size_t n, int top_n, int32_t* next,
                                        std::vector<TokenLogprobs>* out) {
    out->clear();
    for (size_t i = 1; i < n; ++i) {
        TokenLogprobs t;
        t.token = ids[i];
        t.logprob = -0.5f;
        for (int k = 0; k < top_n; ++k) t.top.emplace_back(int32_t('a' + k), -1.0f - float(k));
        out->push_back(std::move(t));
    }
    return prefill(slot, ids, n, next);
}

int32_t FakeEngine::sample(const SlotState& s) const {
    if (!script.empty()) return size_t(s.decoded) < script.size() ? script[size_t(s.decoded)] : kEndId;
    if (s.decoded >= end_after) return kEndId;
    uint64_t h = 1469598103934665603ull;
    for (int32_t id : s.committed) h = (h ^ uint64_t(uint32_t(id))) * 1099511628211ull;
    for (uint64_t m : s.marks) h = (h ^ (m + 0x5bd1e995u)) * 1099511628211ull;
    if (s.temperature > 0) h ^= (s.seed + 0x632BE59BD9B4E019ull * s.draws) * 0x9E3779B97F4A7C15ull;
    return int32_t('a' + (h >> 33) % kLetters);
}

void FakeEngine::mark_cut(SlotState& s) const {
    if (cut_grid > 0 && s.committed.size() % cut_grid != 0) s.marks.push_back(2 * uint64_t(s.committed.size()));
}

frost_status FakeEngine::prefill_slices_begin(int slot, const int32_t* ids, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    SlotState& s = slots_[size_t(slot)];
    if (slices == 0) return FROST_ERR_UNSUPPORTED;
    if (!s.staged.empty()) return FROST_ERR_STATE;
    if (n == 0 || n > slices) return FROST_ERR_INVALID_ARG;
    if (s.committed.size() + n > max_seq_) return FROST_ERR_OUT_OF_RANGE;
    s.staged.assign(ids, ids + n);
    s.layer = 0;
    return FROST_OK;
}

frost_status FakeEngine::prefill_slices_run(int slot, int layers, bool* done, int32_t* next) {
    *done = false;
    int run = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        SlotState& s = slots_[size_t(slot)];
        if (s.staged.empty() || layers < 1) return FROST_ERR_STATE;
        run = std::min(layers, fake_layers - s.layer);
    }
    if (layer_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(int64_t(layer_delay_us) * run));
    std::lock_guard<std::mutex> lock(mu_);
    SlotState& s = slots_[size_t(slot)];
    s.layer += run;
    const bool last = s.layer == fake_layers;
    calls_.push_back(Call{false, {slot}, last ? s.staged.size() : 0, run});
    if (!last) return FROST_OK;
    mark_cut(s);
    s.committed.insert(s.committed.end(), s.staged.begin(), s.staged.end());
    prefilled_tokens += s.staged.size();
    s.staged.clear();
    s.layer = 0;
    s.pending = sample(s);
    s.draws++;
    *next = s.pending;
    *done = true;
    return FROST_OK;
}

frost_status FakeEngine::prefill(int slot, const int32_t* ids, size_t n, int32_t* next) {
    if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms.load()));
    std::lock_guard<std::mutex> lock(mu_);
    SlotState& s = slots_[size_t(slot)];
    if (!s.staged.empty()) return FROST_ERR_STATE;
    if (s.committed.size() + n > max_seq_) return FROST_ERR_OUT_OF_RANGE;
    mark_cut(s);
    s.committed.insert(s.committed.end(), ids, ids + n);
    prefilled_tokens += n;
    calls_.push_back(Call{false, {slot}, n, 0});
    s.pending = sample(s);
    s.draws++;
    *next = s.pending;
    return FROST_OK;
}

frost_status FakeEngine::decode_batch(const int* slots, int n, int32_t* next) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        calls_.push_back(Call{true, std::vector<int>(slots, slots + n), 0, 0});
    }
    return EngineIface::decode_batch(slots, n, next);
}

std::vector<FakeEngine::Call> FakeEngine::calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
}

frost_status FakeEngine::decode(int slot, int32_t* next) {
    if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms.load()));
    std::lock_guard<std::mutex> lock(mu_);
    SlotState& s = slots_[size_t(slot)];
    if (s.pending < 0 || !s.staged.empty() || s.committed.size() + 1 > max_seq_) return FROST_ERR_STATE;
    if (cut_grid > 0) s.marks.push_back(2 * uint64_t(s.committed.size()) + 1);
    s.committed.push_back(s.pending);
    s.decoded++;
    s.pending = sample(s);
    s.draws++;
    *next = s.pending;
    return FROST_OK;
}

frost_status FakeEngine::snapshot(int slot, Tier tier, uint64_t* handle, uint64_t* bytes) {
    if (fail_snapshot) return fail(FROST_ERR_OUT_OF_MEMORY, "fake: no memory for a capsule on the %s tier", tier_name(tier));
    std::lock_guard<std::mutex> lock(mu_);
    *handle = next_handle_++;
    capsules_[*handle] = slots_[size_t(slot)].committed;
    capsule_marks_[*handle] = slots_[size_t(slot)].marks;
    *bytes = 1000 + 4 * slots_[size_t(slot)].committed.size();
    return FROST_OK;
}

frost_status FakeEngine::restore(uint64_t handle, int slot, size_t* at) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = capsules_.find(handle);
    if (it == capsules_.end() || fail_restore) return FROST_ERR_CORRUPT;
    slots_[size_t(slot)] = SlotState{};
    const size_t n = align > 0 ? it->second.size() / align * align : it->second.size();
    slots_[size_t(slot)].committed.assign(it->second.begin(), it->second.begin() + long(n));
    for (uint64_t m : capsule_marks_[handle])  // the marks of the state up to position n
        if (m / 2 < n) slots_[size_t(slot)].marks.push_back(m);
    *at = n;
    restores++;
    return FROST_OK;
}

frost_status FakeEngine::fork_live(int from, const std::vector<int>& to) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int t : to) {
        if (t == from) return FROST_ERR_INVALID_ARG;
        slots_[size_t(t)] = SlotState{};
        slots_[size_t(t)].committed = slots_[size_t(from)].committed;
        slots_[size_t(t)].marks = slots_[size_t(from)].marks;
    }
    forks++;
    return FROST_OK;
}

frost_status FakeEngine::move(uint64_t handle, Tier) {
    std::lock_guard<std::mutex> lock(mu_);
    return capsules_.count(handle) ? FROST_OK : FROST_ERR_NOT_FOUND;
}

frost_status FakeEngine::move_to_file(uint64_t* handle, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!files) return FROST_ERR_UNSUPPORTED;
    auto it = capsules_.find(*handle);
    if (it == capsules_.end()) return frost::fail(FROST_ERR_NOT_FOUND, "fake: no capsule %llu", (unsigned long long)*handle);
    const std::string tmp = path + ".frost-tmp.fake";
    {
        std::ofstream out(tmp);
        out << "FAKECAP " << it->second.size();
        for (int32_t t : it->second) out << ' ' << t;
        if (!out) return frost::fail(FROST_ERR_IO, "fake: cannot write %s", tmp.c_str());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return frost::fail(FROST_ERR_IO, "fake: cannot rename %s", tmp.c_str());
    }
    std::vector<int32_t> ids = std::move(it->second);
    std::vector<uint64_t> marks = std::move(capsule_marks_[*handle]);
    capsules_.erase(it);
    capsule_marks_.erase(*handle);
    *handle = next_handle_++;
    capsules_[*handle] = std::move(ids);
    capsule_marks_[*handle] = std::move(marks);
    return FROST_OK;
}

void FakeEngine::drop(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    capsules_.erase(handle);
    capsule_marks_.erase(handle);
}

EngineMemory FakeEngine::fake_memory() const {
    EngineMemory m;
    const uint64_t caps = live_capsules();
    m.buffer_bytes[0] = 1000000 + 4096 * caps;  // device: "weights and state", then each capsule
    m.buffer_bytes[1] = 65536;
    m.buffer_bytes[2] = 512;
    m.live_buffers = 7 + caps;
    m.live_graphs = 2;
    m.has_device = memory_view.load() == 2;
    if (m.has_device) {
        m.device_used = 3 * m.buffer_bytes[0];
        m.device_total = uint64_t(80) << 30;
    }
    return m;
}

bool FakeEngine::memory(EngineMemory* out) const {
    if (memory_view.load() == 0) return false;
    *out = fake_memory();
    return true;
}

size_t FakeEngine::live_capsules() const {
    std::lock_guard<std::mutex> lock(mu_);
    return capsules_.size();
}

frost_status FakeText::render_chat(const ChatRender& r, std::string* out) const {
    std::string s;
    for (const auto& m : r.messages) {
        s += kImStart;
        s += m["role"].get<std::string>() + "\n";
        if (m.contains("content") && m["content"].is_string()) s += m["content"].get<std::string>();
        s += kImEnd;
        s += "\n";
    }
    if (r.add_generation_prompt) s += std::string(kImStart) + "assistant\n";
    *out = s;
    return FROST_OK;
}

bool FakeText::split_safe(std::string_view left, std::string_view right) const {
    static const std::vector<SplitToken> kTokens = {SplitToken{kImStart}, SplitToken{kImEnd}};
    return split_is_safe(left, right, kTokens);
}

std::vector<int32_t> FakeText::encode(std::string_view text) const {
    encoded_bytes += text.size();
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size();) {
        if (text.compare(i, sizeof(kImStart) - 1, kImStart) == 0) {
            ids.push_back(kStartId);
            i += sizeof(kImStart) - 1;
        } else if (text.compare(i, sizeof(kImEnd) - 1, kImEnd) == 0) {
            ids.push_back(kEndId);
            i += sizeof(kImEnd) - 1;
        } else {
            ids.push_back(int32_t(static_cast<unsigned char>(text[i])));
            ++i;
        }
    }
    return ids;
}

namespace {
class ByteDetok : public Detokenizer {
public:
    explicit ByteDetok(bool lag) : lag_(lag) {}
    std::string push(int32_t id) override {
        std::string b = id < 256 ? std::string(1, char(id)) : std::string();
        if (lag_) std::swap(b, held_);
        return b;
    }
    std::string flush() override { return std::exchange(held_, std::string()); }

private:
    bool lag_;
    std::string held_;  // lag: the last token's byte, released by the next push or the flush
};
}  // namespace

std::unique_ptr<Detokenizer> FakeText::detokenizer() const { return std::make_unique<ByteDetok>(lagging_detok); }

// The real Qwen tool-call parser (text layer): tool-call tests over the fake engine then check
// the server's plumbing (tools reach the parser, ids) with the parser the product uses.
ParsedOutput FakeText::parse_output(const std::string& text, const nlohmann::json& tools) const {
    ParsedOutput p;
    const auto otools = tools.is_array() ? nlohmann::ordered_json::parse(tools.dump()) : nlohmann::ordered_json(nullptr);
    const text::ParsedAssistant a = text::parse_tool_calls(text, otools);
    p.content = a.content;
    p.tool_calls = nlohmann::json::parse(a.tool_calls.dump());
    return p;
}

}  // namespace frost::serve::testing
