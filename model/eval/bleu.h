/*
 * bleu.h - corpus BLEU computed exactly as sacreBLEU (2.x) does by default,
 * with its "13a" tokenizer, so that scores are comparable with published
 * ones.
 *
 * What sacreBLEU's corpus_bleu(hyps, [refs]) does, and this module repeats
 * (sacrebleu/metrics/bleu.py, tokenizers/tokenizer_13a.py, tokenizer_re.py):
 *   1. Each segment (hypothesis and references) loses its trailing
 *      whitespace (Python's str.rstrip: the Unicode whitespace set below).
 *   2. 13a tokenization (mteval-v13a.pl), in this order, each step a full
 *      left-to-right pass over the result of the one before:
 *        "<skipped>" -> "";  "-\n" -> "";  "\n" -> " ";
 *        "&quot;" -> '"';  "&amp;" -> "&";  "&lt;" -> "<";  "&gt;" -> ">"
 *        (so "&amp;lt;" becomes "<", as in sacreBLEU); then " " + line + " ";
 *        then the four regular expressions, each a non-overlapping pass:
 *        ([\{-\~\[-\` -\&\(-\+\:-\@\/])  -> " \1 "   (ASCII punctuation and
 *                                        symbols except ' - . , are split off)
 *        ([^0-9])([\.,])                -> "\1 \2 "  (. , not after a digit)
 *        ([\.,])([^0-9])                -> " \1 \2"  (. , not before a digit)
 *        ([0-9])(-)                     -> "\1 \2 "  (- after a digit)
 *      and finally split on whitespace and joined with single spaces.
 *      Whitespace is Python's str.split() set: U+0009-000D, U+001C-001F,
 *      U+0020, U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F,
 *      U+205F, U+3000. Text is UTF-8; the rules only look at ASCII bytes, so
 *      working on bytes gives the same result as Python on code points
 *      (a byte that is not valid UTF-8 is passed through as a non-space).
 *   3. Per segment, the hypothesis n-grams (n = 1..4) are counted and each is
 *      credited min(count in hyp, max count in any one reference); totals
 *      are the hypothesis n-gram counts; the reference length is that of the
 *      reference closest in length to the hypothesis (ties: the shorter).
 *      The statistics are summed over the corpus (clf_bleu_stats).
 *   4. From the sums: BP = 1 if hyp_len >= ref_len, else exp(1 - ref/hyp)
 *      (0 when hyp_len = 0); if no n-gram of any order matches, BLEU = 0.
 *      Otherwise, for n = 1..4 (stopping at the first order with no
 *      hypothesis n-grams, whose precision then stays 0):
 *        p_n = 100 * correct_n / total_n, or when correct_n = 0, by smoothing:
 *          exp   (default, mteval's): k *= 2 (k starts at 1); p_n = 100 / (k * total_n)
 *          floor p_n = 100 * value / total_n   (value default 0.1)
 *          none  p_n = 0
 *          add-k for n >= 2, correct_n and total_n both get + value first
 *                (default 1)
 *      BLEU = BP * exp(sum_{n <= N} log(p_n) / N), log(0) taken as -9999999999,
 *      where N = 4, or with effective_order the last order that had
 *      hypothesis n-grams. The arithmetic is done in the same order as
 *      sacreBLEU's Python, so results agree to the last bit or nearly.
 *   The report line is sacreBLEU's:
 *      "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)"
 *
 * Defaults (clf_bleu_options_default) are sacreBLEU's corpus_bleu defaults:
 * tokenize 13a, smooth exp, lowercase off, effective order off, 4-grams.
 * The tokenizer "none" (sacreBLEU's, used by raw_corpus_bleu) only splits
 * on whitespace.
 *
 *   clf_bleu_options o; clf_bleu_options_default(&o);
 *   clf_bleu_stats st = {0};
 *   for each line i: clf_bleu_add(&st, &o, hyp[i], &ref[i], 1, err);
 *   clf_bleu_score s; clf_bleu_compute(&st, &o, &s);
 *   char line[256]; clf_bleu_format(&s, line, sizeof line);
 *
 * Not here: lowercasing (Unicode case mapping), the intl/zh/ja/char
 * tokenizers, max n-gram orders other than 4, bootstrap confidence
 * intervals, chrF/TER, and sacreBLEU's version signature. Input is taken as
 * detokenized text: give it the decoded hypotheses, not subword pieces.
 */
#ifndef CLF_BLEU_H
#define CLF_BLEU_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

#define CLF_BLEU_ORDER 4 /* maximum n-gram order, sacreBLEU's default */

typedef enum clf_bleu_tokenize {
    CLF_BLEU_TOKENIZE_13A = 0, /* mteval-v13a, sacreBLEU's default */
    CLF_BLEU_TOKENIZE_NONE,    /* whitespace split only */
} clf_bleu_tokenize;

typedef enum clf_bleu_smooth {
    CLF_BLEU_SMOOTH_EXP = 0, /* sacreBLEU's default (NIST / mteval-v13a) */
    CLF_BLEU_SMOOTH_NONE,
    CLF_BLEU_SMOOTH_FLOOR, /* value: default 0.1 */
    CLF_BLEU_SMOOTH_ADD_K, /* value: default 1 */
} clf_bleu_smooth;

typedef struct clf_bleu_options {
    clf_bleu_tokenize tokenize;
    clf_bleu_smooth smooth;
    double smooth_value; /* floor / add-k only; < 0 = the method's default */
    int effective_order; /* bool: average only the orders that have n-grams */
} clf_bleu_options;

/* Sufficient statistics, summed over segments (start from all zeros). */
typedef struct clf_bleu_stats {
    int64_t segments;
    int64_t hyp_len, ref_len;        /* tokens; ref_len sums the closest lengths */
    int64_t correct[CLF_BLEU_ORDER]; /* clipped matches, index n-1 for n-grams */
    int64_t total[CLF_BLEU_ORDER];   /* hypothesis n-grams */
    int64_t tokenized_like;          /* hypotheses ending in " ." (sacreBLEU warns at 100) */
} clf_bleu_stats;

typedef struct clf_bleu_score {
    double score;                      /* BLEU in [0, 100] */
    double precisions[CLF_BLEU_ORDER]; /* percent, after smoothing */
    double bp;                         /* brevity penalty */
    double ratio;                      /* hyp_len / ref_len (0 if ref_len = 0) */
    int64_t hyp_len, ref_len;
    int64_t correct[CLF_BLEU_ORDER], total[CLF_BLEU_ORDER];
} clf_bleu_score;

/* sacreBLEU's corpus_bleu defaults (13a, exp, no effective order). */
void clf_bleu_options_default(clf_bleu_options *o);
const char *clf_bleu_tokenize_name(clf_bleu_tokenize t); /* "13a", "none" */
const char *clf_bleu_smooth_name(clf_bleu_smooth s);     /* "exp", "none", "floor", "add-k" */

/* Tokenize one segment with 13a (steps 1-2 above, trailing whitespace
 * stripped first). *out is malloc'ed, NUL-terminated, tokens separated by
 * single spaces; out_len may be NULL. */
clf_status clf_bleu_tokenize_13a(const char *text, size_t len, char **out, size_t *out_len,
                                 clf_error *err);

/* Add one segment: a NUL-terminated hypothesis and n_refs references
 * (entries may be NULL for "no reference here", as sacreBLEU allows; at
 * least one must be given). */
clf_status clf_bleu_add(clf_bleu_stats *st, const clf_bleu_options *o, const char *hyp,
                        const char *const *refs, int n_refs, clf_error *err);

/* The score from summed statistics (step 4). Never fails. */
void clf_bleu_compute(const clf_bleu_stats *st, const clf_bleu_options *o, clf_bleu_score *out);

/* The whole corpus at once: hyps[i] against refs[r][i] for r < n_refs. o may
 * be NULL for the defaults; stats may be NULL. */
clf_status clf_bleu_corpus(const char *const *hyps, size_t n, const char *const *const *refs,
                           int n_refs, const clf_bleu_options *o, clf_bleu_score *out,
                           clf_bleu_stats *stats, clf_error *err);

/* sacreBLEU's one-line report (see above). snprintf-like: returns the
 * length the full line needs. */
size_t clf_bleu_format(const clf_bleu_score *s, char *buf, size_t cap);

CLF_API_END

#endif
