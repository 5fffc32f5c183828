// LLMSIM_SANITIZED_BUILD: defined when AddressSanitizer instruments this build. Its instrumentation
// keeps GCC from evaluating an estimate as a constant expression (pointer comparisons into the
// catalogue's systems), so compile-time identity checks are skipped there; the plain GCC and Clang
// builds run them.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define LLMSIM_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMSIM_SANITIZED_BUILD 1
#endif
#endif
