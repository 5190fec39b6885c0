// JSON Schema -> Grammar: the JSON documents that validate against a schema, in one canonical layout
// (docs/serve.md, "Structured output", has the full list of what is supported and what is refused).
//
// Layout (whitespace policy): no whitespace anywhere except one optional space after each ':' and ',', so
// both {"a":1,"b":[1,2]} and {"a": 1, "b": [1, 2]} (Python's json.dumps) match; never a newline. Object
// properties come in the order the schema's "properties" lists them; optional ones may be left out; no
// property outside "properties" is ever generated (so additionalProperties, absent, true or false, is
// always satisfied). Strings are valid UTF-8, with JSON's escapes (\uXXXX for anything but surrogates, so
// that every escape is one character and minLength/maxLength count exactly). Numbers follow JSON's syntax,
// with at most 16 digits before the point, 16 after it and 3 in the exponent (a small model otherwise
// can run on in digits until the token limit).
//
// Supported: type (a name or a list), object (properties, required, additionalProperties: false, true or
// a schema when there are no properties), array (items, minItems, maxItems), string (minLength,
// maxLength), number, integer, boolean, null, enum, const, anyOf, allOf of a single schema, $ref to
// "#", "#/$defs/..." or "#/definitions/..." (any JSON pointer into the document; recursion included),
// and the schemas true ({}: any JSON value). Annotations are ignored: title, description, default,
// examples, $comment, $schema, $id, deprecated, readOnly, writeOnly, and $defs/definitions themselves.
// Every other keyword constrains the output in a way not enforced here and is refused: plumb::Error
// "JSON schema: unsupported keyword "minimum" at #/properties/age ...".
#pragma once

#include <string_view>

#include "plumb/sample/grammar.h"

namespace plumb {

// `schema` is the schema's JSON text. Throws plumb::Error for malformed JSON, an unsupported keyword or a
// malformed or unsatisfiable one (naming it and its path as a JSON pointer, "#/properties/name").
Grammar JsonSchemaGrammar(std::string_view schema);

// Any JSON object (OpenAI's response_format {"type": "json_object"}), in the layout above.
Grammar AnyJsonObjectGrammar();

}  // namespace plumb
