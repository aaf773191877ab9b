// dserve entry point: dispatches to the subcommands of app/commands.cpp.
#include <cstdio>
#include <cstring>

#include "app/commands.h"

int main(int argc, char** argv) {
  int n = 0;
  const ds::Command* cmds = ds::commands(&n);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("usage: dserve <command> [flags]   (dserve <command> --help for its flags)\n\ncommands:\n");
    for (int i = 0; i < n; ++i) std::printf("  %-16s %s\n", cmds[i].name, cmds[i].summary);
    return argc < 2 ? 1 : 0;
  }
  for (int i = 0; i < n; ++i)
    if (!std::strcmp(argv[1], cmds[i].name)) return cmds[i].run(argc - 1, argv + 1);
  std::fprintf(stderr, "dserve: unknown command '%s' (see dserve --help)\n", argv[1]);
  return 1;
}
