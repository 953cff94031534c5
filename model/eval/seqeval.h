/*
 * seqeval.h - evaluating the encoder kinds on a whole dataset: the loss of
 * a translator or classifier, a classifier's accuracy, and a translator's
 * corpus BLEU with greedy decoding or beam search.
 *
 * Every function walks the dataset once in CLF_SEQ_ORDER_SORTED batches
 * (deterministic: no randomness, the same result on every call), with
 * label smoothing turned off for the loss (it is a training regulariser):
 *   loss     = sum of per-target (per-sentence for a classifier) cross-
 *              entropies / number of targets, summed in double;
 *   accuracy = sentences whose highest logit is their label / labelled
 *              sentences (ties: the lower label);
 *   BLEU     = sacreBLEU's corpus BLEU (bleu.h: 13a, exp smoothing) of the
 *              detokenized hypotheses (the tokenizer's decode; specials
 *              dropped, surrounding whitespace trimmed) against one
 *              reference per sentence: the caller's raw lines, or, when
 *              refs is NULL, the dataset's target tokens decoded (the same
 *              text for byte-level BPE unless a target was truncated).
 * The model for the loss and the accuracy is any model of the dataset's
 * kind planned for the batches (clf_seqeval_limits); the model for BLEU is
 * an encoder-decoder with CLF_MODEL_INFER planned by
 * clf_beam_model_limits (a separate inference model: the trainer copies
 * the parameters into it before each BLEU evaluation).
 *
 * Not here: choosing when to evaluate (trainer.h), printing (cli/),
 * several references per sentence, chrF/TER.
 */
#ifndef CLF_SEQEVAL_H
#define CLF_SEQEVAL_H

#include <stddef.h>
#include <stdint.h>

#include "model/data/seqdata.h"
#include "model/eval/bleu.h"
#include "model/graph/model.h"
#include "model/infer/beam.h"
#include "model/text/tokenizer.h"
#include "runtime/status.h"

CLF_API_BEGIN

/* The batching evaluation uses: `batch` sentences per forward (and, when
 * batch_tokens > 0, at most that many B x max(S, T) slots), sorted. */
void clf_seqeval_batching(int batch, int batch_tokens, clf_seq_batching *bo);

/* Limits a model needs to evaluate ds with bo (merge them with the
 * training loader's by clf_seqeval_limits_merge). */
clf_status clf_seqeval_limits(const clf_seqdata *ds, const clf_seq_batching *bo,
                              clf_seq_limits *out, clf_error *err);
/* a = elementwise max(a, b). */
void clf_seqeval_limits_merge(clf_seq_limits *a, const clf_seq_limits *b);
/* The model limits of loader limits. */
clf_model_limits clf_seqeval_model_limits(const clf_seq_limits *sl);

typedef struct clf_seqeval_result {
    double loss;      /* mean per target (translator) / per labelled sentence */
    uint64_t targets; /* what the loss averages over */
    double accuracy;  /* classifier only; NAN otherwise */
    uint64_t correct, labelled;
} clf_seqeval_result;

/* Loss (and, for a classifier, accuracy) over ds with bo. */
clf_status clf_seqeval_run(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                           clf_seqeval_result *out, clf_error *err);
/* The same over batches shard, shard + shards, ... of bo's sequence only
 * (data parallel: each rank its share; the counts and loss x targets add
 * up across shards to the whole run's). */
clf_status clf_seqeval_run_shard(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                                 int shard, int shards, clf_seqeval_result *out, clf_error *err);

/* A classifier's label probabilities for every sentence of ds (labels not
 * needed): probs [n, labels] in the dataset's order, batched by bo. */
clf_status clf_seqeval_probs(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                             float *probs, clf_error *err);

/* Sentence embeddings: an encoder's pooled output (clf_model_pooled_read:
 * mean over the kept positions, or the first) for every sentence of ds,
 * vecs [n, C] in the dataset's order, scaled to unit L2 norm when
 * normalize (a zero vector stays zero). */
clf_status clf_seqeval_embed(clf_model *m, const clf_seqdata *ds, const clf_seq_batching *bo,
                             int normalize, float *vecs, clf_error *err);

/* Translate ds with o (beam.h) and score corpus BLEU. refs: n = the
 * dataset's size raw reference lines, or NULL (decoded targets). hyps:
 * NULL, or receives the detokenized hypotheses in input order (malloc'ed
 * strings in a malloc'ed array; free with clf_seqeval_hyps_free). */
clf_status clf_seqeval_bleu(clf_model *m, const clf_tokenizer *tok, const clf_seqdata *ds,
                            const char *const *refs, const clf_beam_options *o, clf_bleu_score *out,
                            char ***hyps, clf_error *err);
void clf_seqeval_hyps_free(char **hyps, size_t n);

/* Detokenize tokens (-1 terminated or n long, whichever first): decode,
 * trim surrounding whitespace. *text malloc'ed. */
clf_status clf_seqeval_detok(const clf_tokenizer *tok, const int32_t *tokens, size_t n, char **text,
                             clf_error *err);

CLF_API_END

#endif
