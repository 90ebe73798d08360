"""Hugging Face `transformers` language models as spmd-capture factories,
built from small configs with random weights (nothing is downloaded).

  spmd-capture --model 'examples/hf.py:gpt2(layers=2)' --optimizer adamw \
      -o g.mlir --bundle g.bundle

Each named factory (gpt2, bert, llama, opt, t5) is `lm(model_type, ...)`
with that family's config names; `lm` takes any `transformers` model type
whose config has the usual size fields (mistral, qwen2, gpt_neox, phi,
gemma, roberta, distilbert, bloom, ...). The model computes its own loss
from `labels` (causal LM: next token; masked LM: the masked positions;
seq2seq: the decoder's tokens), which spmd-capture takes from the output's
`loss`.

Sizes: `batch`, `seq`, `vocab`, `hidden`, `heads`, `kv_heads` (grouped
query attention where the config has it), `ffn`, `layers`, and `dropout`
(None keeps the config's default rates; a number sets every dropout rate
the config has).
"""
import torch
import transformers

# Config field names of the sizes, per config class (the first that the
# config has wins).
_FIELDS = {
    "vocab": ["vocab_size"],
    "hidden": ["hidden_size", "n_embd", "d_model", "dim"],
    "heads": ["num_attention_heads", "n_head", "num_heads", "n_heads"],
    "kv_heads": ["num_key_value_heads"],
    "ffn": ["intermediate_size", "n_inner", "ffn_dim", "d_ff", "hidden_dim"],
    "layers": ["num_hidden_layers", "n_layer", "num_layers", "n_layers"],
    "positions": ["max_position_embeddings", "n_positions"],
}
_DROPOUTS = ["hidden_dropout_prob", "attention_probs_dropout_prob",
             "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout",
             "attention_dropout", "activation_dropout", "dropout_rate",
             "hidden_dropout", "attention_dropout_prob"]
_TASKS = {
    "causal": transformers.AutoModelForCausalLM,
    "masked": transformers.AutoModelForMaskedLM,
    "seq2seq": transformers.AutoModelForSeq2SeqLM,
}


def _set(config, name, value):
    for field in _FIELDS[name]:
        if hasattr(config, field):
            setattr(config, field, value)
            return
    raise ValueError("%s config has no %s field (%s)"
                     % (type(config).__name__, name, ", ".join(_FIELDS[name])))


def lm(model_type="gpt2", task="causal", batch=2, seq=8, vocab=96, hidden=64,
       heads=4, kv_heads=None, ffn=128, layers=2, dropout=0.0, seed=0,
       **config_fields):
    """A `transformers` `model_type` model for `task` (causal, masked,
    seq2seq) with random weights, and a batch of random tokens with its
    labels: causal LMs learn `input_ids` shifted by one (the model shifts),
    masked LMs every 4th token (the others are -100, ignored), seq2seq
    models the decoder's tokens (`labels`, from which the model makes its
    `decoder_input_ids`). Extra keyword arguments set config fields."""
    config = transformers.AutoConfig.for_model(model_type)
    _set(config, "vocab", vocab)
    _set(config, "hidden", hidden)
    _set(config, "heads", heads)
    _set(config, "ffn", ffn)
    _set(config, "layers", layers)
    if kv_heads is not None:
        _set(config, "kv_heads", kv_heads)
    elif any(hasattr(config, f) for f in _FIELDS["kv_heads"]):
        _set(config, "kv_heads", heads)
    for field in _FIELDS["positions"]:
        if hasattr(config, field):
            setattr(config, field, max(seq, 16))
    if hasattr(config, "head_dim"):
        config.head_dim = hidden // heads
    if dropout is not None:
        for field in _DROPOUTS:
            if isinstance(getattr(config, field, None), float):
                setattr(config, field, float(dropout))
    for field, value in config_fields.items():
        setattr(config, field, value)
    # Every path through the model is traced: the eager attention (softmax
    # of explicit scores) or PyTorch's SDPA, never an external kernel.
    config._attn_implementation = "sdpa"
    config.use_cache = False

    torch.manual_seed(seed)
    model = _TASKS[task].from_config(config)
    ids = torch.randint(0, vocab, (batch, seq))
    if task == "causal":
        inputs = {"input_ids": ids, "labels": ids.clone()}
    elif task == "masked":
        labels = torch.full_like(ids, -100)
        labels[:, ::4] = ids[:, ::4]
        inputs = {"input_ids": ids, "labels": labels}
    else:
        inputs = {"input_ids": ids,
                  "labels": torch.randint(0, vocab, (batch, seq))}
    return model, inputs


def gpt2(**sizes):
    """GPT2LMHeadModel: learned positions, pre-LayerNorm, packed c_attn
    Conv1D (weight [in, out]), GELU (tanh) MLP, tied head."""
    return lm("gpt2", "causal", **sizes)


def bert(**sizes):
    """BertForMaskedLM: token, position and type embeddings, post-LayerNorm
    encoder, GELU MLP, the prediction head's transform and tied decoder."""
    return lm("bert", "masked", **sizes)


def llama(**sizes):
    """LlamaForCausalLM: RMSNorm, rotary embeddings, grouped-query attention
    (`kv_heads`), SwiGLU MLP, untied head."""
    sizes.setdefault("tie_word_embeddings", False)
    return lm("llama", "causal", **sizes)


def opt(**sizes):
    """OPTForCausalLM: learned positions offset by 2 from the attention
    mask's cumsum, pre-LayerNorm, ReLU MLP, tied head."""
    sizes.setdefault("word_embed_proj_dim", sizes.get("hidden", 64))
    return lm("opt", "causal", **sizes)


def t5(**sizes):
    """T5ForConditionalGeneration: encoder-decoder, relative attention bias
    (log-bucketed positions), RMS LayerNorm, ReLU MLP."""
    sizes.setdefault("d_kv", sizes.get("hidden", 64) // sizes.get("heads", 4))
    sizes.setdefault("num_decoder_layers", sizes.get("layers", 2))
    sizes.setdefault("decoder_start_token_id", 0)
    sizes.setdefault("pad_token_id", 0)
    return lm("t5", "seq2seq", **sizes)
