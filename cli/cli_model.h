/*
 * cli_model.h - what the model subcommands (train, sample, eval, info)
 * share: loading a model file with its --set overrides and opening a run
 * directory's checkpoint into a model. Every function prints its own errors
 * (this is cli/) and returns an exit code (cli.h).
 */
#ifndef CLF_CLI_MODEL_H
#define CLF_CLI_MODEL_H

#include "cli/cli.h"

/* Load and validate a model file with overrides; prints file:line:col
 * errors. Returns CLI_EXIT_OK or an exit code. */
int cli_config_load(const char *path, const cli_list *s, clf_model_config *cfg);

/* Create a directory and its parents (mkdir -p); prints on failure. */
int cli_mkdir_p(const char *path);

/* Open a run's checkpoint (DIR/ckpt.safetensors, or a .safetensors file):
 * its config and tokenizer (clf_checkpoint_open). Then create its model on
 * rt planned for lim (NULL: the config's batch) with flags, parameters
 * loaded (clf_checkpoint_model_create). Both print their errors. */
int cli_checkpoint_open(const char *dir, clf_checkpoint **ck, clf_model_config *cfg,
                        clf_tokenizer **tok);
int cli_checkpoint_model(clf_runtime *rt, clf_checkpoint *ck, const clf_model_limits *lim,
                         unsigned flags, clf_model **m);

/* --context N and --rope-scaling TYPE (NULL: not given) of sample and eval:
 * the checkpoint's decoder run at N positions (clf_checkpoint_set_context);
 * a scaling the library chose by itself is said on stderr. *cfg becomes the
 * checkpoint's new config. Prints its errors, naming the flag. */
int cli_checkpoint_context(const char *cmd, clf_checkpoint *ck, clf_model_config *cfg, long context,
                           const char *rope_scaling);
#define CLI_CONTEXT_FLAGS_HELP                                                                     \
    "  --context N       run at N positions (a decoder; default: the trained context);\n"          \
    "                    past it rotary positions are scaled (yarn unless the model\n"             \
    "                    names a rope_scaling)\n"                                                  \
    "  --rope-scaling S  none, linear, ntk or yarn past the trained context\n"

/* The vocabulary a model file implies without a run's data: *vocab if
 * nonzero (--vocab), else 256 for byte, the distinct characters of data for
 * char (65, tiny Shakespeare's, with a note saying so when data is NULL),
 * vocab.size for bpe; never below vocab.size. Prints its errors. */
int cli_pick_vocab(const clf_model_config *cfg, const char *data, long *vocab, const char **note);

/* "1,234,567" */
void cli_group_digits(unsigned long long v, char *out, size_t cap);
/* "1h02m03s", "4m05s", "12.3s" */
void cli_format_duration(double s, char *out, size_t cap);

#endif
