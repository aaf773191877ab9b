// bench-accuracy's pure parts: answer extraction and the few-shot prompt.
#include "bench/accuracy.h"

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

TEST(Accuracy, LastNumber) {
  EXPECT_EQ(last_number("He has 3 apples and buys 4 more.\n#### 7"), 7);
  EXPECT_EQ(last_number("The total is 1,234"), 1234);
  EXPECT_EQ(last_number(" -42"), -42);
  EXPECT_EQ(last_number("no digits here"), kInvalidAnswer);
  EXPECT_EQ(last_number(" 579\n\nQuestion"), 579);
}

TEST(Accuracy, FewShotPrefix) {
  std::vector<QaItem> items = {{"What is 1 plus 2?", "3"}, {"What is 5 minus 9?", "-4"}, {"x", "y"}};
  EXPECT_EQ(few_shot_prefix(items, 2),
            "Question: What is 1 plus 2?\nAnswer: 3\n\nQuestion: What is 5 minus 9?\nAnswer: -4\n\n");
  EXPECT_EQ(few_shot_prefix(items, 0), "");
}

}  // namespace
}  // namespace ds::bench
