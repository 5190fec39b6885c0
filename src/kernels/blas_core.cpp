// OpenBLAS's choice of kernels (include/plumb/kernels/blas_core.h).
#include "plumb/kernels/blas_core.h"

#include <cblas.h>

#include <cstdlib>
#include <string_view>

namespace plumb::kernels {

std::string BlasDescription() {
  // The config starts with the library's name and version: "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...".
  const std::string_view config = openblas_get_config();
  std::string text(config.substr(0, config.find(' ', config.find(' ') + 1)));
  text += std::string(", ") + openblas_get_corename() + " kernels";
  if (const char* chosen = std::getenv("OPENBLAS_CORETYPE"); chosen != nullptr && *chosen != '\0')
    text += " (set by OPENBLAS_CORETYPE)";
  return text;
}

}  // namespace plumb::kernels
