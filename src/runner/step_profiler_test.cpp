// StepProfiler: start / stop errors, the spans it writes (parsed back as JSON), num_steps' automatic stop.
#include "runner/step_profiler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runner/engine_test_util.h"  // test::ScopedTempDir

namespace ds {
namespace {

namespace fs = std::filesystem;

class StepProfilerTest : public ::testing::Test {
 protected:
  ProfileOptions opts() const {
    ProfileOptions o;
    o.output_dir = dir_.string();
    return o;
  }
  static nlohmann::json read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }
  // The "X" events of a trace.
  static std::vector<nlohmann::json> steps(const nlohmann::json& trace) {
    std::vector<nlohmann::json> out;
    for (const auto& e : trace.at("traceEvents"))
      if (e.at("ph") == "X") out.push_back(e);
    return out;
  }
  const test::ScopedTempDir tmp_{"dserve_profile_test"};
  const fs::path& dir_ = tmp_.path;
};

TEST_F(StepProfilerTest, WritesOneSpanPerStepWithItsShape) {
  StepProfiler p;
  p.step_planned(1);  // before the start: not recorded
  p.step_completed({1, 1, 1, 1, 0, 0});
  ASSERT_TRUE(p.start(opts()).is_ok());
  EXPECT_TRUE(p.active());
  p.step_planned(2);
  p.step_planned(3);  // planned while step 2 is in flight (overlap)
  p.step_completed({2, 2, 40, 1, 39, 0});
  p.step_completed({3, 2, 2, 2, 0, 0});
  p.step_planned(4);
  p.step_completed({4, 1, 3, 1, 0, 2});
  p.step_planned(5);  // never completed before the stop: dropped
  std::string path;
  ASSERT_TRUE(p.stop(&path).is_ok());
  EXPECT_FALSE(p.active());
  EXPECT_EQ(path.rfind(dir_.string(), 0), 0u) << path;
  EXPECT_NE(path.find("-TP-0.trace.json"), std::string::npos) << path;
  const std::vector<nlohmann::json> ev = steps(read(path));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["name"], "mixed");
  EXPECT_EQ(ev[0]["args"]["step"], 2);
  EXPECT_EQ(ev[0]["args"]["tokens"], 40);
  EXPECT_EQ(ev[0]["args"]["prefill_tokens"], 39);
  EXPECT_EQ(ev[1]["name"], "decode");
  EXPECT_EQ(ev[2]["name"], "verify");
  EXPECT_EQ(ev[2]["args"]["draft_tokens"], 2);
  // Overlapping steps sit on different tracks, and each span is well formed.
  EXPECT_NE(ev[0]["tid"], ev[1]["tid"]);
  for (const auto& e : ev) {
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
  }
  EXPECT_LE(ev[0]["ts"].get<double>(), ev[1]["ts"].get<double>());
}

TEST_F(StepProfilerTest, StartAndStopRefuseTheWrongState) {
  StepProfiler p;
  std::string path;
  Status s = p.stop(&path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not in progress"), std::string::npos) << s.message();
  ASSERT_TRUE(p.start(opts()).is_ok());
  s = p.start(opts());
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("already in progress"), std::string::npos) << s.message();
  ASSERT_TRUE(p.stop(&path).is_ok());  // an empty trace is still a trace
  EXPECT_TRUE(steps(read(path)).empty());
}

TEST_F(StepProfilerTest, RefusesBadOptionsByName) {
  StepProfiler p;
  ProfileOptions o = opts();
  o.output_dir = (dir_ / "missing").string();
  Status s = p.start(o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  o = opts();
  o.activities = {"CPU", "TPU"};
  s = p.start(o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'TPU'"), std::string::npos) << s.message();
  o = opts();
  o.num_steps = -1;
  EXPECT_FALSE(p.start(o).is_ok());
  EXPECT_FALSE(p.active());  // nothing started by a refused call
  o = opts();
  o.activities = {"CPU", "GPU"};
  EXPECT_TRUE(p.start(o).is_ok());
}

TEST_F(StepProfilerTest, NumStepsStopsAndWritesByItself) {
  StepProfiler p;
  ProfileOptions o = opts();
  o.num_steps = 2;
  o.tag = "DP-1";
  ASSERT_TRUE(p.start(o).is_ok());
  for (uint64_t id = 10; id < 13; ++id) {
    p.step_planned(id);
    p.step_completed({id, 1, 1, 1, 0, 0});
  }
  EXPECT_FALSE(p.active());
  const std::string path = p.last_path();
  ASSERT_FALSE(path.empty());
  EXPECT_NE(path.find("-DP-1.trace.json"), std::string::npos) << path;
  EXPECT_EQ(steps(read(path)).size(), 2u);  // the third step came after the stop
  std::string again;
  EXPECT_FALSE(p.stop(&again).is_ok());
}

}  // namespace
}  // namespace ds
