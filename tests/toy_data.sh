# toy_data.sh - the toy sentence data and model files the command-line
# tests train on (sourced by test_cli.sh and test_mpi.sh):
#   toy_data DIR CONFDIR
# writes DIR/{train,val}.{de,en} (German -> English digit words: 64
# training pairs gzip-compressed as Multi30k's, 16 validation pairs),
# DIR/train.tsv.gz and DIR/dev.tsv (a sentiment TSV whose label says
# whether the sentence holds "good" or "bad"), and CONFDIR/s2s.yaml and
# CONFDIR/cls.yaml (a tiny translator and classifier for them).
toy_data() {
  mkdir -p "$1"
  awk 'BEGIN{srand(7); split("null eins zwei drei vier fuenf sechs sieben acht neun",de," ");
    split("zero one two three four five six seven eight nine",en," ");
    for(i=0;i<80;i++){n=2+int(rand()*5); s="";t="";
      for(j=0;j<n;j++){k=1+int(rand()*10); s=s (j?" ":"") de[k]; t=t (j?" ":"") en[k]}
      if(i<64){print s > "'"$1"'/train.de"; print t > "'"$1"'/train.en"}
      else {print s > "'"$1"'/val.de"; print t > "'"$1"'/val.en"}}}'
  gzip -f "$1/train.de" "$1/train.en"
  awk 'BEGIN{srand(11); split("movie film story plot acting it this",w," ");
    print "sentence\tlabel" > "'"$1"'/train.tsv"; print "sentence\tlabel" > "'"$1"'/dev.tsv";
    for(i=0;i<240;i++){n=3+int(rand()*5); s=""; lab=int(rand()*2); p=int(rand()*n);
      for(j=0;j<n;j++){x=(j==p)?(lab?"good":"bad"):w[1+int(rand()*7)]; s=s (j?" ":"") x}
      print s "\t" lab > (i<200 ? "'"$1"'/train.tsv" : "'"$1"'/dev.tsv")}}'
  gzip -f "$1/train.tsv"
  cat >"$2/s2s.yaml" <<'YAML'
model:
  kind: encoder-decoder
  vocab: {tokenizer: bpe, size: 300}
  context: 24
  embedding: {dim: 32, scale: true, dropout: 0.1}
  positional: {type: sinusoidal}
  blocks: {repeat: 1, attention: {heads: 2}, ffn: {hidden: 64, activation: relu}, dropout: 0.1}
  share_embeddings: true
  head: {type: lm}
train:
  batch: 16
  steps: 0
  epochs: 2
  label_smoothing: 0.1
  optimizer: {type: adam, lr: 1.0, betas: [0.9, 0.98], eps: 1.0e-9, weight_decay: 0.0}
  schedule: {type: noam, warmup: 4}
  eval: {every: 0}
  seed: 7
  log_every: 1
YAML
  cat >"$2/cls.yaml" <<'YAML'
model:
  kind: encoder
  vocab: {tokenizer: bpe, size: 300}
  context: 16
  embedding: {dim: 32, dropout: 0.1}
  blocks: {repeat: 1, attention: {heads: 2, causal: false}, ffn: {hidden: 64}, dropout: 0.1}
  head: {type: classifier, pool: mean}
train:
  batch: 16
  steps: 60
  optimizer: {type: adamw, lr: 3.0e-3, weight_decay: 0.0}
  schedule: {type: constant, warmup: 5}
  eval: {every: 20}
  seed: 7
  log_every: 10
YAML
}
