"""response_format through plumb serve (docs/serve.md, "Structured output"), read with the `openai` client.

The 20 schemas of tests/sample/test_generate_json_schema.py, each asked for as a `json_schema` response format
on /v1/chat/completions, greedy and sampled: every reply must parse and validate (`jsonschema`). Also
`json_object` (any object), a streamed reply, and a schema keyword plumb cannot enforce refused with a 400
naming it (never ignored).
"""

import importlib.util
import json
import os

import jsonschema
import openai
import pytest

from test_openai_client import start_server, stop_server

_spec = importlib.util.spec_from_file_location(
    "json_schema_cases",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sample", "test_generate_json_schema.py"))
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)
SCHEMAS = _cases.SCHEMAS


@pytest.fixture(scope="module")
def client():
    url, proc = start_server()
    yield openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
    stop_server(proc)


def ask(client, prompt, schema, **sampling):
    return client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": prompt}], max_tokens=300,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema}},
        **sampling)


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 0.9, "seed": 7}], ids=["greedy", "sampled"])
def test_every_reply_parses_and_validates(client, sampling):
    assert len(SCHEMAS) == 20
    for prompt, schema in SCHEMAS:
        r = ask(client, prompt, schema, **sampling)
        assert r.choices[0].finish_reason == "stop", (prompt, r.choices[0].message.content)
        jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_json_object_and_a_streamed_reply(client):
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Describe a cat."}],
                                       max_tokens=200, temperature=0, response_format={"type": "json_object"})
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    prompt, schema = SCHEMAS[0]
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": prompt}], max_tokens=300, temperature=0, stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    jsonschema.validate(json.loads(text), schema)


def test_a_keyword_plumb_cannot_enforce_is_a_400_naming_it(client):
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, "How old?", {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}})
    assert "minimum" in str(e.value) and "#/properties/age" in str(e.value)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                       response_format={"type": "xml"})
