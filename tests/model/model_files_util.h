// Helpers for the model-files tests: build safetensors files byte by byte (valid or malformed),
// temp folders, and copies of fixture / synthetic checkpoints to mutate.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace frost::testing {

struct RawTensor {
    std::string name;
    std::string dtype = "BF16";
    std::vector<int64_t> shape;
    std::string data;  // raw bytes
};

// Header JSON for `tensors` laid out back to back in order, plus {"__metadata__":{"format":"pt"}}.
std::string header_for(const std::vector<RawTensor>& tensors, size_t pad_to = 8);
// u64 little-endian header length + header + data.
std::string safetensors_bytes(const std::string& header, const std::string& data);
std::string safetensors_bytes(const std::vector<RawTensor>& tensors);
std::string random_bytes(size_t n);

std::string make_temp_dir(const std::string& tag);
// `frost synth` of `preset` (quant: "" for bf16, or a --quant format) with `seed` into a fresh temp
// folder; throws (failing the test) with frost_last_error() if the synth fails.
std::string synth_temp(const std::string& tag, const std::string& preset, const std::string& quant, uint64_t seed);
void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);
// Copies a fixture/synthetic model folder's config.json (+ generation_config.json) into `dst`.
void copy_config(const std::string& src_dir, const std::string& dst_dir);
// Reads every tensor of a single-file checkpoint into RawTensors (header order).
std::vector<RawTensor> read_tensors(const std::string& safetensors_path);

std::string fixture_dir(const std::string& name);  // FROST_FIXTURES_DIR/<name> (tests/fixtures)

}  // namespace frost::testing
