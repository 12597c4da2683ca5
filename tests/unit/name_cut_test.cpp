// Long model names in pictures and profile tables (ir/name_cut.h, issue 16
// item 10): what is kept is what tells two names apart.
#include <gtest/gtest.h>

#include "ir/name_cut.h"

namespace kiln {
namespace {

TEST(NameCut, ShortNamesStayWhole) {
  EXPECT_EQ(cut_name("/bert/pooler/Tanh", 48), "/bert/pooler/Tanh");
  EXPECT_EQ(short_joined_names("relu", 0, 48), "relu");
}

TEST(NameCut, PathsLoseMiddlePartsWithoutDigitsFirst) {
  // 49 bytes: the layer number and the op at the end survive.
  EXPECT_EQ(cut_name("/bert/encoder/layer.0/attention/self/query/MatMul", 39),
            "/bert/encoder/layer.0/.../query/MatMul");
  EXPECT_EQ(cut_name("/bert/encoder/layer.11/attention/self/query/MatMul", 39),
            "/bert/encoder/layer.11/.../query/MatMul");
  std::string a = cut_name("/encoder/layer.0/attention/self/output/dense/MatMul", 36);
  std::string b = cut_name("/encoder/layer.0/attention/self/output/dense/Add", 36);
  EXPECT_LE(a.size(), 36u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(a.ends_with("/MatMul")) << a;
  EXPECT_NE(a.find("layer.0"), std::string::npos) << a;
}

TEST(NameCut, NamesWithoutPathsAreCutInTheMiddle) {
  std::string s = cut_name(std::string(30, 'a') + std::string(30, 'z'), 21);
  EXPECT_EQ(s, std::string(9, 'a') + "..." + std::string(9, 'z'));
}

TEST(NameCut, AllPartsTooLongFallsBackToACharacterCut) {
  std::string s = cut_name("/" + std::string(80, 'x') + "/end", 30);
  EXPECT_LE(s.size(), 30u);
  EXPECT_TRUE(s.ends_with("/end")) << s;
}

TEST(NameCut, FusedNamesShowTheFirstMemberAndTheCountWithinTheWidth) {
  std::string joined =
      "/bert/encoder/layer.3/attention/output/dense/MatMul+/bert/encoder/layer.3/attention/output/dense/Add+"
      "/bert/encoder/layer.3/attention/output/Add";
  std::string s = short_joined_names(joined, 0, 48);
  EXPECT_LE(s.size(), 48u) << s;
  EXPECT_TRUE(s.ends_with("/MatMul + 2 more")) << s;
  EXPECT_NE(s.find("layer.3"), std::string::npos) << s;
}

}  // namespace
}  // namespace kiln
