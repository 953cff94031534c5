/*
 * sampler.h - choosing the next token from a row of logits, on the host.
 *
 * The procedure, for logits z[0..V) (float):
 *   1. temperature == 0: greedy, the index of the largest logit (the lowest
 *      index among equal maxima; NaN logits are never chosen). No random
 *      number is drawn.
 *   2. otherwise the candidates are sorted by logit, descending (ties: lower
 *      index first), and cut:
 *        top_k > 0:      keep the first top_k;
 *        softmax of z / temperature over the kept ones, in double precision;
 *        0 < top_p < 1:  keep the shortest prefix whose probability sum
 *                        reaches top_p (at least one token), as Holtzman et
 *                        al.'s nucleus sampling and Hugging Face's
 *                        TopPLogitsWarper;
 *      then renormalised. One uniform u in [0, 1) is drawn and the first
 *      candidate (in the sorted order) whose cumulative probability exceeds
 *      u * total is returned.
 *
 * The random generator is SplitMix64 (Steele, Lea and Flood 2014; the
 * generator of java.util.SplittableRandom): state += 0x9E3779B97F4A7C15,
 * then the output mix z = (z ^ z>>30) * 0xBF58476D1CE4E5B9, z = (z ^ z>>27)
 * * 0x94D049BB133111EB, z ^ z>>31. The state starts at the seed. A uniform
 * double is (x >> 11) * 2^-53. Exactly one draw per sampled token (none when
 * greedy), so a seed and the same logits give the same tokens on any host.
 *
 * Design: the sampler owns its scratch (V indices and probabilities),
 * allocated once at create; sampling allocates nothing.
 *
 * Not here: repetition penalties, beam search, sampling on the device
 * (logits of one position are small; the host is fast enough and exact).
 */
#ifndef CLF_SAMPLER_H
#define CLF_SAMPLER_H

#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

typedef struct clf_sampler_options {
    double temperature; /* >= 0; 0 = greedy */
    int top_k;          /* 0 = off, else >= 1 */
    double top_p;       /* (0, 1]; 1 = off */
    uint64_t seed;
} clf_sampler_options;

/* temperature 1, top_k 0, top_p 1, seed 1337. */
clf_sampler_options clf_sampler_options_default(void);

typedef struct clf_sampler clf_sampler;

/* A sampler for vocabularies of up to max_vocab tokens. Bad options (a
 * negative or non-finite temperature, top_k < 0, top_p outside (0, 1]) are
 * CLF_ERR_ARG naming the option. */
clf_status clf_sampler_create(int max_vocab, const clf_sampler_options *o, clf_sampler **out,
                              clf_error *err);
void clf_sampler_destroy(clf_sampler *s); /* NULL is a no-op */

/* The next token for logits[0..V), V <= max_vocab. Returns the token, or -1
 * if V is out of range or every logit is NaN. */
int clf_sampler_sample(clf_sampler *s, const float *logits, int V);

CLF_API_END

#endif
