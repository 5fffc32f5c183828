/// \file llmsim/llmsim.hpp
/// The llmsim core: units, specs and their validation. Needs only the standard library and
/// Boost.Hana; file loading lives in <llmsim/json.hpp>.
#pragma once

#include <llmsim/version.hpp>
#include <llmsim/core/error.hpp>
#include <llmsim/core/fixed_string.hpp>
#include <llmsim/core/units.hpp>
#include <llmsim/spec/fields.hpp>
#include <llmsim/spec/model.hpp>
#include <llmsim/spec/strategy.hpp>
#include <llmsim/spec/system.hpp>
#include <llmsim/spec/validate.hpp>
