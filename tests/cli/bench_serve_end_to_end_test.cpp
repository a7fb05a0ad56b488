// `folio bench serve`'s client, runner and metrics against a live folio server in this
// process (the tiny random model behind the real HTTP stack on a free loopback port): counts
// add up, ignore_eos yields the asked lengths, the concurrency cap holds, and failures (an
// endpoint the server refuses, no server at all) are counted rather than fatal.
#ifdef FOLIO_HAS_SERVER
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "cli/bench_serve_dataset.h"
#include "cli/bench_serve_http_client.h"
#include "cli/bench_serve_metrics.h"
#include "cli/bench_serve_runner.h"
#include "engine/engine.h"
#include "server/api_routes.h"
#include "server/engine_worker.h"
#include "server/http_server.h"
#include "support/cpu_engine.h"
#include "support/tiny_model.h"

namespace folio::cli {
namespace {

class LiveFolioServer {
 public:
  explicit LiveFolioServer(folio::testing::TinyModel& tiny)
      : backend_(1), engine_(tiny.model(), backend_, tiny.tokenizer()), worker_(engine_.engine) {
    context_.worker = &worker_;
    context_.model.tokenizer = &tiny.tokenizer();
    context_.model.name = "tiny";
    context_.model.context_tokens = 512;  // the tiny model's; no chat template: chat is refused
    server_ = std::make_unique<server::HttpServer>(context_, server::HttpLimits{});
    EXPECT_TRUE(server_->listen("127.0.0.1", 0).is_ok());
    worker_.start();
    thread_ = std::thread([this] { server_->run(1, [this] { worker_.stop(); }); });
  }
  ~LiveFolioServer() { stop(); }

  void stop() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
    worker_.stop();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

 private:
  cpu::CpuBackend backend_;
  folio::testing::CpuEngine engine_;
  server::EngineWorker worker_;
  server::ApiContext context_;
  std::unique_ptr<server::HttpServer> server_;
  std::thread thread_;
};

class BenchServeEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    tiny_ = folio::testing::TinyModel::create().value();
    server_ = std::make_unique<LiveFolioServer>(*tiny_);
  }

  std::vector<ServeBenchRequest> fixed_requests(int32_t n, int32_t input_len, int32_t output_len) const {
    ServeDatasetOptions dataset;
    dataset.kind = ServeDataset::kFixed;
    dataset.num_prompts = n;
    dataset.input_len = input_len;
    dataset.output_len = output_len;
    return make_serve_requests(dataset, tiny_->tokenizer());
  }

  ServeRunOptions options() const {
    ServeRunOptions o;
    o.fields.model = "tiny";
    o.fields.ignore_eos = true;
    o.timeout_s = 60.0;
    return o;
  }

  std::unique_ptr<folio::testing::TinyModel> tiny_;
  std::unique_ptr<LiveFolioServer> server_;
};

TEST_F(BenchServeEndToEnd, IgnoreEosGivesTheAskedLengthsUnderAConcurrencyCap) {
  const std::vector<ServeBenchRequest> requests = fixed_requests(8, 24, 12);
  ServeRunOptions o = options();
  o.max_concurrency = 3;
  HttpClient client(parse_base_url(server_->url()).value(), "");
  const ServeRunResult result = run_serve_requests(client, requests, o);
  ASSERT_EQ(result.records.size(), 8u);
  EXPECT_LE(result.peak_in_flight, 3);
  EXPECT_GE(result.peak_in_flight, 1);
  for (size_t i = 0; i < result.records.size(); ++i) {
    const RequestRecord& r = result.records[i];
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens_source, TokenCountSource::kServerUsage);
    EXPECT_EQ(r.output_tokens, 12);
    EXPECT_EQ(r.requested_output_tokens, 12);
    EXPECT_TRUE(r.prompt_tokens_from_server);
    EXPECT_EQ(r.prompt_tokens, requests[i].prompt_tokens);  // same tokenizer on both sides
    EXPECT_GT(r.ttft_s, 0.0);
    EXPECT_GE(r.e2e_s, r.ttft_s);
    for (const double itl : r.itls_s) EXPECT_GE(itl, 0.0);
    EXPECT_LE(r.itls_s.size(), 11u);  // one gap per content chunk after the first
    EXPECT_GE(r.sent_s, 0.0);
    EXPECT_LE(r.sent_s + r.e2e_s, result.duration_s + 1e-3);
  }
  const ServeMetrics m = compute_serve_metrics(result.records, result.duration_s, {});
  EXPECT_EQ(m.num_succeeded, 8);
  EXPECT_EQ(m.total_output_tokens, 8 * 12);
  EXPECT_EQ(m.total_prompt_tokens,
            std::accumulate(requests.begin(), requests.end(), int64_t{0},
                            [](int64_t sum, const ServeBenchRequest& r) { return sum + r.prompt_tokens; }));
  EXPECT_NEAR(m.output_token_throughput, 96.0 / result.duration_s, 1e-9);
  EXPECT_EQ(m.tpot.count, 8u);
}

TEST_F(BenchServeEndToEnd, PoissonArrivalsAndShareGptLikeLengths) {
  ServeDatasetOptions dataset;
  dataset.num_prompts = 6;
  dataset.scale = 0.1;
  dataset.seed = 5;
  const std::vector<ServeBenchRequest> requests = make_serve_requests(dataset, tiny_->tokenizer());
  ServeRunOptions o = options();
  o.request_rate = 40.0;
  o.seed = 5;
  HttpClient client(parse_base_url(server_->url()).value(), "");
  const ServeRunResult result = run_serve_requests(client, requests, o);
  int64_t asked = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestRecord& r = result.records[i];
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, requests[i].max_tokens);
    asked += requests[i].max_tokens;
  }
  // Requests went out in arrival order, the first at once.
  for (size_t i = 1; i < result.records.size(); ++i) EXPECT_GE(result.records[i].sent_s, result.records[i - 1].sent_s);
  EXPECT_LT(result.records[0].sent_s, 0.05);
  EXPECT_EQ(compute_serve_metrics(result.records, result.duration_s, {}).total_output_tokens, asked);
}

TEST_F(BenchServeEndToEnd, RefusedRequestsAreCountedWithTheServersReason) {
  const std::vector<ServeBenchRequest> requests = fixed_requests(3, 8, 4);
  ServeRunOptions chat = options();
  chat.endpoint = "/v1/chat/completions";
  chat.kind = ApiKind::kChatCompletions;
  HttpClient client(parse_base_url(server_->url()).value(), "");
  ServeRunResult result = run_serve_requests(client, requests, chat);
  for (const RequestRecord& r : result.records) {
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error.rfind("HTTP 400: ", 0), 0u) << r.error;
  }
  ServeRunOptions nowhere = options();
  nowhere.endpoint = "/v1/nothing";
  result = run_serve_requests(client, requests, nowhere);
  for (const RequestRecord& r : result.records) EXPECT_EQ(r.error.rfind("HTTP 404: ", 0), 0u) << r.error;
  const ServeMetrics m = compute_serve_metrics(result.records, result.duration_s, {});
  EXPECT_EQ(m.num_failed, 3);
  EXPECT_EQ(m.total_output_tokens, 0);
}

TEST_F(BenchServeEndToEnd, NoServerMeansFailedRequestsNotACrash) {
  const std::string url = server_->url();
  server_->stop();
  const std::vector<ServeBenchRequest> requests = fixed_requests(4, 8, 4);
  HttpClient client(parse_base_url(url).value(), "");
  const ServeRunResult result = run_serve_requests(client, requests, options());
  ASSERT_EQ(result.records.size(), 4u);
  for (const RequestRecord& r : result.records) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("connect"), std::string::npos) << r.error;
  }
  EXPECT_EQ(compute_serve_metrics(result.records, result.duration_s, {}).num_failed, 4);
}

}  // namespace
}  // namespace folio::cli
#endif  // FOLIO_HAS_SERVER
