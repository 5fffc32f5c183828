/// \file llmsim/version.hpp
/// Version of the llmsim headers, and a guard against two versions in one program.
///
/// Every public entity lives in the inline namespace `llmsim::LLMSIM_ABI_NAMESPACE`, so two copies
/// of different versions linked into one program name different symbols instead of silently
/// violating the one-definition rule. Two different versions included into one translation unit
/// are refused by the preprocessor.
#pragma once

#define LLMSIM_VERSION_MAJOR_THIS 0
#define LLMSIM_VERSION_MINOR_THIS 2
#define LLMSIM_VERSION_PATCH_THIS 0

#if defined(LLMSIM_VERSION_MAJOR) &&                                                                           \
    (LLMSIM_VERSION_MAJOR != LLMSIM_VERSION_MAJOR_THIS || LLMSIM_VERSION_MINOR != LLMSIM_VERSION_MINOR_THIS || \
     LLMSIM_VERSION_PATCH != LLMSIM_VERSION_PATCH_THIS)
#error "llmsim: two different versions of the llmsim headers are included in one translation unit"
#endif

#define LLMSIM_VERSION_MAJOR LLMSIM_VERSION_MAJOR_THIS
#define LLMSIM_VERSION_MINOR LLMSIM_VERSION_MINOR_THIS
#define LLMSIM_VERSION_PATCH LLMSIM_VERSION_PATCH_THIS
#define LLMSIM_VERSION_STRING "0.2.0"
/// One number that orders versions: major * 10000 + minor * 100 + patch.
#define LLMSIM_VERSION (LLMSIM_VERSION_MAJOR * 10000 + LLMSIM_VERSION_MINOR * 100 + LLMSIM_VERSION_PATCH)

#define LLMSIM_ABI_NAMESPACE v0_2_0
#define LLMSIM_BEGIN_NAMESPACE \
  namespace llmsim {           \
  inline namespace LLMSIM_ABI_NAMESPACE {
#define LLMSIM_END_NAMESPACE \
  }                          \
  }

LLMSIM_BEGIN_NAMESPACE
/// The version these headers carry, as data: `llmsim::version.major == 0`.
struct version_info {
  int major;
  int minor;
  int patch;
  const char* string;
};
inline constexpr version_info version{LLMSIM_VERSION_MAJOR, LLMSIM_VERSION_MINOR, LLMSIM_VERSION_PATCH,
                                      LLMSIM_VERSION_STRING};
LLMSIM_END_NAMESPACE
