// Checks one GEMV case of plumb's fixture suite against plumb's own oracle, through the installed headers
// and libraries only: reads the case, computes y = W x with plumb::kernels::Gemv and judges it by the
// case's own check. Usage: consumer SUITE_DIR. Exit 0 when the case passes.
#include <plumb/core/error.h>
#include <plumb/fixtures/suite_reader.h>
#include <plumb/kernels/kernels.h>
#include <plumb/kernels/matrix.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer SUITE_DIR\n");
    return 2;
  }
  try {
    const plumb::fixtures::Suite suite = plumb::fixtures::Suite::Open(argv[1]);
    for (const plumb::fixtures::Case& c : suite.cases()) {
      if (c.op != "gemv" || c.params.value("weight_dtype", "") != "f32") continue;
      const plumb::fixtures::TensorFile file = suite.Load(c);
      const plumb::fixtures::Tensor& w = file.Get("w");
      plumb::MatrixF32 W{static_cast<int>(w.shape.at(0)), static_cast<int>(w.shape.at(1)), w.As<float>()};
      const std::vector<float> x = file.Get("x").As<float>();
      std::vector<float> y(static_cast<std::size_t>(W.rows));
      plumb::kernels::Gemv(W, x.data(), y.data());
      const plumb::fixtures::Output& out = c.outputs.at(0);
      const plumb::fixtures::Tensor actual =
          plumb::fixtures::Tensor::From<float>("F32", {W.rows}, std::span<const float>(y));
      const plumb::fixtures::Comparison r = plumb::fixtures::Compare(out.check, file.Get(out.name), actual);
      std::printf("%s: %s %s %g (threshold %g)\n", c.name.c_str(), r.pass ? "PASS" : "FAIL",
                  out.check.metric.c_str(), r.value, out.check.threshold);
      return r.pass ? 0 : 1;
    }
    std::fprintf(stderr, "consumer: no f32 gemv case in %s\n", argv[1]);
    return 1;
  } catch (const plumb::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
