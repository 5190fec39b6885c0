// vLLM's tokenizer endpoints, which clients that count tokens themselves call: POST /tokenize, POST
// /detokenize, GET /tokenizer_info. lm-evaluation-harness's local-completions model finds them and then
// tokenizes with the served model's own tokenizer, so no tokenizer need be fetched from elsewhere.
#pragma once

#include "plumb/tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace plumb::serve {

// `tokenizer` must outlive the server; `context` is reported as max_model_len.
void RegisterTokenizerRoutes(httplib::Server& http, const Tokenizer& tokenizer, int context);

}  // namespace plumb::serve
