// Loading and validating tokenizer.json. Everything a hostile file could use against us (T08:
// deep nesting, huge strings, duplicate or out-of-range ids, merges naming unknown tokens, bad
// byte tokens, an unknown pre-tokenizer regex) is refused here with a message naming the rule,
// so encode/decode can trust their tables. nlohmann::json exceptions never leave this file.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exec/error.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace frost::text {

using nlohmann::json;

namespace {

// Nesting depth of JSON text, scanned before parsing so a 10^5-deep document is refused in O(n)
// without building it.
int json_depth(std::string_view text) {
    int depth = 0, max_depth = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
        else if (c == ']' || c == '}') --depth;
    }
    return max_depth;
}

std::string dump_short(const json& j) {
    std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
    constexpr size_t kShown = 80;
    return s.size() > kShown ? s.substr(0, kShown) + "..." : s;
}

bool get_bool(const json& obj, const char* key, bool fallback) {
    auto it = obj.find(key);
    return (it != obj.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

}  // namespace

struct TokenizerLoader {
    std::string origin;
    Tokenizer* t;

    frost_status corrupt(const std::string& what) {
        return fail(FROST_ERR_CORRUPT, "%s: %s", origin.c_str(), what.c_str());
    }
    frost_status unsupported(const std::string& what) {
        return fail(FROST_ERR_UNSUPPORTED, "%s: %s", origin.c_str(), what.c_str());
    }

    frost_status check_normalizer(const json& n) {
        if (n.is_null()) return FROST_OK;
        if (!n.is_object() || !n.contains("type")) return corrupt("normalizer is not an object with a type");
        const json& type = n["type"];
        if (type == "NFC") { t->has_nfc_ = true; return FROST_OK; }
        if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
            for (const json& sub : n["normalizers"]) FROST_TRY(check_normalizer(sub));
            return FROST_OK;
        }
        return unsupported("normalizer " + dump_short(type) + " is not supported (only NFC)");
    }

    frost_status check_pre_tokenizer(const json& p) {
        // Supported: Sequence[Split(<known Qwen regex>, Isolated), ByteLevel(use_regex=false)].
        const char* expected = "pre_tokenizer must be Sequence[Split(Qwen regex, Isolated), ByteLevel(use_regex=false)]";
        if (!p.is_object() || p.value("type", json()) != "Sequence") return unsupported(expected);
        const json& seq = p.value("pretokenizers", json());
        if (!seq.is_array() || seq.size() != 2) return unsupported(expected);
        const json& split = seq[0];
        const json& bl = seq[1];
        if (!split.is_object() || split.value("type", json()) != "Split") return unsupported(expected);
        if (!bl.is_object() || bl.value("type", json()) != "ByteLevel") return unsupported(expected);
        if (get_bool(bl, "use_regex", true) || get_bool(bl, "add_prefix_space", false))
            return unsupported("ByteLevel pre-tokenizer with use_regex or add_prefix_space is not supported");
        if (split.value("behavior", json()) != "Isolated" || get_bool(split, "invert", false))
            return unsupported("Split pre-tokenizer must have behavior Isolated and invert false");
        const json& pattern = split.value("pattern", json());
        if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string())
            return unsupported("Split pattern must be {\"Regex\": ...}");
        const std::string re = pattern["Regex"].get<std::string>();
        if (!split_pattern_from_regex(re, &t->pattern_))
            return unsupported("Split regex " + dump_short(pattern["Regex"]) +
                               " is not one of the known Qwen2/Qwen3 or Qwen3.5 patterns");
        return FROST_OK;
    }

    frost_status check_model_flags(const json& m) {
        if (m.value("type", json("BPE")) != "BPE") return unsupported("model.type must be BPE");
        if (get_bool(m, "byte_fallback", false))
            return unsupported("model.byte_fallback (<0xNN> byte tokens) is not supported; byte-level BPE only");
        if (m.contains("dropout") && !m["dropout"].is_null() && !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0))
            return unsupported("model.dropout must be null");
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
            if (m.contains(key) && !m[key].is_null() && !(m[key].is_string() && m[key].get<std::string>().empty()))
                return unsupported(std::string("model.") + key + " must be empty");
        }
        t->ignore_merges_ = get_bool(m, "ignore_merges", false);
        return FROST_OK;
    }

    frost_status set_token(int32_t id, const std::string& token) {
        if (id < 0 || id > kMaxTokenId)
            return corrupt("token id " + std::to_string(id) + " out of range [0, " + std::to_string(kMaxTokenId) + "]");
        const auto idx = static_cast<size_t>(id);
        if (idx >= t->id_to_token_.size()) {
            t->id_to_token_.resize(idx + 1);
            t->id_present_.resize(idx + 1, 0);
        }
        if (t->id_present_[idx] && t->id_to_token_[idx] != token)
            return corrupt("duplicate id " + std::to_string(id) + " for tokens " + dump_short(json(t->id_to_token_[idx])) +
                           " and " + dump_short(json(token)));
        t->id_to_token_[idx] = token;
        t->id_present_[idx] = 1;
        return FROST_OK;
    }

    frost_status load_vocab(const json& vocab) {
        if (!vocab.is_object()) return corrupt("model.vocab must be an object");
        t->vocab_.reserve(vocab.size());
        for (auto it = vocab.begin(); it != vocab.end(); ++it) {
            if (!it.value().is_number_integer())
                return corrupt("vocab id of " + dump_short(json(it.key())) + " is not an integer");
            if (it.key().empty() || it.key().size() > kMaxTokenBytes)
                return corrupt("vocab token of length " + std::to_string(it.key().size()) + " (must be 1.." +
                               std::to_string(kMaxTokenBytes) + " bytes)");
            const int64_t id = it.value().get<int64_t>();
            if (id < 0 || id > kMaxTokenId) return corrupt("vocab id " + std::to_string(id) + " out of range");
            FROST_TRY(set_token(static_cast<int32_t>(id), it.key()));
            t->vocab_.emplace(it.key(), static_cast<int32_t>(id));
        }
        // Byte-level BPE needs every one of the 256 byte characters as a token.
        for (int b = 0; b < 256; ++b) {
            std::string ch;
            utf8_append(ch, byte_level_char(static_cast<uint8_t>(b)));
            auto it = t->vocab_.find(ch);
            if (it == t->vocab_.end())
                return corrupt("vocab lacks the byte-level token for byte 0x" + std::to_string(b) + " (" + ch + ")");
            t->byte_to_id_[b] = it->second;
        }
        return FROST_OK;
    }

    frost_status load_merges(const json& merges) {
        if (!merges.is_array()) return corrupt("model.merges must be an array");
        t->merges_.reserve(merges.size());
        int32_t rank = 0;
        for (const json& m : merges) {
            std::string a, b;
            if (m.is_string()) {
                const std::string s = m.get<std::string>();
                const size_t sp = s.find(' ');
                if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
                    return corrupt("merge " + std::to_string(rank) + " " + dump_short(m) + " is not \"a b\"");
                a = s.substr(0, sp);
                b = s.substr(sp + 1);
            } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                a = m[0].get<std::string>();
                b = m[1].get<std::string>();
            } else {
                return corrupt("merge " + std::to_string(rank) + " " + dump_short(m) + " is neither \"a b\" nor [a, b]");
            }
            auto ia = t->vocab_.find(a), ib = t->vocab_.find(b), ic = t->vocab_.find(a + b);
            if (ia == t->vocab_.end() || ib == t->vocab_.end())
                return corrupt("merge " + std::to_string(rank) + " " + dump_short(m) + " names a token not in the vocab");
            if (ic == t->vocab_.end())
                return corrupt("merge " + std::to_string(rank) + " " + dump_short(m) + " produces a token not in the vocab");
            // A repeated pair keeps its first (best) rank.
            t->merges_.emplace(Tokenizer::pair_key(ia->second, ib->second), Tokenizer::Merge{rank, ic->second});
            ++rank;
        }
        return FROST_OK;
    }

    frost_status load_added(const json& added) {
        if (added.is_null()) return FROST_OK;
        if (!added.is_array()) return corrupt("added_tokens must be an array");
        for (const json& a : added) {
            if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
                !a["content"].is_string())
                return corrupt("added token " + dump_short(a) + " lacks an integer id or a string content");
            AddedToken tok;
            const int64_t id = a["id"].get<int64_t>();
            if (id < 0 || id > kMaxTokenId) return corrupt("added token id " + std::to_string(id) + " out of range");
            tok.id = static_cast<int32_t>(id);
            tok.content = a["content"].get<std::string>();
            if (tok.content.empty() || tok.content.size() > kMaxTokenBytes)
                return corrupt("added token " + std::to_string(id) + " has empty or oversized content");
            if (!utf8_valid(tok.content)) return corrupt("added token " + std::to_string(id) + " is not valid UTF-8");
            tok.special = get_bool(a, "special", false);
            tok.lstrip = get_bool(a, "lstrip", false);
            tok.rstrip = get_bool(a, "rstrip", false);
            tok.single_word = get_bool(a, "single_word", false);
            tok.normalized = get_bool(a, "normalized", !tok.special);
            auto in_vocab = t->vocab_.find(tok.content);
            if (in_vocab != t->vocab_.end() && in_vocab->second != tok.id)
                return corrupt("added token " + dump_short(json(tok.content)) + " has id " + std::to_string(id) +
                               " but the vocab gives it " + std::to_string(in_vocab->second));
            for (const AddedToken& other : t->added_) {
                if (other.id == tok.id) return corrupt("duplicate added token id " + std::to_string(id));
                if (other.content == tok.content) return corrupt("duplicate added token " + dump_short(json(tok.content)));
            }
            FROST_TRY(set_token(tok.id, tok.content));
            t->added_.push_back(std::move(tok));
        }
        return FROST_OK;
    }

    void build_tables() {
        const size_t n = t->id_to_token_.size();
        t->id_bytes_.assign(n, std::string());
        t->id_special_.assign(n, 0);
        for (size_t id = 0; id < n; ++id) {
            if (!t->id_present_[id]) continue;
            // ByteLevel decoder: a token made only of byte-level characters stands for those bytes;
            // any other token (an added token with other characters) stands for its own UTF-8.
            const std::string& tok = t->id_to_token_[id];
            std::string bytes;
            bool all_mapped = true;
            for (uint32_t cp : utf8_decode(tok)) {
                const int b = byte_level_byte(cp);
                if (b < 0) { all_mapped = false; break; }
                bytes.push_back(static_cast<char>(b));
            }
            t->id_bytes_[id] = all_mapped ? bytes : tok;
            // An upper bound on what one BPE token covers (added tokens count too: only looser).
            t->max_token_bytes_ = std::max(t->max_token_bytes_, t->id_bytes_[id].size());
        }
        for (int pass = 0; pass < 2; ++pass) t->added_by_first_byte_[pass].assign(256, {});
        std::vector<int32_t> order(t->added_.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
        // Longest first, so the first hit at a position is the leftmost-longest match.
        std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
            return t->added_[static_cast<size_t>(x)].content.size() > t->added_[static_cast<size_t>(y)].content.size();
        });
        for (int32_t i : order) {
            const AddedToken& a = t->added_[static_cast<size_t>(i)];
            if (a.special) t->id_special_[static_cast<size_t>(a.id)] = 1;
            t->added_by_first_byte_[a.normalized ? 1 : 0][static_cast<unsigned char>(a.content[0])].push_back(i);
        }
    }

    frost_status run(std::string_view text) {
        if (text.size() > kMaxTokenizerFileBytes)
            return corrupt("file is " + std::to_string(text.size()) + " bytes, over the " +
                           std::to_string(kMaxTokenizerFileBytes) + "-byte limit");
        const int depth = json_depth(text);
        if (depth > kMaxTokenizerJsonDepth)
            return corrupt("JSON nests " + std::to_string(depth) + " deep, over the limit of " +
                           std::to_string(kMaxTokenizerJsonDepth));
        json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
        if (root.is_discarded()) return corrupt("not valid JSON");
        if (!root.is_object()) return corrupt("top level is not a JSON object");
        if (!root.contains("model") || !root["model"].is_object()) return corrupt("missing \"model\" object");
        const json& model = root["model"];
        FROST_TRY(check_model_flags(model));
        FROST_TRY(check_normalizer(root.value("normalizer", json())));
        FROST_TRY(check_pre_tokenizer(root.value("pre_tokenizer", json())));
        const json& dec = root.value("decoder", json());
        if (!dec.is_null() && !(dec.is_object() && dec.value("type", json()) == "ByteLevel"))
            return unsupported("decoder must be ByteLevel");
        const json& post = root.value("post_processor", json());
        if (!post.is_null() && !(post.is_object() && post.value("type", json()) == "ByteLevel"))
            return unsupported("post_processor must be null or ByteLevel (no BOS/EOS templates)");
        if (!model.contains("vocab") || !model.contains("merges")) return corrupt("model lacks vocab or merges");
        FROST_TRY(load_vocab(model["vocab"]));
        FROST_TRY(load_merges(model["merges"]));
        FROST_TRY(load_added(root.value("added_tokens", json())));
        build_tables();
        return FROST_OK;
    }
};

frost_status Tokenizer::load_json(std::string_view json_text, const std::string& origin,
                                  std::unique_ptr<Tokenizer>* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "Tokenizer::load_json: out is null");
    out->reset();
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    TokenizerLoader loader{origin, t.get()};
    frost_status s;
    try {
        s = loader.run(json_text);
    } catch (const std::bad_alloc&) {
        return fail(FROST_ERR_OUT_OF_MEMORY, "%s: out of memory while loading", origin.c_str());
    } catch (const std::exception& e) {
        return fail(FROST_ERR_CORRUPT, "%s: %s", origin.c_str(), e.what());
    }
    if (s == FROST_OK) *out = std::move(t);
    return s;
}

frost_status Tokenizer::load(const std::string& path, std::unique_ptr<Tokenizer>* out) {
    if (!out) return fail(FROST_ERR_INVALID_ARG, "Tokenizer::load: out is null");
    out->reset();
    std::error_code ec;
    std::filesystem::path p(path);
    if (std::filesystem::is_directory(p, ec)) p /= "tokenizer.json";
    const std::string file = p.string();
    const auto size = std::filesystem::file_size(p, ec);
    if (ec) return fail(FROST_ERR_IO, "%s: cannot stat: %s", file.c_str(), ec.message().c_str());
    if (size > kMaxTokenizerFileBytes)
        return fail(FROST_ERR_CORRUPT, "%s: file is %llu bytes, over the %zu-byte limit", file.c_str(),
                    static_cast<unsigned long long>(size), kMaxTokenizerFileBytes);
    if (frost_fault_hit(FROST_FAULT_IO)) return fail(FROST_ERR_IO, "%s: read failed (injected)", file.c_str());
    std::ifstream in(p, std::ios::binary);
    if (!in) return fail(FROST_ERR_IO, "%s: cannot open", file.c_str());
    std::string text;
    text.resize(static_cast<size_t>(size));
    if (size && !in.read(text.data(), static_cast<std::streamsize>(size)))
        return fail(FROST_ERR_IO, "%s: read failed", file.c_str());
    return load_json(text, file, out);
}

}  // namespace frost::text
