// Subcommand registry: one line per subcommand.
#include "app/commands.h"

namespace ds {

const Command* commands(int* count) {
  static const Command kCommands[] = {
      {"score", "teacher-forced log-probabilities of a token sequence", run_score},
      {"generate", "greedy/sampled continuation of a token sequence", run_generate},
  };
  *count = sizeof(kCommands) / sizeof(kCommands[0]);
  return kCommands;
}

}  // namespace ds
