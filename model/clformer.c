/*
 * clformer.c - the library-wide entry points of clformer.h that belong to
 * no room in particular.
 */
#include "model/clformer.h"

#define CLF_STR2(x) #x
#define CLF_STR(x) CLF_STR2(x)

const char *clf_version(void)
{
    return CLF_STR(CLF_VERSION_MAJOR) "." CLF_STR(CLF_VERSION_MINOR) "." CLF_STR(CLF_VERSION_PATCH);
}
