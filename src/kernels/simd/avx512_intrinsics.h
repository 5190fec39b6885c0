// <immintrin.h> for files that use 512-bit intrinsics. Internal to src/kernels/; x86-64 only.
//
// GCC 12's 512-bit intrinsics start their results from _mm512_undefined_*(), which its -Wmaybe-uninitialized
// (and, for the unpacks and shuffles of a transpose, -Wuninitialized) then reports wherever they inline (GCC
// bug 105593, fixed in 13): silenced for this header alone.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
