// Subcommand registry: one line per subcommand.
#include "app/commands.h"

namespace ds {

const Command* commands(int* count) {
  static const Command kCommands[] = {
      {"score", "teacher-forced log-probabilities of a token sequence", run_score},
      {"generate", "greedy/sampled continuation of a token sequence", run_generate},
      {"chat-template", "render a messages array (stdin) in the checkpoint's chat format", run_chat_template},
  };
  *count = sizeof(kCommands) / sizeof(kCommands[0]);
  return kCommands;
}

}  // namespace ds
