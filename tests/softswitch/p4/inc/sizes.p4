// Sizes for the preprocessor tests, each overridable with -D.
#ifndef SLOTS
#define SLOTS 4
#endif
#define TWICE(x) ((x) * 2)
#if SLOTS * 2 > 16 && defined(SLOTS)
#define BIG 1
#elif SLOTS == 4
#define BIG 0
#else
#define BIG 2
#endif
