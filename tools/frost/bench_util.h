// Helpers shared by the `frost bench` kinds that run an Engine: the synthetic checkpoint a run
// without --model writes, and the device copy ceiling of the engine's backend, measured in the run.
#pragma once
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/engine.h"
#include "model/synth.h"

namespace frost::cli {

// "a,b,c" -> {"a", "b", "c"}; empty items dropped.
inline std::vector<std::string> split_list(const std::string& v) {
    std::vector<std::string> out;
    for (size_t b = 0; b <= v.size();) {
        const size_t e = std::min(v.find(',', b), v.size());
        if (e > b) out.push_back(v.substr(b, e - b));
        b = e + 1;
    }
    return out;
}

// Without --model (`model` empty): the checkpoint of `preset` at OUT_DIR/model-PRESET, written by
// `frost synth` unless a previous run left it there; `model` becomes its folder.
inline frost_status model_from_preset(std::string* model, const std::string& preset, const std::string& out_dir) {
    if (!model->empty()) return FROST_OK;
    *model = out_dir + "/model-" + preset;
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (std::filesystem::exists(*model + "/config.json")) return FROST_OK;
    model::SynthOptions so;
    so.out_dir = *model;
    so.preset = preset;
    return model::synth_checkpoint(so);
}

// Device-to-device copy bandwidth of this engine's backend (GB/s, read + write), median of 5 after a
// warm-up; 0 when its buffers cannot be had.
inline double copy_ceiling(model::Engine& e, size_t bytes) {
    using Clock = std::chrono::steady_clock;
    frost_buffer *a = nullptr, *b = nullptr;
    frost_stream* st = e.stream();
    double gbps = 0;
    if (frost_buffer_alloc(e.ctx(), "bench.a", bytes, FROST_SPACE_DEVICE, &a) == FROST_OK &&
        frost_buffer_alloc(e.ctx(), "bench.b", bytes, FROST_SPACE_DEVICE, &b) == FROST_OK &&
        frost_buffer_fill(a, 0, 1, bytes, st) == FROST_OK && frost_stream_sync(st) == FROST_OK) {
        std::vector<double> ms;
        for (int i = 0; i <= 5; ++i) {
            const auto t0 = Clock::now();
            if (frost_buffer_copy(b, 0, a, 0, bytes, st) != FROST_OK || frost_stream_sync(st) != FROST_OK) break;
            if (i) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        // A copy reads and writes every byte: 2 x bytes cross the memory bus (counting one side
        // halved the ceiling and made every floor twice too long).
        if (!ms.empty() && ms[ms.size() / 2] > 0) gbps = 2.0 * double(bytes) / 1e9 / (ms[ms.size() / 2] / 1e3);
    }
    frost_buffer_free(a);
    frost_buffer_free(b);
    return gbps;
}

}  // namespace frost::cli
