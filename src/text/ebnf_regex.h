// EBNF grammar -> a regular expression of the texts it admits (SGLang's `ebnf` sampling parameter, xgrammar's GBNF
// dialect), for ByteDfa. Rules `name ::= body` (the grammar starts at `root`), bodies of "strings" (escapes \n \t \r
// \\ \" \xHH \uHHHH \UHHHHHHHH), character classes [a-z] [^...], rule names, ( ) groups, | alternation and the
// quantifiers * + ? {m} {m,} {m,n}; `#` comments. A recursive rule is unrolled: it may appear at most
// max_recursion times inside itself (deeper nesting is never generated, as json_schema's untyped values nest at most
// two levels), so every text the regex admits is in the grammar's language.
#pragma once
#include <string>
#include <string_view>

#include "core/status.h"

namespace ds {

// An error names the problem with its line (syntax, an undefined or duplicate rule, no root, a grammar whose
// unrolled form exceeds max_regex_bytes, or one that admits no text within the recursion bound).
Result<std::string> ebnf_to_regex(std::string_view grammar, int max_recursion = 4, size_t max_regex_bytes = 1 << 20);

}  // namespace ds
