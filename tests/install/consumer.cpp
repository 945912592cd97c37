// The same consumer compiled as C++: the public headers must be valid C++
// (extern "C" linkage, no C-only syntax) for servers written in it.
#include "consumer.c"
