"""`plumb generate --json-schema` on SmolLM2-135M-Instruct (CTest sample.generate_json_schema; docs/serve.md,
"Structured output").

20 schemas (nesting, enums, consts, arrays and their bounds, numbers, string escapes, anyOf, $ref, type
lists), each generated greedily and by sampling: every output must parse and validate (the `jsonschema`
package, pinned in python/requirements.txt). Every string in them has a maxLength and every array a
maxItems, so a document has a bounded length and --max-tokens 300 always lets it finish. Also: the same
through --prompts-file (the Scheduler's path), a token limit that comes first (the run says so: finish
reason length), and an unsupported keyword refused in one line before the model loads.
"""

import concurrent.futures
import json
import os
import subprocess

import jsonschema
import pytest

PLUMB = os.environ["PLUMB_BINARY"]
MODEL = os.environ["PLUMB_MODEL"]

NAME = {"type": "string", "maxLength": 30}
SCHEMAS = [
    ("Describe a person.", {
        "type": "object", "properties": {"name": NAME, "age": {"type": "integer"}},
        "required": ["name", "age"], "additionalProperties": False}),
    ("What colour is the sky?", {
        "type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"]}),
    ("List a few prime numbers.", {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 5}),
    ("Give the address of a museum.", {
        "type": "object", "properties": {
            "museum": NAME,
            "address": {"type": "object", "properties": {
                "street": NAME, "city": NAME, "zip": {"type": "string", "maxLength": 10}},
                "required": ["street", "city", "zip"], "additionalProperties": False}},
        "required": ["museum", "address"], "additionalProperties": False}),
    ("Is the task done?", {
        "type": "object", "properties": {"done": {"type": "boolean"},
                                         "note": {"type": ["string", "null"], "maxLength": 20}},
        "required": ["done", "note"]}),
    ("Name a version 2 product.", {
        "type": "object", "properties": {"version": {"const": 2}, "name": NAME}, "required": ["version", "name"]}),
    ("Write a 2 by 2 matrix.", {
        "type": "array", "minItems": 2, "maxItems": 2,
        "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer"}}}),
    ("Pick a string with an escape in it.", {"enum": ['say "hi"', "back\\slash", "tab\there", "caf\u00e9",
                                                      "new\nline"]}),
    ("Give a number or an error.", {"anyOf": [
        {"type": "integer"},
        {"type": "object", "properties": {"error": NAME}, "required": ["error"], "additionalProperties": False}]}),
    ("Give some points on a line.", {
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                            "required": ["x", "y"], "additionalProperties": False}},
        "type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 1, "maxItems": 3}),
    ("Name a fruit.", {"type": "string", "minLength": 3, "maxLength": 12}),
    ("How many legs has a spider?", {"type": "integer"}),
    ("What is pi?", {"type": "number"}),
    ("Tag this article about cooking.", {
        "type": "array", "items": {"enum": ["food", "travel", "sport", "science"]}, "minItems": 1,
        "maxItems": 4}),
    ("Describe a car (every field optional).", {
        "type": "object", "properties": {"make": NAME, "year": {"type": "integer"}, "electric": {"type": "boolean"}},
        "additionalProperties": False}),
    ("Describe a company and its teams.", {
        "type": "object", "properties": {
            "company": NAME,
            "teams": {"type": "array", "maxItems": 2, "items": {
                "type": "object", "properties": {
                    "name": NAME,
                    "lead": {"type": "object", "properties": {"name": NAME, "years": {"type": "integer"}},
                             "required": ["name"]}},
                "required": ["name", "lead"]}}},
        "required": ["company", "teams"]}),
    ("Give three scores.", {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3}),
    ("An id, as a number or a word.", {"type": ["integer", "string"], "maxLength": 8}),
    ("Quote someone.", {
        "type": "object", "properties": {'he said "hi"': {"type": "string", "maxLength": 25},
                                         "na\u00efve": {"type": "boolean"}},
        "required": ['he said "hi"', "na\u00efve"], "additionalProperties": False}),
    ("Summarise the weather.", {
        "type": "object", "properties": {
            "summary": {"type": "string", "minLength": 5, "maxLength": 40},
            "temperature": {"type": "number"},
            "wind": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"speed": {"type": "number"}},
                                                   "required": ["speed"]}]}},
        "required": ["summary", "temperature", "wind"]}),
]


def chat(request):
    return ("<|im_start|>system\nYou are a helpful assistant. Answer in JSON.<|im_end|>\n"
            f"<|im_start|>user\n{request}<|im_end|>\n<|im_start|>assistant\n")


def generate(schema_path, *args, prompt=None):
    command = [PLUMB, "generate", "--model", MODEL, "--json-schema", str(schema_path), "--threads", "1", *args]
    if prompt is not None:
        command += ["--prompt", prompt]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def schema_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("schemas")
    paths = []
    for i, (_, schema) in enumerate(SCHEMAS):
        paths.append(folder / f"schema{i}.json")
        paths[-1].write_text(json.dumps(schema))
    return paths


@pytest.mark.parametrize("mode", ["greedy", "sampled"])
def test_every_output_parses_and_validates(schema_files, mode):
    sampling = ["--temp", "0"] if mode == "greedy" else ["--temp", "1.0", "--top-p", "0.95"]

    def run(i):
        seed = ["--seed", str(1000 + i)] if mode == "sampled" else []
        return generate(schema_files[i], "--max-tokens", "300", *sampling, *seed, prompt=chat(SCHEMAS[i][0]))

    # Two at a time: the runs are one thread each and the machine has (at least) two cores.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, range(len(SCHEMAS))))
    for (request, schema), result in zip(SCHEMAS, results):
        assert result.returncode == 0, result.stderr
        assert "(stop id)" in result.stderr, f"{request}: did not finish:\n{result.stdout}\n{result.stderr}"
        document = json.loads(result.stdout)
        jsonschema.validate(document, schema)
        # The canonical layout: one line, no whitespace but one space after ':' or ','.
        assert "\n" not in result.stdout.rstrip("\n")


def test_the_scheduler_path_constrains_every_prompt_of_a_batch(schema_files, tmp_path):
    prompts = tmp_path / "prompts.txt"
    index = 15  # nested objects in an array
    prompts.write_text("\n".join(["Describe a company.", "Describe a small team.", "Teams of a shop."]) + "\n")
    result = generate(schema_files[index], "--prompts-file", str(prompts), "--max-tokens", "300", "--temp", "0.8",
                      "--seed", "5")
    assert result.returncode == 0, result.stderr
    documents = [line for line in result.stdout.splitlines() if line and not line.startswith("### ")]
    headers = [line for line in result.stdout.splitlines() if line.startswith("### ")]
    assert len(documents) == 3 and all("stop id" in h for h in headers), result.stdout
    for document in documents:
        jsonschema.validate(json.loads(document), SCHEMAS[index][1])


def test_a_token_limit_that_comes_first_is_reported_as_length(schema_files):
    result = generate(schema_files[19], "--max-tokens", "4", "--temp", "0", prompt=chat(SCHEMAS[19][0]))
    assert result.returncode == 0, result.stderr
    assert "(max tokens)" in result.stderr
    assert "the document is unfinished" in result.stderr and "finish reason length" in result.stderr


def test_an_unsupported_keyword_is_refused_naming_it_and_its_path(tmp_path):
    schema = tmp_path / "bounded.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}}))
    result = generate(schema, prompt="x")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "plumb: error:" in result.stderr
    assert 'unsupported keyword "minimum"' in result.stderr and "#/properties/age" in result.stderr
