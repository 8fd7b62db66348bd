/* A tiny Qwen2-VL config.json (vision tower of one block) with the Qwen3 tokenizer's special ids, for the image-text
 * RL tests; %d: the vocabulary (the tokenizer's size). */
#ifndef VC_TEST_VL_CFG_H
#define VC_TEST_VL_CFG_H
#define RL_CLI_QWEN2_VL_CFG \
    "{\"architectures\":[\"Qwen2VLForConditionalGeneration\"],\"model_type\":\"qwen2_vl\",\"vocab_size\":%d," \
    "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1," \
    "\"intermediate_size\":128,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000," \
    "\"rope_scaling\":{\"type\":\"mrope\",\"mrope_section\":[4,6,6]},\"hidden_act\":\"silu\"," \
    "\"tie_word_embeddings\":true,\"bos_token_id\":151643,\"eos_token_id\":151645,\"image_token_id\":151655," \
    "\"video_token_id\":151656,\"vision_start_token_id\":151652,\"torch_dtype\":\"float32\"," \
    "\"vision_config\":{\"depth\":1,\"embed_dim\":32,\"num_heads\":2,\"mlp_ratio\":2,\"hidden_size\":64," \
    "\"patch_size\":14,\"spatial_merge_size\":2,\"temporal_patch_size\":2,\"in_chans\":3,\"hidden_act\":\"quick_gelu\"}}"
/* A tiny Qwen3-VL config.json: 16-pixel patches, learned positions, a deepstack merger after block 0, the interleaved
 * M-RoPE; %d: the vocabulary */
#define RL_CLI_QWEN3_VL_CFG \
    "{\"architectures\":[\"Qwen3VLForConditionalGeneration\"],\"model_type\":\"qwen3_vl\",\"image_token_id\":151655," \
    "\"video_token_id\":151656,\"vision_start_token_id\":151652,\"vision_end_token_id\":151653,\"tie_word_embeddings\":true," \
    "\"bos_token_id\":151643,\"eos_token_id\":151645,\"text_config\":{\"model_type\":\"qwen3_vl_text\",\"vocab_size\":%d," \
    "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32," \
    "\"intermediate_size\":128,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6,\"hidden_act\":\"silu\"," \
    "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1000000,\"mrope_section\":[4,6,6]}}," \
    "\"vision_config\":{\"depth\":2,\"hidden_size\":32,\"num_heads\":2,\"intermediate_size\":64,\"out_hidden_size\":64," \
    "\"patch_size\":16,\"spatial_merge_size\":2,\"temporal_patch_size\":2,\"in_channels\":3,\"num_position_embeddings\":16," \
    "\"deepstack_visual_indexes\":[0],\"hidden_act\":\"gelu_pytorch_tanh\"}}"
/* A tiny Gemma 3 config.json: the SigLIP tower on 56-pixel images pooled to 4 tokens, Gemma 3's text decoder (a
 * sliding layer of a window of 4, then a full one) whose attention is bidirectional within each image's tokens; its
 * image token and begin / end of image tokens the Qwen3 tokenizer's <|image_pad|>, <|vision_start|> and
 * <|vision_end|> (rl_cli_vl_model renames them); %d: the vocabulary */
#define RL_CLI_GEMMA3_CFG \
    "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"model_type\":\"gemma3\",\"image_token_index\":151655," \
    "\"boi_token_index\":151652,\"eoi_token_index\":151653,\"mm_tokens_per_image\":4,\"tie_word_embeddings\":true," \
    "\"text_config\":{\"model_type\":\"gemma3_text\",\"vocab_size\":%d,\"hidden_size\":64,\"intermediate_size\":128," \
    "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32," \
    "\"query_pre_attn_scalar\":32,\"max_position_embeddings\":4096,\"sliding_window\":4,\"rms_norm_eps\":1e-6," \
    "\"layer_types\":[\"sliding_attention\",\"full_attention\"],\"hidden_activation\":\"gelu_pytorch_tanh\"," \
    "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0}," \
    "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}},\"bos_token_id\":151643," \
    "\"eos_token_id\":151645,\"pad_token_id\":0}," \
    "\"vision_config\":{\"model_type\":\"siglip_vision_model\",\"hidden_size\":32,\"intermediate_size\":48," \
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"image_size\":56,\"patch_size\":14," \
    "\"layer_norm_eps\":1e-6,\"vision_use_head\":false}}"
/* A tiny Gemma 4 config.json: its tower on 4-pixel patches pooled 3 x 3 (clipped linears, standardization, 2-D rope),
 * Gemma 4's text decoder (a sliding layer of a window of 4, then a full one; image tokens attending both ways in the
 * sliding one); its image, begin- and end-of-image tokens the Qwen3 tokenizer's <|image_pad|>, <|vision_start|> and
 * <|vision_end|> (renamed <|image|>, <|image> and <image|> by rl_cli_vl_model); %d: the vocabulary */
#define RL_CLI_GEMMA4_CFG \
    "{\"architectures\":[\"Gemma4ForConditionalGeneration\"],\"model_type\":\"gemma4\",\"image_token_id\":151655," \
    "\"boi_token_id\":151652,\"eoi_token_id\":151653,\"tie_word_embeddings\":true,\"text_config\":{" \
    "\"model_type\":\"gemma4_text\",\"vocab_size\":%d,\"hidden_size\":64,\"intermediate_size\":128," \
    "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32," \
    "\"max_position_embeddings\":4096,\"sliding_window\":4,\"rms_norm_eps\":1e-6,\"hidden_size_per_layer_input\":0," \
    "\"layer_types\":[\"sliding_attention\",\"full_attention\"],\"hidden_activation\":\"gelu_pytorch_tanh\"," \
    "\"use_bidirectional_attention\":\"vision\",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\"," \
    "\"rope_theta\":1000000.0},\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}," \
    "\"bos_token_id\":151643,\"eos_token_id\":151645,\"pad_token_id\":0}," \
    "\"vision_config\":{\"model_type\":\"gemma4_vision\",\"hidden_size\":32,\"intermediate_size\":48," \
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":16,\"patch_size\":4," \
    "\"pooling_kernel_size\":3,\"position_embedding_size\":256,\"use_clipped_linears\":true,\"standardize\":true}}"
/* A tiny Mistral 3 config.json: Pixtral's tower on 4-pixel patches merged 2 x 2 beside a Mistral text decoder; its
 * image token the Qwen3 tokenizer's <|image_pad|> (renamed [IMG], and <|vision_start|> / <|vision_end|> [IMG_BREAK] /
 * [IMG_END], by rl_cli_vl_model); %d: the vocabulary */
#define RL_CLI_MISTRAL3_CFG \
    "{\"architectures\":[\"Mistral3ForConditionalGeneration\"],\"model_type\":\"mistral3\",\"image_token_index\":151655," \
    "\"spatial_merge_size\":2,\"multimodal_projector_bias\":false,\"tie_word_embeddings\":true,\"text_config\":{" \
    "\"model_type\":\"mistral\",\"vocab_size\":%d,\"hidden_size\":64,\"intermediate_size\":128," \
    "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32," \
    "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"rope_theta\":1000000.0,\"hidden_act\":\"silu\"," \
    "\"bos_token_id\":151643,\"eos_token_id\":151645},\"vision_config\":{\"model_type\":\"pixtral\"," \
    "\"hidden_size\":32,\"intermediate_size\":48,\"num_hidden_layers\":1,\"num_attention_heads\":2," \
    "\"patch_size\":4,\"image_size\":64,\"hidden_act\":\"silu\",\"rope_theta\":10000.0}}"
/* A tiny InternVL config.json: InternViT's layout on 56-pixel tiles (4 x 4 patches behind a class token, pixel-shuffled
 * to 4 tokens a tile) beside a Qwen2 text decoder; its image token the Qwen3 tokenizer's <|image_pad|> (renamed
 * <IMG_CONTEXT>, and <|vision_start|> / <|vision_end|> <img> / </img>, by rl_cli_vl_model); %d: the vocabulary */
#define RL_CLI_INTERNVL_CFG \
    "{\"architectures\":[\"InternVLForConditionalGeneration\"],\"model_type\":\"internvl\",\"image_token_id\":151655," \
    "\"downsample_ratio\":0.5,\"tie_word_embeddings\":true,\"text_config\":{\"model_type\":\"qwen2\",\"vocab_size\":%d," \
    "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1," \
    "\"intermediate_size\":128,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0," \
    "\"hidden_act\":\"silu\",\"bos_token_id\":151643,\"eos_token_id\":151645}," \
    "\"vision_config\":{\"model_type\":\"internvl_vision\",\"hidden_size\":32,\"intermediate_size\":48," \
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"image_size\":56,\"patch_size\":14,\"attention_bias\":true}}"
#endif
