#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_units {

using namespace llmsim::literals;

TEST(Units, FormatsBytesWithBinaryPrefixes) {
  EXPECT_EQ(llmsim::to_string(1.5_GiB), "1.50 GiB");
  EXPECT_EQ(llmsim::to_string(512_B), "512 B");
  EXPECT_EQ(llmsim::to_string(80_GiB), "80.00 GiB");
  EXPECT_EQ(llmsim::to_string(3_TiB), "3.00 TiB");
}

TEST(Units, FormatsSecondsWithFourSignificantDigits) {
  EXPECT_EQ(llmsim::to_string(0.4567_s), "456.7 ms");
  EXPECT_EQ(llmsim::to_string(10_us), "10.00 us");
  EXPECT_EQ(llmsim::to_string(1.2345_s), "1.234 s");
  EXPECT_EQ(llmsim::to_string(llmsim::seconds{0}), "0.000 s");
}

TEST(Units, FormatsRates) {
  EXPECT_EQ(llmsim::to_string(312_TFLOPS), "312.0 TFLOP/s");
  EXPECT_EQ(llmsim::to_string(900_GBps), "900.0 GB/s");
  EXPECT_EQ(llmsim::to_string(6_PFLOP), "6.00 PFLOP");
}

TEST(Units, CrossDimensionArithmetic) {
  EXPECT_DOUBLE_EQ((1_GB / 100_GBps).ms(), 10.0);
  EXPECT_DOUBLE_EQ((312_TFLOP / 312_TFLOPS).value, 1.0);
  EXPECT_DOUBLE_EQ((1_GB / 1_s).value, 1e9);
}

}  // namespace llmsim_test_units
