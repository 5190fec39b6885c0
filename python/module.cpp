// plumb._plumb: the fixture suite's reader, op computations and verify, for the Python package in
// python/plumb/ (docs/fixtures.md "From Python"). Tensors cross the boundary as (dtype, shape, bytes)
// tuples with safetensors dtype names; python/plumb/_tensors.py turns them into numpy arrays and back, so
// this file needs no numpy headers and every op runs exactly the C++ that `plumb fixtures` runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <climits>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ops.h"  // src/fixtures/: ComputeOp and DecodedWeight, the computations run-reference uses
#include "plumb/fixtures/fixtures.h"
#include "plumb/formats/fp8.h"
#include "plumb/formats/int4.h"
#include "plumb/formats/kv_dtype.h"

namespace py = pybind11;
using plumb::MakeError;
using plumb::fixtures::Tensor;
using plumb::fixtures::TensorMap;

namespace {

using PyTensor = std::tuple<std::string, std::vector<std::int64_t>, py::bytes>;

// A tensor from Python, checked: a known dtype, non-negative dimensions and exactly the bytes they need.
Tensor FromPy(const std::string& name, const PyTensor& t) {
  Tensor out{std::get<0>(t), std::get<1>(t), {}};
  const std::size_t width = plumb::fixtures::DtypeBytes(out.dtype);
  if (width == 0) throw MakeError("tensor \"", name, "\": unknown dtype \"", out.dtype, "\"");
  for (std::int64_t d : out.shape)
    if (d < 0) throw MakeError("tensor \"", name, "\": negative dimension ", d);
  const std::string_view bytes = std::get<2>(t);
  if (bytes.size() != static_cast<std::size_t>(out.Elements()) * width)
    throw MakeError("tensor \"", name, "\": ", bytes.size(), " bytes for ", out.Elements(), " ", out.dtype,
                    " elements");
  out.bytes.assign(bytes.begin(), bytes.end());
  return out;
}

PyTensor ToPy(const Tensor& t) {
  return {t.dtype, t.shape, py::bytes(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size())};
}

TensorMap FromPy(const std::map<std::string, PyTensor>& in) {
  TensorMap out;
  for (const auto& [name, t] : in) out[name] = FromPy(name, t);
  return out;
}

std::map<std::string, PyTensor> ToPy(const TensorMap& in) {
  std::map<std::string, PyTensor> out;
  for (const auto& [name, t] : in) out[name] = ToPy(t);
  return out;
}

nlohmann::json ParseParams(const std::string& json) {
  try {
    return nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw MakeError("params are not valid JSON: ", e.what());
  }
}

std::vector<float> F32s(const std::string& name, const Tensor& x) {
  if (x.dtype != "F32") throw MakeError("tensor \"", name, "\": dtype ", x.dtype, ", needs F32");
  return x.As<float>();
}

// rows × cols of `t` as the int sizes the formats take.
std::pair<int, int> Matrix2d(const std::string& name, const Tensor& t) {
  if (t.shape.size() != 2 || t.shape[0] > INT32_MAX || t.shape[1] > INT32_MAX)
    throw MakeError("tensor \"", name, "\": needs a 2-d [rows][cols] array");
  return {static_cast<int>(t.shape[0]), static_cast<int>(t.shape[1])};
}

plumb::Fp8Format Fp8FormatOf(const std::string& name) {
  if (name == "fp8_e4m3") return plumb::Fp8Format::kE4M3;
  if (name == "fp8_e5m2") return plumb::Fp8Format::kE5M2;
  throw MakeError("FP8 format \"", name, "\" (fp8_e4m3 or fp8_e5m2)");
}

plumb::Int4Params Int4ParamsOf(const std::string& scheme, int group_size) {
  if (group_size <= 0) throw MakeError("INT4 group_size ", group_size, " must be positive");
  if (scheme == "int4_sym") return {plumb::Int4Scheme::kSymmetric, group_size};
  if (scheme == "int4_asym") return {plumb::Int4Scheme::kAsymmetric, group_size};
  throw MakeError("INT4 scheme \"", scheme, "\" (int4_sym or int4_asym)");
}

// codes [rows][n] of a KV dtype from x [rows][n] F32: the cache's write (formats/kv_dtype.h EncodeKv).
PyTensor KvEncode(const PyTensor& x_in, const std::string& kv_dtype, float scale) {
  const Tensor x = FromPy("x", x_in);
  const std::vector<float> v = F32s("x", x);
  if (v.size() > INT32_MAX) throw MakeError("tensor \"x\": too many elements");
  const plumb::KvDtype dtype = plumb::fixtures::KvDtypeOf(kv_dtype);
  Tensor out{kv_dtype == "f32"    ? "F32"
             : kv_dtype == "f16"  ? "F16"
             : kv_dtype == "bf16" ? "BF16"
                                  : "U8",
             x.shape, std::vector<std::uint8_t>(v.size() * plumb::KvDtypeBytes(dtype))};
  plumb::EncodeKv(dtype, v.data(), static_cast<int>(v.size()), scale, out.bytes.data());
  return ToPy(out);
}

// The cache's read (DecodeKv): F32 values of codes of a KV dtype, times `scale` for FP8.
PyTensor KvDecode(const PyTensor& codes_in, const std::string& kv_dtype, float scale) {
  const Tensor codes = FromPy("codes", codes_in);
  const plumb::KvDtype dtype = plumb::fixtures::KvDtypeOf(kv_dtype);
  if (plumb::fixtures::DtypeBytes(codes.dtype) != plumb::KvDtypeBytes(dtype) || codes.Elements() > INT32_MAX)
    throw MakeError("tensor \"codes\": dtype ", codes.dtype, " does not hold ", kv_dtype, " elements");
  std::vector<float> out(static_cast<std::size_t>(codes.Elements()));
  plumb::DecodeKv(dtype, codes.bytes.data(), static_cast<int>(out.size()), scale, out.data());
  return ToPy(Tensor::From<float>("F32", codes.shape, out));
}

}  // namespace

PYBIND11_MODULE(_plumb, m) {
  m.doc() = "plumb's fixture reader, reference ops and verify (python/plumb wraps these)";
  // A ValueError: every plumb::Error from here is about what the caller passed (a shape, a name, a file).
  py::register_exception<plumb::Error>(m, "PlumbError", PyExc_ValueError);

  py::class_<plumb::fixtures::Suite>(m, "Suite")
      .def(py::init([](const std::string& dir) { return plumb::fixtures::Suite::Open(dir); }), py::arg("dir"))
      .def("manifest", [](const plumb::fixtures::Suite& s) { return s.manifest().dump(); })
      .def("load", [](const plumb::fixtures::Suite& s, const std::string& name) {
        for (const plumb::fixtures::Case& c : s.cases())
          if (c.name == name) return ToPy(s.Load(c).tensors());
        throw MakeError(s.dir().string(), ": no case \"", name, "\"");
      });

  m.def(
      "compute",
      [](const std::string& op, const std::string& params, const std::map<std::string, PyTensor>& inputs,
         bool definition) {
        using plumb::fixtures::Impl;
        return ToPy(plumb::fixtures::ComputeOp(op, ParseParams(params), FromPy(inputs),
                                               definition ? Impl::kDefinition : Impl::kKernels));
      },
      py::arg("op"), py::arg("params"), py::arg("inputs"), py::arg("definition"));

  m.def(
      "decode_weight",
      [](const std::string& params, const std::map<std::string, PyTensor>& inputs, bool offsets_only) {
        const plumb::fixtures::DecodedWeight w(ParseParams(params), FromPy(inputs), offsets_only);
        std::vector<float> rows(static_cast<std::size_t>(w.rows()) * static_cast<std::size_t>(w.cols()));
        std::vector<float> scales(static_cast<std::size_t>(w.rows()));
        for (int r = 0; r < w.rows(); ++r) {
          w.Row(r, rows.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(w.cols()));
          scales[static_cast<std::size_t>(r)] = w.RowScale(r);
        }
        return std::make_pair(ToPy(Tensor::From<float>("F32", {w.rows(), w.cols()}, rows)),
                              ToPy(Tensor::From<float>("F32", {w.rows()}, scales)));
      },
      py::arg("params"), py::arg("inputs"), py::arg("offsets_only"));

  m.def("kv_encode", &KvEncode, py::arg("x"), py::arg("kv_dtype"), py::arg("scale"));
  m.def("kv_decode", &KvDecode, py::arg("codes"), py::arg("kv_dtype"), py::arg("scale"));

  m.def(
      "fp8_quantize",
      [](const PyTensor& w_in, const std::string& format, bool per_row) {
        const Tensor w = FromPy("w", w_in);
        const auto [rows, cols] = Matrix2d("w", w);
        const plumb::Fp8Matrix q =
            plumb::QuantizeFp8(F32s("w", w).data(), rows, cols, Fp8FormatOf(format), per_row);
        return std::make_pair(ToPy(Tensor::From<std::uint8_t>("U8", {rows, cols}, q.codes)),
                              ToPy(Tensor::From<float>("F32", {per_row ? rows : 1}, q.scales)));
      },
      py::arg("w"), py::arg("format"), py::arg("per_row"));

  m.def(
      "int4_quantize",
      [](const PyTensor& w_in, const std::string& scheme, int group_size) {
        const Tensor w = FromPy("w", w_in);
        const auto [rows, cols] = Matrix2d("w", w);
        const plumb::Int4Params p = Int4ParamsOf(scheme, group_size);
        const plumb::Int4Matrix q = plumb::QuantizeInt4(F32s("w", w).data(), rows, cols, p);
        const std::int64_t code_bytes = static_cast<std::int64_t>(plumb::Int4RowBytes(cols));
        const std::int64_t zero_bytes = static_cast<std::int64_t>(plumb::Int4ZeroRowBytes(p, cols));
        return std::make_tuple(
            ToPy(Tensor::From<std::uint8_t>("U8", {rows, code_bytes}, q.codes)),
            ToPy(Tensor::From<std::uint16_t>("F16", {rows, plumb::Int4Groups(cols, group_size)}, q.scales)),
            ToPy(Tensor::From<std::uint8_t>("U8", {rows, zero_bytes}, q.zeros)));
      },
      py::arg("w"), py::arg("scheme"), py::arg("group_size"));

  m.def(
      "int4_dequantize",
      [](const PyTensor& codes_in, const PyTensor& scales_in, const PyTensor& zeros_in, int cols,
         const std::string& scheme, int group_size) {
        const plumb::Int4Params p = Int4ParamsOf(scheme, group_size);
        const Tensor codes = FromPy("codes", codes_in), scales = FromPy("scales", scales_in),
                     zeros = FromPy("zeros", zeros_in);
        if (cols <= 0 || codes.shape.empty())
          throw MakeError("INT4 codes: needs [rows][ceil(cols/2)], cols > 0");
        const std::int64_t rows = codes.shape[0];
        const std::size_t code_row = plumb::Int4RowBytes(cols), zero_row = plumb::Int4ZeroRowBytes(p, cols);
        const std::size_t groups = static_cast<std::size_t>(plumb::Int4Groups(cols, group_size));
        const auto urows = static_cast<std::size_t>(rows);
        if (codes.bytes.size() != urows * code_row)
          throw MakeError("INT4 codes: ", codes.bytes.size(), " bytes, [", rows, "][", code_row, "] needed");
        if (scales.dtype != "F16" || scales.bytes.size() != urows * groups * 2)
          throw MakeError("INT4 scales: ", scales.Elements(), " ", scales.dtype, ", [", rows, "][", groups,
                          "] F16 needed");
        if (zeros.bytes.size() != urows * zero_row)
          throw MakeError("INT4 zeros: ", zeros.bytes.size(), " bytes, [", rows, "][", zero_row, "] needed");
        const std::vector<std::uint16_t> s = scales.As<std::uint16_t>();
        std::vector<float> out(urows * static_cast<std::size_t>(cols));  // [rows][cols]
        for (std::size_t r = 0; r < urows; ++r)
          plumb::DequantizeInt4Row(p, codes.bytes.data() + r * code_row, s.data() + r * groups,
                                   zeros.bytes.data() + r * zero_row, cols,
                                   out.data() + r * static_cast<std::size_t>(cols));
        return ToPy(Tensor::From<float>("F32", {rows, cols}, out));
      },
      py::arg("codes"), py::arg("scales"), py::arg("zeros"), py::arg("cols"), py::arg("scheme"),
      py::arg("group_size"));

  m.def(
      "verify",
      [](const plumb::fixtures::Suite& suite,
         const std::map<std::string, std::map<std::string, PyTensor>>& results, const std::string& cases,
         const std::vector<std::string>& allow) {
        std::map<std::string, TensorMap> actual;
        for (const auto& [name, outputs] : results) actual[name] = FromPy(outputs);
        std::vector<std::tuple<std::string, std::string, std::string, double, double, bool, std::string,
                               std::string, double>>
            rows;
        for (const auto& r : plumb::fixtures::Verify(suite, actual, cases, allow))
          rows.emplace_back(r.case_name, r.output, r.metric, r.value, r.threshold, r.pass, r.detail,
                            r.allowance, r.margin);
        return rows;
      },
      py::arg("suite"), py::arg("results"), py::arg("cases"), py::arg("allow"));
}
