#include "low/low.h"
int high(void);
