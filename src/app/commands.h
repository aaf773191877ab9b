// The table of `dserve <subcommand>` entry points. Each subcommand lives in its own cmd_*.cpp file
// and returns the process exit code (0 ok, 1 user error with a one-line message on stderr).
#pragma once

namespace ds {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

// All subcommands, in the order `dserve --help` lists them. Defined in commands.cpp.
const Command* commands(int* count);

int run_score(int argc, char** argv);     // cmd_score.cpp
int run_generate(int argc, char** argv);  // cmd_generate.cpp
int run_tokenize(int argc, char** argv);    // cmd_tokenize.cpp
int run_detokenize(int argc, char** argv);  // cmd_tokenize.cpp
int run_chat_template(int argc, char** argv);  // cmd_chat_template.cpp
int run_bench_one_batch(int argc, char** argv);  // cmd_bench_one_batch.cpp
int run_bench_accuracy(int argc, char** argv);   // cmd_bench_accuracy.cpp
int run_bench_serving(int argc, char** argv);  // cmd_bench_serving.cpp
int run_serve(int argc, char** argv);  // cmd_serve.cpp
int run_tune_gemm(int argc, char** argv);  // cmd_tune_gemm.cpp
int run_tune_moe(int argc, char** argv);   // cmd_tune_moe.cpp

}  // namespace ds
