// What happens to a sequence's tokens once they are chosen: appended, detokenized (UTF-8 safe,
// incrementally), checked against the stop conditions (stop tokens, stop strings, max_tokens,
// the context), and handed out as RequestOutputs whose text never shows a stop string, not even
// a prefix of one that may still complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "text/tokenizer.h"

namespace folio {

struct RequestOutput {
  RequestId id = 0;
  int32_t index = 0;  // which of the request's n parallel samples
  std::vector<int32_t> new_tokens;
  std::vector<SampleResult> new_samples;  // logprobs of new_tokens, when asked for
  std::string text_delta;                 // complete UTF-8 only; stop strings never appear
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  double time_to_first_token_s = 0.0;    // set when finished
  double time_per_output_token_s = 0.0;  // set when finished (mean after the first token)
};

class OutputProcessor {
 public:
  OutputProcessor(const Tokenizer& tokenizer, int32_t max_model_len)
      : tokenizer_(tokenizer), max_model_len_(max_model_len) {}

  // Whether the token ends generation for these params (EOS unless ignored, or a stop id).
  bool is_stop_token(const RequestParams& params, int32_t token) const;

  // Appends the token to the request and its text to the output, and says whether it ends the
  // request (kNone: it goes on). A stop string is cut off together with anything after it.
  FinishReason append_token(Request& request, int32_t token);

  // The request's news since the last call: the sample just appended (if any), the text up to
  // where a stop string could still begin (all of it once the request finished), and the
  // finish reason and timings once it finished.
  RequestOutput emit(Request& request, const SampleResult* sample) const;

 private:
  const Tokenizer& tokenizer_;
  int32_t max_model_len_;
};

}  // namespace folio
