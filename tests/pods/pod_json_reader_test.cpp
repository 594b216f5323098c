// The pod parser reads JSON through the one bounded reader of API answers
// (k8s/bounded_json.hpp), and takes a document that reader already read
// (the pod source's LIST items and WATCH objects) without printing it and
// reading it again.
#include <gtest/gtest.h>

#include <string>

#include "k8s/bounded_json.hpp"
#include "pods/pod_json.hpp"

namespace pressured {
namespace {

const char* kList = R"({"kind":"PodList","items":[
  {"kind":"Pod","metadata":{"name":"a","namespace":"ns","uid":"u-a"},
   "spec":{"priority":5,"containers":[{"name":"c","resources":{"requests":{"memory":"64Mi"}}}]},
   "status":{"qosClass":"Burstable"}},
  {"kind":"Pod","metadata":{"name":"b","namespace":"ns","uid":"u-b"},
   "spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"12x"}}}]}},
  {"kind":"Service","metadata":{"name":"s","uid":"u-s"}}]})";

TEST(PodJsonReader, ADocumentAlreadyReadParsesAsItsText) {
  auto from_text = pods::parse_pod_documents(kList);
  auto doc = k8s::parse_bounded_json(kList);
  ASSERT_TRUE(from_text) << from_text.error().message;
  ASSERT_TRUE(doc) << doc.error().message;
  auto from_doc = pods::parse_pod_json(*doc);
  ASSERT_TRUE(from_doc) << from_doc.error().message;
  ASSERT_EQ(from_doc->pods.size(), 2u);
  ASSERT_EQ(from_text->pods.size(), from_doc->pods.size());
  for (std::size_t i = 0; i < from_doc->pods.size(); ++i) {
    const PodMetadata& t = from_text->pods[i];
    const PodMetadata& d = from_doc->pods[i];
    EXPECT_EQ(t.uid, d.uid);
    EXPECT_EQ(t.priority, d.priority);
    EXPECT_EQ(t.qos, d.qos);
    EXPECT_EQ(t.requests.memory_bytes, d.requests.memory_bytes);
    EXPECT_EQ(t.memory_spec_unparsable, d.memory_spec_unparsable);
  }
  EXPECT_EQ(from_doc->pods[0].requests.memory_bytes, 64u << 20);
  EXPECT_TRUE(from_doc->pods[1].memory_spec_unparsable) << "a bad quantity costs its signal, not the pod";
  EXPECT_EQ(from_text->skipped, from_doc->skipped);
  EXPECT_EQ(from_doc->errors, from_text->errors);
}

TEST(PodJsonReader, TheDepthBoundIsTheSharedReadersWithItsWords) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  auto r = pods::parse_pod_documents(deep, pods::DocumentFormat::Json);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, k8s::parse_bounded_json(deep).error().message);
  EXPECT_NE(r.error().message.find("nested deeper than 64 levels"), std::string::npos) << r.error().message;
  auto bad = pods::parse_pod_documents("{\"kind\":", pods::DocumentFormat::Json);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message.rfind("not JSON: ", 0), 0u) << bad.error().message;
}

}  // namespace
}  // namespace pressured
