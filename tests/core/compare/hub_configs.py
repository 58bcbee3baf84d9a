"""config.json texts of named models, as the Hugging Face hub publishes them (or, for GPT-3,
as its paper gives the shape, in GPT-2's names), for the architecture ledger's tests."""

# A Llama-like config.json as the hub writes one (Llama 3.2 1B's shape), with the keys a
# ledger does not read.
LLAMA_1B = """{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
}"""
# GPT-2 small's config.json (openai-community/gpt2), as published.
GPT2 = """{
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_layer": 12,
  "n_positions": 1024,
  "resid_pdrop": 0.1,
  "vocab_size": 50257
}"""
# GPT-3 175B (Brown et al. 2020; the row of Korthikanti et al. 2022's tables), in GPT-2's names:
# h = 12288, a = 96, L = 96, s = 2048, GPT-2's vocabulary, dropout on.
GPT3_175B = """{
  "model_type": "gpt2",
  "n_embd": 12288,
  "n_head": 96,
  "n_layer": 96,
  "n_positions": 2048,
  "vocab_size": 50257,
  "attn_pdrop": 0.1,
  "embd_pdrop": 0.1,
  "resid_pdrop": 0.1
}"""
