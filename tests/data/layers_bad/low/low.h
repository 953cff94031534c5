#include "high/high.h"
int low(void);
