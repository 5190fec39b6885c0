// build/plumb: turns every error into one line on stderr and a non-zero exit code.
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "plumb/cli/commands.h"
#include "plumb/core/error.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return plumb::cli::RunMain(args, std::cout, std::cerr);
  } catch (const plumb::Error& e) {
    std::cerr << "plumb: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "plumb: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "plumb: internal error: " << e.what() << "\n";
    return 3;
  }
}
