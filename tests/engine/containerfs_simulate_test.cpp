// `simulate` with containerfs: the layout line, the writable-layer usage
// fields and their errors.
#include <gtest/gtest.h>

#include <sstream>

#include "engine/simulator.hpp"
#include "engine_helpers.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;  // NOLINT

std::string run(const std::string& timeline, const EvictionConfig& c, std::string* error) {
  std::istringstream in(timeline);
  std::ostringstream out;
  auto r = simulate_stream(in, out, c);
  *error = r.ok() ? "" : r.error().message;
  return out.str();
}

const EvictionConfig kNodefs = config({hard(Signal::NodefsAvailable, pct(10))});

const char* kPods =
    R"({"t":0,"kind":"pod","uid":"big","qosClass":"Burstable","usage":{"ephemeral-storage":"20Gi","writable-layers":"1Gi"}}
{"t":0,"kind":"pod","uid":"layer","qosClass":"Burstable","usage":{"ephemeral-storage":"6Gi","writable-layers":"5Gi"}}
{"t":0,"kind":"observe","signals":{"containerfs.available":{"available":"4Gi","capacity":"100Gi"}}}
)";

TEST(SimulatorContainerfs, WithoutALayoutNothingIsDerived) {
  std::string err;
  std::string out = run(std::string(kPods) + R"({"t":1,"kind":"tick"})" + "\n", kNodefs, &err);
  EXPECT_EQ(err, "");
  EXPECT_EQ(out, "") << "containerfs.available is observed but has no threshold";
}

TEST(SimulatorContainerfs, SeparateRanksByWritableLayersSplitByEverything) {
  std::string err;
  std::string out = run(R"({"t":0,"kind":"layout","containerfs":"separate"})"
                        "\n" + std::string(kPods) + R"({"t":1,"kind":"tick"})" + "\n",
                        kNodefs, &err);
  EXPECT_EQ(err, "");
  EXPECT_NE(out.find(R"("kind":"evict","uid":"layer")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("signal":"containerfs.available")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("condition":"DiskPressure","status":true)"), std::string::npos) << out;

  out = run(R"({"t":0,"kind":"layout","containerfs":"split"})"
            "\n" + std::string(kPods) + R"({"t":1,"kind":"tick"})" + "\n",
            kNodefs, &err);
  EXPECT_EQ(err, "");
  EXPECT_NE(out.find(R"("kind":"evict","uid":"big")"), std::string::npos) << out;
}

TEST(SimulatorContainerfs, BadLinesAreErrors) {
  std::string err;
  run(R"({"t":0,"kind":"layout","containerfs":"raid"})", kNodefs, &err);
  EXPECT_NE(err.find("line 1: layout.containerfs \"raid\" is not one of single, imagefs, split, separate"),
            std::string::npos)
      << err;
  run(R"({"t":0,"kind":"layout","containerfs":"unknown"})", kNodefs, &err);
  EXPECT_NE(err.find("is not one of"), std::string::npos) << err;
  run(R"({"t":0,"kind":"layout"})", kNodefs, &err);
  EXPECT_NE(err.find("layout needs \"containerfs\""), std::string::npos) << err;
  run(R"({"t":0,"kind":"layout","containerfs":"split","extra":1})", kNodefs, &err);
  EXPECT_NE(err.find("unknown key \"extra\""), std::string::npos) << err;
  run(R"({"t":0,"kind":"pod","uid":"p","usage":{"ephemeral-storage":"1Gi","writable-layers":"2Gi"}})", kNodefs, &err);
  EXPECT_NE(err.find("cannot be larger"), std::string::npos) << err;
  run(R"({"t":0,"kind":"pod","uid":"p","usage":{"writable-layers":"-1"}})", kNodefs, &err);
  EXPECT_NE(err.find("usage.writable-layers must not be negative"), std::string::npos) << err;
}

}  // namespace
}  // namespace pressured
