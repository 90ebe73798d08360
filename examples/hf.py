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
(None keeps the config's default rates; a number sets every rate of the
config that drops something: dropout, stochastic depth, LayerDrop).
Mixtures of experts keep at most 8 experts, top 2, each no wider than `ffn`.
"""
import torch
import transformers

# Config field names of the sizes, per config class: every one the config
# has is set (an encoder-decoder has one per stack).
_FIELDS = {
    "vocab": ["vocab_size", "decoder_vocab_size"],
    "hidden": ["hidden_size", "n_embd", "d_model", "dim"],
    "heads": ["num_attention_heads", "n_head", "num_heads", "n_heads",
              "encoder_attention_heads", "decoder_attention_heads"],
    "kv_heads": ["num_key_value_heads", "num_kv_heads"],
    "ffn": ["intermediate_size", "n_inner", "ffn_dim", "d_ff", "hidden_dim",
            "encoder_ffn_dim", "decoder_ffn_dim"],
    "layers": ["num_hidden_layers", "n_layer", "num_layers", "n_layers",
               "encoder_layers", "decoder_layers", "num_decoder_layers"],
    "positions": ["max_position_embeddings", "n_positions"],
}
# Sizes a config may lack: BLOOM and Falcon fix the MLP at 4 * hidden;
# attention-free models (Mamba, RWKV) have no heads.
_OPTIONAL = {"ffn", "kv_heads", "positions", "heads"}
_TASKS = {
    "causal": transformers.AutoModelForCausalLM,
    "masked": transformers.AutoModelForMaskedLM,
    "seq2seq": transformers.AutoModelForSeq2SeqLM,
}


def _int_field(config, field):
    """The config's integer `field`, or None where it has none or the field
    is a read-only property (derived from others)."""
    value = getattr(config, field, None)
    if not isinstance(value, int) or isinstance(value, bool) or \
            isinstance(getattr(type(config), field, None), property):
        return None
    return value


def _set(config, name, value):
    fields = [f for f in _FIELDS[name] if hasattr(config, f)]
    if not fields and name not in _OPTIONAL:
        raise ValueError("%s has no %s field (%s)"
                         % (type(config).__name__, name, ", ".join(_FIELDS[name])))
    for field in fields:
        setattr(config, field, value)


def set_dropout(config, rate):
    """Sets every rate of `config` that drops something: dropout, attention
    and residual dropout, stochastic depth (`drop_path_rate`), LayerDrop:
    the numeric fields whose name has "drop" in it, and lists of them (one
    per stage: CvT's)."""
    def number(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def like(value):
        # As the field's type where it holds the rate (LeViT's int 0).
        exact = float(rate) == type(value)(rate)
        return type(value)(rate) if exact else float(rate)

    for field, value in config.to_dict().items():
        if "drop" not in field:
            continue
        if number(value):
            setattr(config, field, like(value))
        elif isinstance(value, (list, tuple)) and value and all(map(number, value)):
            setattr(config, field, [like(v) for v in value])


def _build(task, config):
    """The model, with PyTorch's scaled-dot-product attention where the
    class has it, else its own (eager) attention: both are traced op by op
    or kept whole, never an external kernel. Mixture-of-experts layers keep
    the experts implementation transformers picks ("grouped_mm": tokens
    sorted by expert, one grouped GEMM) unless `_experts_implementation`
    is passed ("batched_mm": each token's experts' weights gathered, then
    bmm); "eager" loops over the experts hit (nonzero), shapes a static
    graph cannot hold."""
    for attention in ("sdpa", "eager"):
        config._attn_implementation = attention
        try:
            return _TASKS[task].from_config(config)
        except ValueError as e:
            if attention == "eager" or "attention implementation" not in str(e):
                raise


def lm(model_type="gpt2", task="causal", batch=2, seq=8, vocab=96, hidden=64,
       heads=4, kv_heads=None, ffn=128, layers=2, dropout=0.0, seed=0,
       dtype="float32", **config_fields):
    """A `transformers` `model_type` model for `task` (causal, masked,
    seq2seq) with random weights, and a batch of random tokens with its
    labels: causal LMs learn `input_ids` shifted by one (the model shifts),
    masked LMs every 4th token (the others are -100, ignored), seq2seq
    models the decoder's tokens (`labels`, from which the model makes its
    `decoder_input_ids`). `dtype` ("float32" or "bfloat16") is the
    parameters' and activations' type. Extra keyword arguments set config
    fields."""
    config = transformers.AutoConfig.for_model(model_type)
    _set(config, "vocab", vocab)
    _set(config, "hidden", hidden)
    _set(config, "heads", heads)
    _set(config, "ffn", ffn)
    _set(config, "layers", layers)
    _set(config, "kv_heads", heads if kv_heads is None else kv_heads)
    _set(config, "positions", max(seq, 16))
    # Mixture-of-experts at most 8 experts, top 2, each routed and shared
    # expert no wider than `ffn`: some configs default to hundreds of wide
    # experts (Qwen3-Next's 512 made a 4.7 GB bundle). Config fields given
    # override.
    for field, cap in (("num_experts", 8), ("num_local_experts", 8),
                       ("n_routed_experts", 8), ("num_experts_per_tok", 2),
                       ("moe_intermediate_size", ffn),
                       ("shared_expert_intermediate_size", ffn)):
        value = _int_field(config, field)
        if value is not None and value > cap:
            setattr(config, field, cap)
    # A factorized embedding no wider than the hidden size (MobileBERT's
    # head projects to hidden - embedding_size).
    if isinstance(getattr(config, "embedding_size", None), int) and config.embedding_size > hidden:
        config.embedding_size = hidden // 2
    for field in ("head_dim", "rotary_dim"):  # partial rotary: whole heads
        if _int_field(config, field) is not None:
            setattr(config, field, hidden // heads)
    # Multi-head latent attention (DeepSeek-V2/V3, MiniCPM3, GLM-MoE-DSA...):
    # each head's query/key split into a rotary and a non-rotary half (the
    # rotary half is the config's head_dim), values a whole head wide, the
    # low-rank projections a quarter of the hidden size.
    if isinstance(getattr(config, "qk_rope_head_dim", None), int):
        head = hidden // heads
        for field, value in (("qk_rope_head_dim", head // 2), ("qk_nope_head_dim", head // 2),
                             ("head_dim", head // 2), ("v_head_dim", head),
                             ("kv_lora_rank", hidden // 4), ("q_lora_rank", hidden // 4)):
            if _int_field(config, field) is not None:
                setattr(config, field, value)
    # Special tokens inside the small vocabulary (an embedding's padding_idx
    # must be a row of it).
    for k, field in enumerate(("pad_token_id", "bos_token_id", "eos_token_id",
                              "decoder_start_token_id")):
        if isinstance(getattr(config, field, None), int) and getattr(config, field) >= vocab:
            setattr(config, field, k)
    if dropout is not None:
        set_dropout(config, dropout)
    for field, value in config_fields.items():
        setattr(config, field, value)
    config.use_cache = False

    torch.manual_seed(seed)
    model = _build(task, config).to(getattr(torch, dtype))
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
