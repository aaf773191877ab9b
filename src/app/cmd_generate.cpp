// Placeholder until the CPU model lands.
#include <cstdio>
#include "app/commands.h"
namespace ds {
int run_generate(int, char**) { std::fprintf(stderr, "dserve: not implemented yet\n"); return 1; }
}  // namespace ds
