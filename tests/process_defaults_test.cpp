// The dew executable's process-wide defaults (src/process_defaults/): OpenMP's idle threads sleep at once
// (OMP_WAIT_POLICY=PASSIVE) unless the user chose a policy. libgomp prints the policy it runs with under
// OMP_DISPLAY_ENV, which shows the variable was set before libgomp initialised, not merely in the environment.
#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace {

std::string wait_policy_line(const std::string& environment) {
  auto result = dew::test::run_command("env -u OMP_WAIT_POLICY " + environment + " OMP_DISPLAY_ENV=true '" +
                                       dew::test::dew_binary().string() + "' version 2>&1");
  EXPECT_EQ(result.status, 0) << result.output;
  const auto at = result.output.find("OMP_WAIT_POLICY = ");
  if (at == std::string::npos) return "(libgomp printed no OMP_WAIT_POLICY line) " + result.output;
  return result.output.substr(at, result.output.find('\n', at) - at);
}

TEST(ProcessDefaults, OpenMpThreadsSleepWhenIdleUnlessTheUserSaysOtherwise) {
  EXPECT_EQ(wait_policy_line(""), "OMP_WAIT_POLICY = 'PASSIVE'");
  EXPECT_EQ(wait_policy_line("OMP_WAIT_POLICY=active"), "OMP_WAIT_POLICY = 'ACTIVE'");
}

}  // namespace
