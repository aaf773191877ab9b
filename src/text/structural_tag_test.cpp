// structural_tag specs: free text around structures opened by their triggers, each structure's schema enforced
// between its begin and end, and errors that name the field.
#include "text/structural_tag.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

using OJ = nlohmann::ordered_json;

TEST(StructuralTag, FreeTextAroundStructures) {
  const OJ spec = OJ::parse(R"({
    "structures": [
      {"begin": "<function=get_weather>", "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                                     "required": ["city"]}, "end": "</function>"},
      {"begin": "<function=get_time>", "schema": {"type": "object", "properties": {"utc": {"type": "boolean"}},
                                                  "required": ["utc"]}, "end": "</function>"},
      {"begin": "[[note]]", "end": "[[/note]]"}
    ],
    "triggers": ["<function=", "[["]})");
  auto dfa = structural_tag_dfa(spec);
  ASSERT_TRUE(dfa.is_ok()) << dfa.status().message();
  for (const char* ok : {"", "plain text, no calls", "a < b and [x] and <func",
                         "Let me look. <function=get_weather>{\"city\":\"Paris\"}</function> Done.",
                         "<function=get_time>{\"utc\":true}</function><function=get_weather>{\"city\":\"\"}</function>",
                         "x[[note]]{\"any\":[1,2]}[[/note]]y", "[[note]]null[[/note]]"})
    EXPECT_TRUE(dfa->matches(ok)) << ok;
  for (const char* bad : {"<function=", "<function=get_weather>{\"city\":\"Paris\"}",  // ends inside a structure
                          "<function=get_weather>{\"town\":\"Paris\"}</function>",    // the schema's property
                          "<function=get_date>{}</function>",                          // no such structure
                          "<function=get_time>{\"utc\":1}</function>", "[[other]]", "a [[ b"})
    EXPECT_FALSE(dfa->matches(bad)) << bad;
}

TEST(StructuralTag, BadSpecsNameTheField) {
  const std::pair<const char*, const char*> bad[] = {
      {R"([])", "an object"},
      {R"({"triggers": ["<"]})", "structures"},
      {R"({"structures": [{"begin": "<a>", "end": "</a>"}]})", "triggers"},
      {R"({"structures": [{"begin": "<a>", "end": "</a>"}], "triggers": [""]})", "triggers[0]"},
      {R"({"structures": [{"begin": "<a>", "end": "</a>"}], "triggers": [3]})", "triggers[0]"},
      {R"({"structures": [{"end": "</a>"}], "triggers": ["<"]})", "structures[0].begin"},
      {R"({"structures": [{"begin": "<a>", "end": 1}], "triggers": ["<"]})", "structures[0].end"},
      {R"({"structures": [{"begin": "<a>", "end": "</a>"}, {"begin": "(b", "end": "]"}], "triggers": ["<"]})",
       "structures[1].begin '(b' contains no trigger"},
      {R"({"structures": [{"begin": "x<a>", "end": "</a>"}], "triggers": ["<a"]})", "would open a structure inside it"},
      {R"({"structures": [{"begin": "<a>", "end": "</a>"}], "triggers": ["<", "{"]})", "triggers[1] '{' opens no structure"},
      {R"({"structures": [{"begin": "<a>", "schema": {"type": "tuple"}, "end": "</a>"}], "triggers": ["<"]})",
       "structures[0].schema"},
      {R"({"structures": [{"begin": "<a>", "schema": 5, "end": "</a>"}], "triggers": ["<"]})", "structures[0].schema"},
  };
  for (const auto& [spec, want] : bad) {
    auto r = structural_tag_dfa(OJ::parse(spec));
    ASSERT_FALSE(r.is_ok()) << spec;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << spec << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace ds
