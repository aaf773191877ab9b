// SGLang's structural_tag constraint (response_format {"type": "structural_tag", "structures": [{"begin", "schema",
// "end"}, ...], "triggers": [...]}): free text in which each trigger opens one of the structures whose begin starts
// with it - the rest of that begin, a JSON value of its schema, its end - after which free text resumes. The text may
// end in free text only. For ByteDfa::compile_triggered.
#pragma once
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "text/regex_dfa.h"

namespace ds {

// Errors name the field (structures[i].begin, triggers[k], ...): a missing or mistyped one, a begin that its first
// trigger to end would open somewhere other than at its start, a trigger that opens no structure, a schema that
// json_schema_to_regex refuses, or an automaton past max_states.
Result<ByteDfa> structural_tag_dfa(const nlohmann::ordered_json& spec, int max_states = 20000);

}  // namespace ds
