// libFuzzer target for the tokenizer.json loader (reliability T08): any byte string is a candidate
// file. Loading must return a status and never crash; an accepted tokenizer must then encode
// (fixed probes and the input itself) to ids it knows, and decode to valid UTF-8, identically
// whether decoded at once or streamed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "text/tokenizer.h"
#include "text/unicode.h"

namespace {

constexpr size_t kMaxProbeBytes = 4096;  // keep each run fast

void check_text(const frost::text::Tokenizer& tok, std::string_view text) {
    const std::vector<int32_t> ids = tok.encode(text);
    for (int32_t id : ids)
        if (!tok.has_id(id)) std::abort();  // encode produced an id the tokenizer does not have
    const std::string once = tok.decode(ids);
    if (!frost::text::utf8_valid(once)) std::abort();
    frost::text::DecodeStream ds(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += ds.push(id);
    streamed += ds.flush();
    if (streamed != once) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view doc(reinterpret_cast<const char*>(data), size);
    std::unique_ptr<frost::text::Tokenizer> tok;
    if (frost::text::Tokenizer::load_json(doc, "fuzz", &tok) != FROST_OK) return 0;
    if (!tok) std::abort();
    check_text(*tok, "Hello world, it's 2024!\r\n  caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80");
    check_text(*tok, doc.substr(0, kMaxProbeBytes));
    return 0;
}
