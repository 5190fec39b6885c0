// What the schema compiler refuses, and that its messages name the keyword and where it is.
#include "plumb/sample/json_schema.h"

#include <gtest/gtest.h>

#include <string>

#include "plumb/core/error.h"

namespace plumb {
namespace {

std::string Refusal(const std::string& schema) {
  try {
    JsonSchemaGrammar(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(JsonSchema, RefusesEveryKeywordItCannotEnforceNamingItAndItsPath) {
  const struct {
    const char* schema;
    const char* keyword;
    const char* path;
  } cases[] = {
      {R"({"type": "integer", "minimum": 0})", "\"minimum\"", "at #:"},
      {R"({"type": "object", "properties": {"age": {"type": "number", "maximum": 9}}})", "\"maximum\"",
       "at #/properties/age:"},
      {R"({"type": "string", "pattern": "^a"})", "\"pattern\"", "at #:"},
      {R"({"type": "string", "format": "date"})", "\"format\"", "at #:"},
      {R"({"type": "array", "items": {"type": "integer", "multipleOf": 2}})", "\"multipleOf\"",
       "at #/items:"},
      {R"({"type": "array", "uniqueItems": true})", "\"uniqueItems\"", "at #:"},
      {R"({"oneOf": [{"type": "string"}]})", "\"oneOf\"", "at #:"},
      {R"({"type": "object", "properties": {"a/b": {"not": {}}}})", "\"not\"", "at #/properties/a~1b:"},
      {R"({"type": "object", "minProperties": 1})", "\"minProperties\"", "at #:"},
      {R"({"$defs": {"x": {"type": "string", "pattern": "y"}}, "$ref": "#/$defs/x"})", "\"pattern\"",
       "at #/$defs/x:"},
  };
  for (const auto& c : cases) {
    const std::string message = Refusal(c.schema);
    EXPECT_NE(message.find("unsupported keyword " + std::string(c.keyword)), std::string::npos) << message;
    EXPECT_NE(message.find(c.path), std::string::npos) << message;
  }
}

TEST(JsonSchema, RefusesMalformedAndUnsatisfiableSchemas) {
  for (const char* schema : {
           "{",                                                           // not JSON
           R"({"type": "strin"})",                                        // no such type
           R"({"type": "string", "minLength": 3, "maxLength": 2})",       // empty
           R"({"type": "array", "minItems": -1})",                        // malformed
           R"({"type": "object", "properties": {}, "required": ["x"]})",  // undeclared required
           R"({"enum": []})",
           R"({"type": "integer", "enum": ["a"]})",  // no value of the type
           R"({"$ref": "#/$defs/missing"})",
           R"({"$ref": "other.json#/x"})",
           R"({"$ref": "#/$defs/a", "type": "string", "$defs": {"a": {}}})",  // $ref with a sibling
           R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})",
           R"({"type": "array", "items": [{"type": "string"}]})",
           R"({"type": "string", "maxLength": 1000000})",  // past what is spelled out
           "false",
       }) {
    EXPECT_NE(Refusal(schema).rfind("JSON schema", 0), std::string::npos)
        << schema << ": " << Refusal(schema);
  }
}

TEST(JsonSchema, IgnoresAnnotationsAndAcceptsTheSupportedSubset) {
  EXPECT_EQ(
      Refusal(R"({"title": "t", "description": "d", "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "$comment": "c", "examples": [1], "default": {}, "type": "object",
                        "properties": {"a": {"type": "string", "deprecated": true, "readOnly": true}},
                        "required": ["a"], "additionalProperties": false, "uniqueItems": false})"),
      "(accepted)");
  EXPECT_EQ(Refusal(R"({"type": "object", "additionalProperties": {"type": "integer"}})"), "(accepted)");
  EXPECT_EQ(Refusal(R"({"definitions": {"a": {"const": 1}}, "allOf": [{"$ref": "#/definitions/a"}]})"),
            "(accepted)");
  EXPECT_EQ(Refusal("true"), "(accepted)");
  EXPECT_EQ(Refusal("{}"), "(accepted)");
}

}  // namespace
}  // namespace plumb
