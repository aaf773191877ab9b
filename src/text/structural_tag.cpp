// structural_tag specs to automata (structural_tag.h): each structure is grouped under the trigger that opens it, and
// each trigger's rest is the alternation of its structures' begin tails, schema values and ends.
#include "text/structural_tag.h"

#include <string>
#include <vector>

#include "text/json_schema_regex.h"

namespace ds {

Result<ByteDfa> structural_tag_dfa(const nlohmann::ordered_json& spec, int max_states) {
  if (!spec.is_object()) return error("structural_tag must be an object with 'structures' and 'triggers'");
  const auto st = spec.find("structures");
  const auto tr = spec.find("triggers");
  if (st == spec.end() || !st->is_array() || st->empty())
    return error("structural_tag.structures must be a non-empty list of {begin, schema, end}");
  if (tr == spec.end() || !tr->is_array() || tr->empty())
    return error("structural_tag.triggers must be a non-empty list of strings");
  std::vector<std::string> triggers;
  for (size_t k = 0; k < tr->size(); ++k) {
    const auto& t = (*tr)[k];
    if (!t.is_string() || t.get<std::string>().empty())
      return error("structural_tag.triggers[", k, "] must be a non-empty string");
    triggers.push_back(t.get<std::string>());
  }
  std::vector<std::vector<std::string>> rests(triggers.size());
  for (size_t i = 0; i < st->size(); ++i) {
    const auto& s = (*st)[i];
    const std::string at = "structural_tag.structures[" + std::to_string(i) + "]";
    if (!s.is_object()) return error(at, " must be an object with begin, schema and end");
    for (const char* key : {"begin", "end"})
      if (!s.contains(key) || !s[key].is_string()) return error(at, ".", key, " must be a string");
    const std::string begin = s["begin"].get<std::string>(), end = s["end"].get<std::string>();
    nlohmann::ordered_json schema = nlohmann::ordered_json::object();  // absent or null: any JSON value
    if (s.contains("schema") && !s["schema"].is_null()) {
      if (!s["schema"].is_object() && !s["schema"].is_boolean()) return error(at, ".schema must be a JSON schema object");
      schema = s["schema"];
    }
    // The trigger free text would take while reading begin: the first to end (the longest of those ending there).
    int pick = -1;
    size_t pick_end = 0;
    for (size_t e = 1; e <= begin.size() && pick < 0; ++e)
      for (size_t k = 0; k < triggers.size(); ++k) {
        const std::string& t = triggers[k];
        if (t.size() <= e && begin.compare(e - t.size(), t.size(), t) == 0 &&
            (pick < 0 || t.size() > triggers[static_cast<size_t>(pick)].size()))
          pick = static_cast<int>(k), pick_end = e;
      }
    if (pick < 0) return error(at, ".begin '", begin, "' contains no trigger (a structure opens at its trigger)");
    if (pick_end != triggers[static_cast<size_t>(pick)].size())
      return error(at, ".begin '", begin, "': trigger '", triggers[static_cast<size_t>(pick)],
                   "' would open a structure inside it, not at its start");
    auto value = json_schema_to_regex(schema);
    if (!value) return error(at, ".schema: ", value.status().message());
    rests[static_cast<size_t>(pick)].push_back(regex_escape(begin.substr(pick_end)) + "(?:" + *value + ")" +
                                               regex_escape(end));
  }
  std::vector<ByteDfa::Trigger> parts;
  for (size_t k = 0; k < triggers.size(); ++k) {
    if (rests[k].empty())
      return error("structural_tag.triggers[", k, "] '", triggers[k], "' opens no structure (no begin starts with it)");
    std::string alt;
    for (size_t j = 0; j < rests[k].size(); ++j) alt += (j ? "|" : "") + std::string("(?:") + rests[k][j] + ")";
    parts.push_back({triggers[k], alt});
  }
  auto dfa = ByteDfa::compile_triggered(parts, max_states);
  if (!dfa) return error("structural_tag: ", dfa.status().message());
  return dfa;
}

}  // namespace ds
