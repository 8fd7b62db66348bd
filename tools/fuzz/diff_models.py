#!/usr/bin/env python3
"""Differential check of verlc's model engine against transformers on random configurations: for each trial an
architecture (LLaMA, Mistral, Mixtral, Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE, Gemma, Gemma 2, Gemma 3, Phi-3, Phi,
OLMo 1-3, OLMoE, Granite, Granite MoE, StarCoder2, DeepSeek-V3, GLM-4, GLM-4.5, dots.llm1, Cohere 1-2, StableLM,
GPT-NeoX, SmolLM3, EXAONE 4, Ministral, Seed-OSS, Arcee, Helium, ERNIE 4.5, Hunyuan dense; the classic GPT-2, GPT-BigCode,
GPT-J, CodeGen, OPT, Falcon, BLOOM, MPT, GPT-Neo and Nemotron layouts; the MoE layouts of DeepSeek-V2, Hunyuan, PhiMoE,
ERNIE 4.5, MiniMax-M2, gpt-oss, Llama 4 and FlexOlmo; and the hybrids Qwen3.5,
Qwen3-Next (Gated DeltaNet), LFM2 (short convolutions), Mamba 2, Jamba, Granite 4 (Mamba 2 + MoE)) and random shapes and options (heads and key/value heads, an explicit head_dim, widths, 1-3
layers, rope theta and scaling (linear, dynamic, YaRN, llama3), tied embeddings, biases, activations, sliding windows,
experts and their routing), a random-weight checkpoint with transformers' reference outputs written by
tools/fixtures/make_fixture.py's functions (logits, log-probs, entropies, loss, every gradient, greedy decoding),
then `verlc check` on it (its f32 tolerances; with $DIFF_MODELS_BF16=1 also `--precision bf16`, whose tolerances are
1.5 x PyTorch's own bf16-autocast errors recorded with the reference; with $DIFF_MODELS_CLASSIC=1 the config is first
rewritten in the hub's older layout, rope_theta / rope_scaling at the top, where transformers reads that back to the
same rope, as most released checkpoints ship it; $DIFF_MODELS_ARCH=a,b draws from those model types only). A configuration verlc refuses by name counts apart. Expect a rare
failure of the gradients alone with hidden_act relu: a gate value within rounding of 0 (7e-8 in the one seen) takes
relu's derivative 1 on one side and 0 on the other.

usage: diff_models.py N [SEED] [KEEP_DIR]     (from the repository root; needs torch, transformers, safetensors and
build/verlc; failing checkpoints are kept in KEEP_DIR, default /tmp/diff_models)"""
import json, os, random, shutil, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import torch
import transformers
import make_fixture as mf

N = int(sys.argv[1])
R = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
KEEP = sys.argv[3] if len(sys.argv) > 3 else "/tmp/diff_models"
ARCH = {  # model_type: (config class, model class)
    "llama": ("LlamaConfig", "LlamaForCausalLM"), "mistral": ("MistralConfig", "MistralForCausalLM"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM"), "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"), "gemma": ("GemmaConfig", "GemmaForCausalLM"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"), "phi3": ("Phi3Config", "Phi3ForCausalLM"),
    "phi": ("PhiConfig", "PhiForCausalLM"), "olmo2": ("Olmo2Config", "Olmo2ForCausalLM"),
    "granite": ("GraniteConfig", "GraniteForCausalLM"), "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM"), "glm4": ("Glm4Config", "Glm4ForCausalLM"),
    "cohere": ("CohereConfig", "CohereForCausalLM"), "stablelm": ("StableLmConfig", "StableLmForCausalLM"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM"), "olmoe": ("OlmoeConfig", "OlmoeForCausalLM"),
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM"), "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
    "olmo": ("OlmoConfig", "OlmoForCausalLM"), "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM"),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM"), "cohere2": ("Cohere2Config", "Cohere2ForCausalLM"),
    "ministral": ("MinistralConfig", "MinistralForCausalLM"), "seed_oss": ("SeedOssConfig", "SeedOssForCausalLM"),
    "arcee": ("ArceeConfig", "ArceeForCausalLM"), "helium": ("HeliumConfig", "HeliumForCausalLM"),
    "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM"), "olmo3": ("Olmo3Config", "Olmo3ForCausalLM"),
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM"), "dots1": ("Dots1Config", "Dots1ForCausalLM"),
    "hunyuan_v1_dense": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM"),
    "qwen3_5_text": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM"), "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM"),
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM"), "mamba2": ("Mamba2Config", "Mamba2ForCausalLM"),
    "jamba": ("JambaConfig", "JambaForCausalLM"), "granitemoehybrid": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM"),
    # the classic layouts (each with its own key names and options, drawn by classic_kw)
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"), "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM"),
    "gptj": ("GPTJConfig", "GPTJForCausalLM"), "codegen": ("CodeGenConfig", "CodeGenForCausalLM"),
    "opt": ("OPTConfig", "OPTForCausalLM"), "falcon": ("FalconConfig", "FalconForCausalLM"),
    "bloom": ("BloomConfig", "BloomForCausalLM"), "mpt": ("MptConfig", "MptForCausalLM"),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM"), "nemotron": ("NemotronConfig", "NemotronForCausalLM"),
    # more MoE layouts
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM"), "hunyuan_v1_moe": ("HunYuanMoEV1Config", "HunYuanMoEV1ForCausalLM"),
    "phimoe": ("PhimoeConfig", "PhimoeForCausalLM"), "ernie4_5_moe": ("Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM"),
    "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM"), "gpt_oss": ("GptOssConfig", "GptOssForCausalLM"),
    "llama4_text": ("Llama4TextConfig", "Llama4ForCausalLM"), "flex_olmo": ("FlexOlmoConfig", "FlexOlmoForCausalLM"),
}
CLASSIC = ("gpt2", "gpt_bigcode", "gptj", "codegen", "opt", "falcon", "bloom", "mpt", "gpt_neo", "nemotron")


def classic_kw(arch):
    """a random configuration of a classic layout in its own keys: shapes, norms, biases, activations and the options
    each one has (falcon's three attention layouts, BLOOM's post-norm residuals, OPT's projections and affine-free
    norms, GPT-2's attention scalings, MPT's biases and clip, GPT-Neo's local layers, rope coverage)"""
    heads = R.choice([1, 2, 4, 8])
    hd = R.choice([8, 16])
    hidden, L = heads * hd, R.randint(1, 3)
    act = R.choice(["gelu_new", "gelu", "relu", "gelu_pytorch_tanh", "silu"])
    eps = R.choice([1e-5, 1e-6])
    common = dict(vocab_size=mf.VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if arch in ("gpt2", "gpt_bigcode"):
        kw = dict(common, n_embd=hidden, n_layer=L, n_head=heads, n_inner=R.choice([None, 40, 96]), n_positions=R.choice([64, 128]),
                  activation_function=act, layer_norm_epsilon=eps, scale_attn_weights=R.random() < 0.8,
                  tie_word_embeddings=R.random() < 0.7)
        if arch == "gpt2":
            kw.update(scale_attn_by_inverse_layer_idx=R.random() < 0.3, reorder_and_upcast_attn=R.random() < 0.3)
        else:
            kw["multi_query"] = R.random() < 0.6
        return kw
    if arch in ("gptj", "codegen"):
        return dict(common, n_embd=hidden, n_layer=L, n_head=heads, n_inner=R.choice([None, 40, 96]), n_positions=R.choice([64, 128]),
                    rotary_dim=R.choice([None, hd, hd // 2, 4]), activation_function=act, layer_norm_epsilon=eps,
                    tie_word_embeddings=R.random() < 0.3)
    if arch == "opt":
        return dict(common, hidden_size=hidden, num_hidden_layers=L, num_attention_heads=heads, ffn_dim=R.choice([40, 96]),
                    word_embed_proj_dim=R.choice([hidden, hidden, 16]), do_layer_norm_before=R.random() < 0.7,
                    activation_function=R.choice(["relu", "gelu"]), enable_bias=R.random() < 0.8,
                    layer_norm_elementwise_affine=R.random() < 0.8, max_position_embeddings=R.choice([64, 128]),
                    tie_word_embeddings=R.random() < 0.8)
    if arch == "falcon":
        layout = R.choice(["new", "multi_query", "mha"])
        kv = R.choice([d for d in (1, 2, 4, 8) if heads % d == 0])
        kw = dict(common, hidden_size=hidden, num_hidden_layers=L, num_attention_heads=heads, layer_norm_epsilon=eps,
                  ffn_hidden_size=R.choice([None, 40, 96]), bias=R.random() < 0.5, tie_word_embeddings=R.random() < 0.5,
                  new_decoder_architecture=layout == "new", multi_query=layout == "multi_query",
                  parallel_attn=layout == "new" or R.random() < 0.6, alibi=False, max_position_embeddings=128)
        if layout == "new":
            kw.update(num_kv_heads=kv, num_ln_in_parallel_attn=R.choice([None, 1, 2]))
        if R.random() < 0.3:
            kw["rope_parameters"] = rope(R.choice(["linear", "dynamic"]))
        return kw
    if arch == "bloom":
        return dict(common, hidden_size=hidden, n_layer=L, n_head=heads, layer_norm_epsilon=eps,
                    apply_residual_connection_post_layernorm=R.random() < 0.4, tie_word_embeddings=R.random() < 0.7)
    if arch == "mpt":
        return dict(common, d_model=hidden, n_layers=L, n_heads=heads, expansion_ratio=4, max_seq_len=128,
                    no_bias=R.random() < 0.7, layer_norm_epsilon=eps,
                    attn_config=dict(alibi=True, clip_qkv=R.choice([None, 0.3, 6.0]), alibi_bias_max=8))
    if arch == "gpt_neo":
        types = [R.choice(["global", "local"]) for _ in range(L)]
        return dict(common, hidden_size=hidden, num_layers=L, num_heads=heads, intermediate_size=R.choice([None, 40, 96]),
                    attention_types=[[[t], 1] for t in types], window_size=R.choice([2, 4, 7]), activation_function=act,
                    layer_norm_epsilon=eps, max_position_embeddings=128, tie_word_embeddings=R.random() < 0.7)
    if arch == "nemotron":
        return dict(common, hidden_size=hidden, num_hidden_layers=L, num_attention_heads=heads,
                    num_key_value_heads=R.choice([d for d in (1, 2, 4, 8) if heads % d == 0]), head_dim=hd,
                    intermediate_size=R.choice([40, 96]), hidden_act=R.choice(["relu2", "relu2", "gelu"]), norm_eps=eps,
                    partial_rotary_factor=R.choice([0.5, 1.0, 0.25]), attention_bias=R.random() < 0.3,
                    mlp_bias=R.random() < 0.3, tie_word_embeddings=R.random() < 0.3, max_position_embeddings=128)
    raise KeyError(arch)
POST = {"qwen3_5_text": mf.recurrent_gdn, "qwen3_next": mf.recurrent_gdn}  # as make_fixture's kinds prepare them
PLAIN_HD = ("phi", "gemma2", "olmo2", "granite", "starcoder2", "phi3", "mixtral", "qwen2_moe", "cohere", "stablelm",
            "gpt_neox", "olmoe", "granitemoe", "deepseek_v3", "olmo", "cohere2", "exaone4", "olmo3", "smollm3", "glm4_moe", "dots1", "mamba2", "jamba", "granitemoehybrid", "lfm2")  # (head_dim is hidden / heads there)


def rope(kind):
    theta = R.choice([10000.0, 500000.0, 1e6])
    if kind == "default":
        return {"rope_type": "default", "rope_theta": theta}
    if kind == "linear":
        return {"rope_type": "linear", "factor": R.choice([2.0, 4.0]), "rope_theta": theta}
    if kind == "dynamic":
        return {"rope_type": "dynamic", "factor": R.choice([2.0, 4.0]), "rope_theta": theta}
    if kind == "yarn":
        return {"rope_type": "yarn", "factor": R.choice([2.0, 4.0]), "original_max_position_embeddings": 32,
                "rope_theta": theta}
    return {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32, "rope_theta": theta}


def config(arch):
    heads = R.choice([1, 2, 4, 8])
    kv = R.choice([d for d in (1, 2, 4, 8) if heads % d == 0])
    hd = R.choice([8, 16, 32])
    hidden = R.choice([heads * hd, 32, 48, 64, 96])
    if arch in PLAIN_HD:
        hidden = heads * hd
    kw = dict(vocab_size=mf.VOCAB, hidden_size=hidden, intermediate_size=R.choice([16, 40, 64, 100]),
              num_hidden_layers=R.randint(1, 3), num_attention_heads=heads, num_key_value_heads=kv,
              max_position_embeddings=R.choice([64, 128, 4096]), rms_norm_eps=R.choice([1e-6, 1e-5]),
              tie_word_embeddings=R.random() < 0.3, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if arch not in PLAIN_HD:
        kw["head_dim"] = hd
    if arch in ("llama", "qwen2", "qwen3", "mistral", "granite", "olmo2"):
        kw["rope_parameters"] = rope(R.choice(["default", "default", "linear", "dynamic", "yarn", "llama3"]))
    if arch in ("llama", "granite", "olmo2"):
        kw.update(attention_bias=R.random() < 0.3, mlp_bias=R.random() < 0.2)
    if arch in ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "qwen2_moe", "olmo2", "granite"):
        kw["hidden_act"] = R.choice(["silu", "silu", "gelu_pytorch_tanh", "relu"])
    if arch in ("mistral", "mixtral") and R.random() < 0.5:
        kw["sliding_window"] = R.choice([3, 5, 8])
    if arch in ("qwen2", "qwen3") and R.random() < 0.3:
        kw.update(use_sliding_window=True, sliding_window=R.choice([3, 5]), max_window_layers=R.randint(0, 2))
    if arch in ("mixtral", "qwen2_moe", "qwen3_moe"):
        e = R.choice([2, 4, 8])
        kw.update(num_local_experts=e, num_experts=e, num_experts_per_tok=R.randint(1, min(4, e)),
                  router_aux_loss_coef=0.0, output_router_logits=False)
    if arch in ("qwen2_moe", "qwen3_moe"):
        kw.update(moe_intermediate_size=R.choice([16, 32]), norm_topk_prob=R.random() < 0.5,
                  decoder_sparse_step=R.choice([1, 1, 2]), mlp_only_layers=R.choice([[], [0]]))
    if arch == "qwen2_moe":
        kw["shared_expert_intermediate_size"] = R.choice([16, 48])
    if arch == "gemma":
        kw["hidden_activation"] = R.choice(["gelu_pytorch_tanh", "gelu"])
    if arch == "gemma2":
        kw.update(query_pre_attn_scalar=R.choice([hd, 16]), sliding_window=R.choice([3, 6]),
                  final_logit_softcapping=R.choice([None, 30.0]), attn_logit_softcapping=R.choice([None, 50.0]))
    if arch == "phi":
        kw.update(partial_rotary_factor=R.choice([0.5, 1.0]), qk_layernorm=R.random() < 0.3)
    if arch == "phi3" and R.random() < 0.3:
        kw["partial_rotary_factor"] = 0.5
    if arch == "granite":
        kw.update(embedding_multiplier=R.choice([1.0, 12.0]), residual_multiplier=R.choice([1.0, 0.22]),
                  attention_multiplier=R.choice([1.0, 0.015625]), logits_scaling=R.choice([1.0, 8.0]))
    if arch == "starcoder2":
        kw.update(use_bias=R.random() < 0.7, norm_epsilon=1e-5)
    if arch in ("glm4", "cohere", "stablelm", "gpt_neox", "olmoe", "granitemoe", "gemma3_text"):
        kw["rope_parameters"] = rope(R.choice(["default", "default", "linear"]))
        if R.random() < 0.5 and arch in ("glm4", "stablelm", "gpt_neox"):
            kw["rope_parameters"]["partial_rotary_factor"] = R.choice([0.25, 0.5])
    if arch in ("cohere",):
        kw.update(logit_scale=R.choice([0.0625, 1.0]), use_qk_norm=R.random() < 0.3, layer_norm_eps=1e-5)
    if arch == "stablelm":
        kw.update(use_qkv_bias=R.random() < 0.5, qk_layernorm=R.random() < 0.3, use_parallel_residual=R.random() < 0.3)
    if arch == "gpt_neox":
        kw.update(use_parallel_residual=R.random() < 0.7, attention_bias=R.random() < 0.7)
    if arch in ("olmoe", "granitemoe"):
        e = R.choice([2, 4, 8])
        kw.update(num_experts=e, num_local_experts=e, num_experts_per_tok=R.randint(1, min(4, e)), router_aux_loss_coef=0.0,
                  output_router_logits=False)
    if arch == "olmoe":  # (clip_qkv small enough to bind on these weights)
        kw.update(norm_topk_prob=R.random() < 0.5, clip_qkv=R.choice([None, 8.0, 0.5]))
    if arch == "granitemoe":
        kw.update(embedding_multiplier=R.choice([1.0, 12.0]), residual_multiplier=R.choice([1.0, 0.22]),
                  attention_multiplier=R.choice([1.0, 0.0625]), logits_scaling=R.choice([1.0, 8.0]))
    if arch in ("smollm3", "exaone4", "cohere2", "ministral", "seed_oss", "arcee", "helium", "ernie4_5", "olmo3", "glm4_moe",
                "dots1", "hunyuan_v1_dense"):
        kw["rope_parameters"] = rope(R.choice(["default", "default", "linear", "yarn"]))
    L = kw["num_hidden_layers"]
    if arch in ("exaone4", "cohere2", "ministral", "olmo3"):
        kw.update(sliding_window=R.choice([3, 5]), layer_types=[R.choice(["sliding_attention", "full_attention"]) for _ in range(L)])
    if arch == "smollm3":
        kw.update(no_rope_layers=[R.choice([0, 1]) for _ in range(L)], attention_bias=R.random() < 0.3)
    if arch == "cohere2":
        kw.update(logit_scale=R.choice([0.0625, 1.0]), layer_norm_eps=1e-5)
    if arch == "seed_oss":
        kw.update(attention_bias=R.random() < 0.7, attention_out_bias=R.random() < 0.5, mlp_bias=R.random() < 0.3)
    if arch in ("arcee", "helium"):
        kw.update(attention_bias=R.random() < 0.3, mlp_bias=R.random() < 0.3)
    if arch == "ernie4_5":
        kw.update(use_bias=R.random() < 0.5)
    if arch in ("glm4_moe", "dots1"):
        e = R.choice([4, 8])
        kw.update(moe_intermediate_size=R.choice([16, 24]), n_routed_experts=e, n_shared_experts=R.choice([1, 2]),
                  num_experts_per_tok=R.randint(1, 3), n_group=1, topk_group=1, first_k_dense_replace=R.choice([0, 1]),
                  norm_topk_prob=R.random() < 0.5, routed_scaling_factor=R.choice([1.0, 2.5]))
    if arch == "glm4_moe":
        kw["use_qk_norm"] = R.random() < 0.5
    if arch in ("qwen3_5_text", "qwen3_next"):  # Gated DeltaNet layers beside gated full attention
        kh = R.choice([1, 2, 4])
        kw.update(linear_num_key_heads=kh, linear_num_value_heads=kh * R.choice([1, 2]), linear_key_head_dim=R.choice([8, 16]),
                  linear_value_head_dim=R.choice([8, 16]), linear_conv_kernel_dim=R.choice([2, 3, 4]),
                  layer_types=[R.choice(["linear_attention", "linear_attention", "full_attention"]) for _ in range(L)])
        kw["layer_types"][R.randrange(L)] = "full_attention"  # (transformers' cache needs an attention layer)
        kw["rope_parameters"] = dict(rope("default"), partial_rotary_factor=R.choice([0.25, 0.5, 1.0]))
    if arch == "qwen3_next":
        e = R.choice([2, 4, 8])
        kw.update(moe_intermediate_size=R.choice([16, 32]), shared_expert_intermediate_size=R.choice([16, 48]), num_experts=e,
                  num_experts_per_tok=R.randint(1, min(3, e)), norm_topk_prob=R.random() < 0.5,
                  mlp_only_layers=R.choice([[], [0]]), decoder_sparse_step=1)
    if arch == "lfm2":
        kw.update(layer_types=[R.choice(["conv", "conv", "full_attention"]) for _ in range(L - 1)] + ["full_attention"],
                  conv_L_cache=R.choice([2, 3, 4]),
                  norm_eps=R.choice([1e-5, 1e-6]), block_multiple_of=R.choice([16, 32]), rope_parameters=rope("default"))
    if arch == "mamba2":
        nh = R.choice([2, 4, 8])
        kw.update(num_heads=nh, head_dim=R.choice([8, 16]), n_groups=R.choice([g for g in (1, 2) if nh % g == 0]),
                  state_size=R.choice([4, 8, 16]), conv_kernel=R.choice([2, 4]), expand=2, chunk_size=R.choice([4, 8]))
        kw["hidden_size"] = nh * kw["head_dim"] // 2
    if arch == "jamba":
        kw.update(num_experts=R.choice([2, 4]), num_experts_per_tok=R.choice([1, 2]), expert_layer_period=R.choice([1, 2]),
                  expert_layer_offset=0, attn_layer_period=R.choice([2, 3]), attn_layer_offset=R.choice([0, 1]),
                  mamba_d_state=R.choice([4, 8]), mamba_d_conv=R.choice([2, 4]), mamba_expand=2, mamba_dt_rank=R.choice([4, 6]))
        kw["num_hidden_layers"] = max(L, 3)
    if arch == "granitemoehybrid":
        kw.update(layer_types=[R.choice(["mamba", "mamba", "attention"]) for _ in range(L - 1)] + ["attention"], mamba_n_heads=4,
                  mamba_n_groups=R.choice([1, 2]), mamba_d_state=R.choice([4, 8]), mamba_d_conv=R.choice([2, 4]), mamba_expand=2,
                  num_local_experts=R.choice([2, 4]), num_experts_per_tok=R.choice([1, 2]), shared_intermediate_size=R.choice([16, 48]),
                  embedding_multiplier=R.choice([1.0, 2.0]), residual_multiplier=R.choice([1.0, 0.5]),
                  attention_multiplier=R.choice([1.0, 0.2]), logits_scaling=R.choice([1.0, 1.5]),
                  position_embedding_type=R.choice(["nope", "rope"]), mamba_chunk_size=8)
        kw["hidden_size"] = 64
    if arch == "olmo":
        kw.update(clip_qkv=R.choice([None, 0.5, 8.0]), rope_parameters=rope("default"))
    if arch == "gemma3_text":
        L = kw["num_hidden_layers"]
        kw.update(query_pre_attn_scalar=R.choice([hd, 16]), sliding_window=R.choice([3, 6]),
                  layer_types=[R.choice(["sliding_attention", "full_attention"]) for _ in range(L)],
                  final_logit_softcapping=R.choice([None, 30.0]), attn_logit_softcapping=R.choice([None, 50.0]))
        kw["rope_parameters"] = {"full_attention": rope("default"), "sliding_attention": rope("default")}
    L = kw["num_hidden_layers"]
    if arch in ("hunyuan_v1_moe", "phimoe", "minimax_m2", "gpt_oss", "llama4_text", "flex_olmo"):
        e = R.choice([2, 4, 8])
        kw.update(num_experts=e, num_local_experts=e, num_experts_per_tok=R.randint(1, min(3, e)), moe_topk=R.randint(1, min(3, e)),
                  router_aux_loss_coef=0.0, output_router_logits=False)
    if arch == "hunyuan_v1_moe":
        kw.update(attention_bias=R.random() < 0.3, rope_parameters=rope(R.choice(["default", "dynamic"])))
    if arch == "phimoe":  # (its sparsemixer routes exactly two experts)
        kw.update(num_experts_per_tok=2, num_local_experts=R.choice([4, 6, 8]), attention_bias=R.random() < 0.5,
                  lm_head_bias=R.random() < 0.5, router_jitter_noise=R.choice([0.01, 0.4]), input_jitter_noise=0.0,
                  sliding_window=R.choice([None, 5]))
    if arch == "minimax_m2":
        kw["rope_parameters"] = dict(rope("default"), partial_rotary_factor=R.choice([0.5, 1.0]))
    if arch == "gpt_oss":
        kw.update(sliding_window=R.choice([3, 4]), swiglu_limit=R.choice([7.0, 0.5]),
                  layer_types=[R.choice(["sliding_attention", "full_attention"]) for _ in range(L)])
    if arch == "llama4_text":
        kw.update(intermediate_size_mlp=R.choice([32, 64]), interleave_moe_layer_step=R.choice([1, 2]),
                  attention_chunk_size=R.choice([4, 8192]), floor_scale=R.choice([4, 8192]), attn_scale=R.choice([0.1, 0.5]),
                  use_qk_norm=R.random() < 0.5, attn_temperature_tuning=R.random() < 0.7, no_rope_layer_interval=R.choice([2, 4]),
                  rope_parameters=rope(R.choice(["default", "llama3"])))
    if arch == "flex_olmo":
        kw.update(norm_topk_prob=R.random() < 0.5, rope_parameters=rope("default"))
    if arch == "ernie4_5_moe":
        e = R.choice([4, 8])
        kw.update(moe_num_experts=e, moe_k=R.randint(1, 3), moe_intermediate_size=R.choice([16, 32]),
                  moe_num_shared_experts=R.choice([0, 1, 2]), moe_layer_start_index=R.choice([0, 1]),
                  moe_layer_end_index=R.choice([-1, L - 1]), moe_layer_interval=R.choice([1, 2]), use_bias=R.random() < 0.3,
                  moe_norm_min=R.choice([1e-12, 0.5]), rope_parameters=rope("default"))
    if arch == "deepseek_v2":
        e = R.choice([4, 8])
        g = R.choice([1, 2])
        kw.update(q_lora_rank=R.choice([None, 16]), kv_lora_rank=R.choice([8, 16]), qk_rope_head_dim=R.choice([4, 8]),
                  qk_nope_head_dim=R.choice([8, 16]), v_head_dim=R.choice([8, 16]), n_routed_experts=e,
                  n_shared_experts=R.choice([None, 1, 2]), num_experts_per_tok=R.randint(1, 3), n_group=g,
                  topk_group=R.randint(1, g), topk_method=R.choice(["greedy", "group_limited_greedy"]),
                  first_k_dense_replace=R.choice([0, 1]), moe_intermediate_size=R.choice([16, 24]),
                  routed_scaling_factor=R.choice([1.0, 2.5]), norm_topk_prob=R.random() < 0.5,
                  rope_parameters=rope(R.choice(["default", "yarn"])))
        kw.pop("head_dim", None)
    if arch == "deepseek_v3":
        e = R.choice([4, 8])
        kw.update(q_lora_rank=R.choice([None, 16]), kv_lora_rank=R.choice([8, 16]), qk_rope_head_dim=R.choice([4, 8]),
                  qk_nope_head_dim=R.choice([8, 16]), v_head_dim=R.choice([8, 16]), n_routed_experts=e,
                  n_shared_experts=R.choice([1, 2]), num_experts_per_tok=R.randint(1, 3), n_group=R.choice([1, 2]),
                  topk_group=1, first_k_dense_replace=R.choice([0, 1]), moe_intermediate_size=R.choice([16, 24]),
                  routed_scaling_factor=R.choice([1.0, 2.5]), norm_topk_prob=R.random() < 0.5,
                  rope_parameters=rope(R.choice(["default", "yarn"])), rope_interleave=R.random() < 0.5)
        kw.pop("head_dim", None)
    return kw


def classic_config(out):
    """config.json rewritten in the hub's older layout (rope_theta, rope_scaling and partial_rotary_factor at the top,
    no rope_parameters), as most released checkpoints still ship it, where transformers reads that back to the same
    rope_parameters (checked); False where it would not"""
    path = os.path.join(out, "config.json")
    c = json.load(open(path))
    rp = c.get("rope_parameters")
    if not isinstance(rp, dict) or "rope_type" not in rp:
        return False
    rp = dict(rp)
    c.pop("rope_parameters")
    c["rope_theta"] = rp.pop("rope_theta", 10000.0)
    if "partial_rotary_factor" in rp:
        c["partial_rotary_factor"] = rp.pop("partial_rotary_factor")
    c["rope_scaling"] = rp if rp.get("rope_type") != "default" else None
    want = transformers.AutoConfig.from_pretrained(out).rope_parameters
    json.dump(c, open(path, "w"), indent=2)
    try:
        got = transformers.AutoConfig.from_pretrained(out).rope_parameters
    except Exception:
        return False
    return got == want


def trial(i, tmp):
    only = [a for a in os.environ.get("DIFF_MODELS_ARCH", "").split(",") if a]
    arch = R.choice(only or sorted(ARCH))
    kw = classic_kw(arch) if arch in CLASSIC else config(arch)
    cls, mcls = ARCH[arch]
    seed = R.randint(0, 10 ** 6)
    try:
        torch.manual_seed(seed)
        cfg = getattr(transformers, cls)(**kw)
        cfg._attn_implementation = "eager"
        model = getattr(transformers, mcls)(cfg).float().eval()
        mf.randomise(model, seed)
        if arch in POST:
            POST[arch](model)
        ref = mf.reference(model, lambda m: m, seed)
    except (SystemExit, Exception) as e:  # a configuration transformers refuses, or no well separated greedy run
        return arch, kw, "skip", str(e)[:120]
    out = os.path.join(tmp, f"m{i}")
    mf.save(model, out, ref, arch, "diff_models random configuration")
    if os.environ.get("DIFF_MODELS_CLASSIC") and not classic_config(out):
        return arch, kw, "skip", "no equivalent hub-style config"
    r = subprocess.run(["build/verlc", "check", out], capture_output=True, text=True)
    if r.returncode == 0 and os.environ.get("DIFF_MODELS_BF16"):  # and bf16 matmuls against PyTorch's own bf16 errors
        r = subprocess.run(["build/verlc", "check", "--precision", "bf16", out], capture_output=True, text=True)
    text = (r.stdout + r.stderr).strip()
    if r.returncode == 0:
        return arch, kw, "pass", ""
    if any(w in text for w in ("unsupported", "not supported", "refused", "not built", "is built with", "verlc computes")):
        return arch, kw, "refused", text.splitlines()[-1][:200]
    os.makedirs(KEEP, exist_ok=True)
    dst = os.path.join(KEEP, f"{arch}_{i}")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(out, dst)
    return arch, kw, "fail", "\n      ".join(text.splitlines()[-3:])[:600]


counts, fails = {}, []
with tempfile.TemporaryDirectory() as tmp:
    for i in range(N):
        arch, kw, res, msg = trial(i, tmp)
        counts[res] = counts.get(res, 0) + 1
        if res in ("fail", "refused"):
            fails.append((arch, kw, res, msg))
print(f"{N} random models: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
for arch, kw, res, msg in fails[:10]:
    print(f"  {res} {arch} {json.dumps(kw)[:400]}\n      {msg}")
sys.exit(1 if counts.get("fail") else 0)
