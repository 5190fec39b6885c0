// Feeds the input to JsonSchemaGrammar as a JSON schema's text (sample/json_schema.h: what plumb serve's
// response_format and plumb generate --json-schema hand it, from a client), and, for a schema it accepts,
// walks the grammar's automaton over a greedy completion: from the start, at each step the lowest byte
// that keeps the state live, for up to 4 KiB. A plumb::Error is the expected answer to a schema plumb
// refuses; a finding is anything else: a crash, a sanitizer report, another exception, a hang, or a dead end
// (a live state that neither accepts nor takes any byte: the exactness the token masks rely on).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "plumb/core/error.h"
#include "plumb/sample/grammar_automaton.h"
#include "plumb/sample/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = std::make_shared<const Grammar>(JsonSchemaGrammar(text));
  } catch (const Error&) {
    return 0;
  }
  GrammarAutomaton automaton(grammar);
  GrammarAutomaton::State state = automaton.Start();
  for (int step = 0; step < 4096 && !automaton.Accepting(state); ++step) {
    if (!automaton.CanContinue(state)) __builtin_trap();  // live, not accepting, no byte: a dead end
    GrammarAutomaton::State next = GrammarAutomaton::kDead;
    for (int byte = 0; byte < 256 && next == GrammarAutomaton::kDead; ++byte) {
      next = automaton.Next(state, static_cast<std::uint8_t>(byte));
    }
    if (next == GrammarAutomaton::kDead) __builtin_trap();  // CanContinue said some byte may follow
    state = next;
  }
  return 0;
}
