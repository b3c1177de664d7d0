// libFuzzer target for the safetensors header parser: any byte string is a candidate file. The
// parser must return a status (never crash, read out of bounds or allocate per the length field),
// and an accepted header must describe tensors that lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    frost::model::SafetensorsHeader h;
    if (frost::model::parse_safetensors_header(data, size, "fuzz", &h) != FROST_OK) return 0;
    uint64_t covered = h.data_offset;
    for (const auto& e : h.entries) {
        if (e.end < e.begin || h.data_offset + e.end > size) std::abort();  // accepted but out of bounds
        covered += e.end - e.begin;
    }
    if (covered != size) std::abort();  // tiling promise: tensors cover the data region exactly
    return 0;
}
