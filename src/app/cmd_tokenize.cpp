// `dserve tokenize` and `dserve detokenize`: the tokenizer of a checkpoint directory on JSON from
// stdin. tokenize reads a list of strings and prints a list of id lists; detokenize the reverse.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/flags.h"
#include "text/tokenizer.h"

namespace ds {
namespace {

int fail(const char* cmd, const Status& st) {
  std::fprintf(stderr, "dserve %s: %s\n", cmd, st.message().c_str());
  return 1;
}

Result<nlohmann::json> read_stdin_json() {
  std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return error("stdin is not valid JSON (UTF-8)");
  return j;
}

// Parses the common flags; returns the exit code to use (-1: go on).
int parse_flags(Flags& flags, const char* cmd, const char* bool_flag, const char* bool_help, int argc,
                char** argv) {
  flags.add_string("tokenizer-path", "", "directory with tokenizer.json (and tokenizer_config.json)");
  flags.add_bool(bool_flag, bool_help);
  flags.add_bool("help", "show flags");
  if (Status st = flags.parse(argc, argv); !st) return fail(cmd, st);
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage(cmd).c_str());
    return 0;
  }
  if (flags.get_string("tokenizer-path").empty()) return fail(cmd, error("--tokenizer-path is required"));
  return -1;
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  const char* cmd = "tokenize";
  Flags flags;
  if (int rc = parse_flags(flags, cmd, "add-special-tokens",
                           "apply the post-processor (BOS per tokenizer_config.json)", argc, argv);
      rc >= 0)
    return rc;
  auto tok = Tokenizer::load(flags.get_string("tokenizer-path"));
  if (!tok) return fail(cmd, tok.status());
  auto in = read_stdin_json();
  if (!in) return fail(cmd, in.status());
  if (!in->is_array()) return fail(cmd, error("stdin must be a JSON list of strings"));
  const bool add_special = flags.get_bool("add-special-tokens");
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < in->size(); ++i) {
    const auto& s = (*in)[i];
    if (!s.is_string()) return fail(cmd, error("stdin item ", i, " is not a string"));
    auto ids = tok->encode(s.get_ref<const std::string&>(), add_special);
    if (!ids) return fail(cmd, error("stdin item ", i, ": ", ids.status().message()));
    out.push_back(std::move(ids).value());
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int run_detokenize(int argc, char** argv) {
  const char* cmd = "detokenize";
  Flags flags;
  if (int rc = parse_flags(flags, cmd, "skip-special-tokens", "drop special tokens (BOS, EOS, ...)", argc, argv);
      rc >= 0)
    return rc;
  auto tok = Tokenizer::load(flags.get_string("tokenizer-path"));
  if (!tok) return fail(cmd, tok.status());
  auto in = read_stdin_json();
  if (!in) return fail(cmd, in.status());
  if (!in->is_array()) return fail(cmd, error("stdin must be a JSON list of id lists"));
  const bool skip = flags.get_bool("skip-special-tokens");
  nlohmann::json out = nlohmann::json::array();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < in->size(); ++i) {
    const auto& list = (*in)[i];
    if (!list.is_array()) return fail(cmd, error("stdin item ", i, " is not a list of ids"));
    ids.clear();
    for (const auto& v : list) {
      if (!v.is_number_integer()) return fail(cmd, error("stdin item ", i, ": ", v.dump(), " is not an integer id"));
      int64_t id = v.get<int64_t>();
      if (id < 0 || id >= tok->vocab_size() || !tok->has_id(static_cast<int32_t>(id)))
        return fail(cmd, error("stdin item ", i, ": id ", id, " is out of range (vocabulary size ", tok->vocab_size(), ")"));
      ids.push_back(static_cast<int32_t>(id));
    }
    out.push_back(tok->decode(ids, skip));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace ds
