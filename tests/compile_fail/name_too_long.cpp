// A name longer than a fixed_string's capacity is refused at compile time.
// expect: text of \{\} characters exceeds the capacity of \{\}
#include <llmsim/llmsim.hpp>

constexpr llmsim::fixed_string<4> name{"llama3_8b"};
