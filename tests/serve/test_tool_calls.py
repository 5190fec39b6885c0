"""Tool calls through plumb serve (docs/serve.md, "Tool calls"), read with the `openai` client.

SmolLM2's template has no tool use, so these exercise the generic format: the tools described in the system
message and the reply constrained to {"tool_call": ...} or {"response": ...}. A full round trip (a call whose
arguments validate against the tool's schema, the result sent back, a content answer), the same call streamed
and assembled from deltas, and bad tools refused with a 400 naming the field.
"""

import json

import jsonschema
import openai
import pytest

from test_openai_client import start_server, stop_server

WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 40},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city"],
}
WEATHER = {"type": "function",
           "function": {"name": "get_weather", "description": "The current weather in a city.",
                        "parameters": WEATHER_PARAMETERS}}
TIME = {"type": "function",
        "function": {"name": "get_time", "description": "The local time in a city.",
                     "parameters": {"type": "object",
                                    "properties": {"city": {"type": "string", "maxLength": 40}},
                                    "required": ["city"]}}}
PARAMETERS = {"get_weather": WEATHER_PARAMETERS, "get_time": TIME["function"]["parameters"]}
QUESTION = [{"role": "user", "content": "What is the weather like in Paris?"}]


# --deterministic: every projection of the prefill as of a decode, through the int8 row kernels, whose bits
# are the same on every CPU and thread count (docs/performance.md, "Batched decode"), and batch-invariant, so a
# prompt read from the prefix cache gives the bits of its own prefill. Without it the greedy replies these
# tests read move with the host's OpenBLAS kernels and with what the cache holds from the tests before: the
# parallel-calls reply's log-probabilities moved by up to 0.2 between running that test alone and after the
# others (with --deterministic they are the same to the bit, alone or not, under OPENBLAS_CORETYPE=Zen and
# Sandybridge).
@pytest.fixture(scope="module")
def client():
    url, proc = start_server("--deterministic")
    yield openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
    stop_server(proc)


def ask(client, messages, **fields):
    fields = {"max_tokens": 60, "temperature": 0, **fields}
    return client.chat.completions.create(model="m", messages=messages, **fields)


def test_round_trip_a_required_call_then_a_content_answer(client):
    r = ask(client, QUESTION, tools=[WEATHER, TIME], tool_choice="required")
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name in ("get_weather", "get_time")
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, PARAMETERS[call.function.name])

    history = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 degrees celsius."},
    ]
    for tool_choice in ("none", "auto"):
        r = ask(client, history, tools=[WEATHER, TIME], tool_choice=tool_choice)
        choice = r.choices[0]
        if tool_choice == "none" or not choice.message.tool_calls:
            assert choice.finish_reason in ("stop", "length")
            assert isinstance(choice.message.content, str) and choice.message.content
            assert not choice.message.tool_calls


def test_a_named_function_is_the_one_called(client):
    r = ask(client, QUESTION, tools=[WEATHER, TIME],
            tool_choice={"type": "function", "function": {"name": "get_time"}})
    [call] = r.choices[0].message.tool_calls
    assert call.function.name == "get_time"
    jsonschema.validate(json.loads(call.function.arguments), TIME["function"]["parameters"])


# "I need two calls" because its greedy reply is two calls (55 tokens); the first version of this test asked
# "Weather and time in Paris and Rome?", whose greedy list repeats itself with choices 0.02 apart in
# log-probability, and ended within max_tokens on one host but not on another (issue 50).
TWO_CALLS = [{"role": "user", "content": "I need two calls: the weather in Paris and the time in Rome."}]


def test_parallel_calls_come_as_a_list(client):
    r = ask(client, TWO_CALLS, tools=[WEATHER, TIME], tool_choice="required", parallel_tool_calls=True,
            max_tokens=120)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    calls = choice.message.tool_calls
    assert len(calls) >= 2 and len({c.id for c in calls}) == len(calls)
    for c in calls:
        assert c.function.name in ("get_weather", "get_time")
        jsonschema.validate(json.loads(c.function.arguments), PARAMETERS[c.function.name])


def test_a_list_cut_by_max_tokens_comes_back_as_its_text(client):
    """docs/serve.md, "What comes back as content": never a malformed call. Host-independent: any reply of
    8 tokens is cut inside the constrained document."""
    r = ask(client, TWO_CALLS, tools=[WEATHER, TIME], tool_choice="required", parallel_tool_calls=True,
            max_tokens=8)
    choice = r.choices[0]
    assert choice.finish_reason == "length"
    assert not choice.message.tool_calls
    text, head = choice.message.content.replace(" ", ""), '{"tool_calls":[{"name":"'
    assert text.startswith(head) or head.startswith(text), text


def test_a_stream_assembles_the_same_call(client):
    whole = ask(client, QUESTION, tools=[WEATHER], tool_choice="required").choices[0].message.tool_calls[0]
    stream = ask(client, QUESTION, tools=[WEATHER], tool_choice="required", stream=True)
    calls, finish = {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        for d in choice.delta.tool_calls or []:
            c = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            c["id"] = d.id or c["id"]
            c["name"] += (d.function.name or "") if d.function else ""
            c["arguments"] += (d.function.arguments or "") if d.function else ""
        finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert list(calls) == [0]
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["name"] == whole.function.name
    assert json.loads(calls[0]["arguments"]) == json.loads(whole.function.arguments)


@pytest.mark.parametrize("tools, tool_choice, field", [
    ([{"type": "retrieval"}], "auto", "tools[0].type"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 3}}}}}], "auto", "tools[0].function.parameters"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "strange"}}}], "auto",
     "tools[0].function.parameters"),
    ([{"type": "function", "function": {"name": "bad name!"}}], "auto", "tools[0].function.name"),
    ([WEATHER, WEATHER], "auto", "tools[1].function.name"),
    ([WEATHER], {"type": "function", "function": {"name": "get_time"}}, "tool_choice"),
    ([WEATHER], "sometimes", "tool_choice"),
    (None, "required", "tool_choice"),
])
def test_bad_tools_are_refused_naming_the_field(client, tools, tool_choice, field):
    fields = {"tool_choice": tool_choice}
    if tools is not None:
        fields["tools"] = tools
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, QUESTION, **fields)
    assert field in e.value.message


def test_bad_history_is_refused_naming_the_message(client):
    bad_arguments = QUESTION + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{not json"}}]}]
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, bad_arguments, tools=[WEATHER])
    assert "messages[1].tool_calls[0].function.arguments" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, QUESTION + [{"role": "tool", "content": "42"}], tools=[WEATHER])
    assert "messages[1].tool_call_id" in e.value.message
