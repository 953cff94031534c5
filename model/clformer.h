/*
 * clformer.h - the public API of libclformer: the one header a C program
 * includes to train and run Transformer models on an OpenCL device.
 *
 *   #include <clformer.h>
 *   cc app.c $(pkg-config --cflags --libs clformer)
 *
 * The API is the union of the headers below, the public ones of each room of
 * the library (docs/design.md has the map). A program usually needs these:
 *   runtime/runtime.h         open a device (clf_runtime_create); errors: status.h
 *   model/train/checkpoint.h  open a trained model (clf_checkpoint_open,
 *                             clf_checkpoint_tokenizer_create, _model_create)
 *   model/infer/generate.h    continue a prompt (clf_generate; sampler.h's options)
 *   model/train/trainer.h     train one (clf_trainer_run)
 * examples/generate.c is a complete program.
 * Every function returns a clf_status and fills a caller-owned clf_error;
 * nothing in the library prints or exits. Only the declarations of these
 * headers are exported from the shared library; kernel wrappers (model/ops)
 * and the graph's internals stay private.
 */
#ifndef CLFORMER_H
#define CLFORMER_H

#include "config/config.h"
#include "model/data/batch.h"
#include "model/data/dataset.h"
#include "model/data/lines.h"
#include "model/data/seqdata.h"
#include "model/data/source.h"
#include "model/eval/bleu.h"
#include "model/eval/seqeval.h"
#include "model/graph/model.h"
#include "model/infer/beam.h"
#include "model/infer/generate.h"
#include "model/infer/sampler.h"
#include "model/io/fileio.h"
#include "model/io/json.h"
#include "model/io/safetensors.h"
#include "model/text/tokenizer.h"
#include "model/train/checkpoint.h"
#include "model/train/import.h"
#include "model/train/schedule.h"
#include "model/train/trainer.h"
#include "runtime/convert.h"
#include "runtime/gemm/gemm.h"
#include "runtime/runtime.h"
#include "runtime/status.h"
#include "runtime/util.h"

CLF_API_BEGIN

#define CLF_VERSION_MAJOR 0
#define CLF_VERSION_MINOR 1
#define CLF_VERSION_PATCH 0

/* "0.1.0": the library's version, to compare with the header's CLF_VERSION_*. */
const char *clf_version(void);

CLF_API_END

#endif
