/*
 * build_log.h - build logs that point at the kernel files' own lines.
 *
 * Kept apart from runtime_internal.h so that a test of it is not taken for
 * a kernel test (scripts/test-simulator.sh picks those by that header).
 */
#ifndef CLF_BUILD_LOG_H
#define CLF_BUILD_LOG_H

/* A build log with the compiler's own line numbers of a whole program
 * ("<kernel>:1257:25", where a front end ignores #line: NVIDIA's) written
 * as the file and line src's #line markers say ("gemm.cl:797:25"); a
 * malloc'ed copy, NULL without memory. Locations already naming a file,
 * and lines before src's first marker, are left as they are. */
char *clf_build_log_locate(const char *src, const char *log);

#endif
