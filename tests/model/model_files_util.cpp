// Implementation of model_files_util.h (see there). Uses nlohmann::json to build headers so the
// tests never depend on the reader under test to construct their inputs.
#include "model/model_files_util.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "model/synth.h"

namespace frost::testing {

std::string header_for(const std::vector<RawTensor>& tensors, size_t pad_to) {
    nlohmann::json h = nlohmann::json::object();
    h["__metadata__"] = {{"format", "pt"}};
    uint64_t off = 0;
    for (const auto& t : tensors) {
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.data.size()}}};
        off += t.data.size();
    }
    std::string s = h.dump();
    if (pad_to > 1) s.append((pad_to - s.size() % pad_to) % pad_to, ' ');
    return s;
}

std::string safetensors_bytes(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char(n >> (8 * i));
    return out + header + data;
}

std::string safetensors_bytes(const std::vector<RawTensor>& tensors) {
    std::string data;
    for (const auto& t : tensors) data += t.data;
    return safetensors_bytes(header_for(tensors), data);
}

std::string random_bytes(size_t n) {
    static std::mt19937_64 rng(std::random_device{}());
    std::string s(n, '\0');
    for (auto& c : s) c = char(rng());
    return s;
}

// Temp folders made by a test process are removed when it exits (set FROST_KEEP_TEMP to keep).
std::vector<std::string>& temp_dirs() {
    static std::vector<std::string> dirs;
    return dirs;
}

void remove_temp_dirs() {
    if (std::getenv("FROST_KEEP_TEMP")) return;
    std::error_code ec;
    for (const auto& d : temp_dirs()) std::filesystem::remove_all(d, ec);
}

std::string make_temp_dir(const std::string& tag) {
    std::string tmpl = "/tmp/frost_" + tag + "_XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    if (temp_dirs().empty()) std::atexit(remove_temp_dirs);
    temp_dirs().push_back(tmpl);
    return tmpl;
}

std::string synth_temp(const std::string& tag, const std::string& preset, const std::string& quant, uint64_t seed) {
    model::SynthOptions o;
    o.out_dir = make_temp_dir(tag);
    o.preset = preset;
    o.seed = seed;
    o.quant = quant;
    if (model::synth_checkpoint(o) != FROST_OK)
        throw std::runtime_error("synth " + preset + " --quant '" + quant + "': " + frost_last_error());
    return o.out_dir;
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
}

std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void copy_config(const std::string& src_dir, const std::string& dst_dir) {
    write_bytes(dst_dir + "/config.json", read_bytes(src_dir + "/config.json"));
    std::ifstream g(src_dir + "/generation_config.json");
    if (g) write_bytes(dst_dir + "/generation_config.json", read_bytes(src_dir + "/generation_config.json"));
}

std::vector<RawTensor> read_tensors(const std::string& path) {
    std::string bytes = read_bytes(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
    auto h = nlohmann::json::parse(bytes.substr(8, n));
    std::vector<RawTensor> out;
    for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        RawTensor t;
        t.name = it.key();
        t.dtype = (*it)["dtype"];
        t.shape = (*it)["shape"].get<std::vector<int64_t>>();
        uint64_t b = (*it)["data_offsets"][0], e = (*it)["data_offsets"][1];
        t.data = bytes.substr(8 + n + b, e - b);
        out.push_back(std::move(t));
    }
    return out;
}

std::string fixture_dir(const std::string& name) { return std::string(FROST_FIXTURES_DIR) + "/" + name; }

}  // namespace frost::testing
