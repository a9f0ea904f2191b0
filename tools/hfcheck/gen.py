#!/usr/bin/env python3
"""Conformance fixtures: tiny random checkpoints and what transformers computes on them.

For each entry of FIXTURES this builds a randomly initialised transformers model
(XxxConfig + XxxForCausalLM, seeded), saves it with save_pretrained (safetensors, in
the fixture's stored dtype) and writes, from that saved checkpoint reloaded in
float32 (eager attention):

  golden.json   prompt token ids, 16 greedy tokens (generate, do_sample=False,
                use_cache=True), the checks below and the versions used
  logits.f32    the logits of every position of prompt + greedy[:-1] in one
                forward pass: rows x vocab float32, little-endian, row-major

Row i predicts token i+1: rows [0, P) are the prompt's positions, row P-1+j
predicts greedy token j. No tokenizer: token ids in, logits out.

Run where torch and transformers are installed (the GPU machine; CPU torch):
    python3 tools/hfcheck/gen.py OUTDIR [NAME...]
The fixtures are committed under internal/hfcheck/testdata (see README.md).
"""

import json
import math
import os
import shutil
import sys
import traceback

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

VOCAB = 256
PROMPT = 48  # longer than every sliding window below
GEN = 16
LAYERS = 2
WIDE_WINDOW = 1 << 20  # a sliding window no sequence here reaches

# Init scales: linear weights std LINEAR_GAIN/sqrt(fan_in), so that activations keep
# their size through the layers; the LM head larger so that logits are far from flat
# (std about 2); norm weights 1 + N(0, NORM_STD) (Gemma stores w of (1 + w): N(0,
# NORM_STD)); biases N(0, BIAS_STD). Tied embeddings take the LM head's scale (at
# EMBED_STD the logits of a tied model reach 70 and greedy decoding repeats one token).
LINEAR_GAIN = 0.7
HEAD_GAIN = 2.0
# A mixture of experts' router (mlp.gate): logits of std about ROUTER_GAIN, so that the
# top-k choice of most tokens is clear of the KV formats' noise, as trained routers'
# mostly are. At LINEAR_GAIN int4 KV flipped 15 of qwen3moe's 126 routes and moved a
# row of logits by 0.536 (its bound 0.54); the dense and fp16 checks hold routing exact.
ROUTER_GAIN = 3.0
EMBED_STD = 1.0
NORM_STD = 0.1
BIAS_STD = 0.1

COMMON = dict(vocab_size=VOCAB, num_hidden_layers=LAYERS, max_position_embeddings=256,
              bos_token_id=None, eos_token_id=None, pad_token_id=None)

# name, config class, model class, stored dtype, supported by bitdecode today, config.
FIXTURES = [
    # Llama, GQA group 3 (6 query heads over 2 KV heads), explicit head_dim 64
    # (transformers 5.17 still wants hidden_size divisible by the heads).
    ("llama-gqa3-d64-bf16", "LlamaConfig", "LlamaForCausalLM", "bfloat16", True,
     dict(hidden_size=48, intermediate_size=32, num_attention_heads=6, num_key_value_heads=2,
          head_dim=64, rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          tie_word_embeddings=False)),
    # Llama 3.1-style: head_dim 128 given explicitly (not hidden/heads), llama3 RoPE
    # scaling with thresholds inside the spectrum, attention and MLP biases, fp16.
    ("llama3-d128-bias-fp16", "LlamaConfig", "LlamaForCausalLM", "float16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=128, rms_norm_eps=1e-5, attention_bias=True, mlp_bias=True,
          rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                               high_freq_factor=4.0, original_max_position_embeddings=256),
          tie_word_embeddings=False)),
    # Llama with linear RoPE scaling, head_dim from hidden/heads (one head), tied
    # embeddings, stored in float32.
    ("llama-linear-tied-fp32", "LlamaConfig", "LlamaForCausalLM", "float32", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=1, num_key_value_heads=1,
          rms_norm_eps=1e-6, rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=4.0),
          tie_word_embeddings=True)),
    # Mistral with a sliding window (16) shorter than the prompt.
    ("mistral-swa16-bf16", "MistralConfig", "MistralForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-5, sliding_window=16,
          rope_parameters=dict(rope_type="default", rope_theta=1000000.0), tie_word_embeddings=False)),
    # Qwen2: q/k/v biases, tied embeddings, GQA group 7 (7 heads over 1 KV head).
    ("qwen2-gqa7-tied-bf16", "Qwen2Config", "Qwen2ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=7, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
          tie_word_embeddings=True, use_sliding_window=False)),
    # Qwen2 with use_sliding_window: layers from max_window_layers on slide.
    ("qwen2-swa-fp16", "Qwen2Config", "Qwen2ForCausalLM", "float16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          tie_word_embeddings=True, use_sliding_window=True, sliding_window=16, max_window_layers=1)),
    # Qwen3: q/k norms, explicit head_dim 128, MQA with 5 query heads.
    ("qwen3-mqa5-d128-bf16", "Qwen3Config", "Qwen3ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=5, num_key_value_heads=1,
          head_dim=128, rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
          tie_word_embeddings=True, attention_bias=False, use_sliding_window=False)),
    # Families bitdecode does not run yet (model's hfUnsupported list).
    # Phi-3: fused qkv_proj and gate_up_proj; head_dim 96 (Phi-3-mini's).
    ("phi3-d96-bf16", "Phi3Config", "Phi3ForCausalLM", "bfloat16", False,
     dict(hidden_size=96, intermediate_size=32, num_attention_heads=1, num_key_value_heads=1,
          rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          tie_word_embeddings=False, sliding_window=None)),
    # Phi-3 with GQA (2 heads over 1 KV head), head_dim 64.
    ("phi3-gqa2-d64-bf16", "Phi3Config", "Phi3ForCausalLM", "bfloat16", False,
     dict(hidden_size=128, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          tie_word_embeddings=False, sliding_window=None)),
    # Gemma: (1 + w) RMSNorm, embeddings scaled by sqrt(hidden), GeGLU, tied.
    ("gemma-mqa-d64-bf16", "GemmaConfig", "GemmaForCausalLM", "bfloat16", False,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          tie_word_embeddings=True)),
    # Gemma 2: logit soft-capping, sandwich norms, alternating sliding layers.
    ("gemma2-swa16-bf16", "Gemma2Config", "Gemma2ForCausalLM", "bfloat16", False,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          sliding_window=16, query_pre_attn_scalar=64, tie_word_embeddings=True)),
    # Phi-4-mini's partial rotary embeddings: head_dim 128 (hidden/heads), factor
    # 0.75 (96 dimensions rotated, 32 passed through), GQA 2 heads over 1.
    ("phi3-partial075-gqa2-d128-bf16", "Phi3Config", "Phi3ForCausalLM", "bfloat16", True,
     dict(hidden_size=256, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-5, partial_rotary_factor=0.75,
          rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.75),
          tie_word_embeddings=False, sliding_window=None)),
    # The same with longrope (Phi-4-mini's RoPE): 48 = R/2 factors; original context
    # 128 > the 63 positions, so the short factors apply in every pass (transformers
    # picks per pass, our chunked prefill too), with attention factor
    # sqrt(1 + ln 2 / ln 128) on the rotated dimensions only.
    ("phi3-partial075-longrope-d128-bf16", "Phi3Config", "Phi3ForCausalLM", "bfloat16", True,
     dict(hidden_size=256, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-5, partial_rotary_factor=0.75, original_max_position_embeddings=128,
          rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=0.75,
                               original_max_position_embeddings=128,
                               short_factor=[1.0 + 0.05 * i for i in range(48)],
                               long_factor=[1.0 + 0.5 * i for i in range(48)]),
          tie_word_embeddings=False, sliding_window=None)),
    # Granite: Llama with four multipliers. granite-3.x's embedding (12 there) and
    # residual multipliers, attention_multiplier 1/D (not 1/sqrt(D)) as granite-3.x's;
    # logits_scaling 2 (16 there) keeps these tiny logits far from flat.
    ("granite-gqa2-d64-bf16", "GraniteConfig", "GraniteForCausalLM", "bfloat16", True,
     dict(hidden_size=128, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          embedding_multiplier=6.0, attention_multiplier=1.0 / 64, residual_multiplier=0.22,
          logits_scaling=2.0, tie_word_embeddings=False)),
    # Granite with attention and MLP biases, tied embeddings, fp16, a softmax scale
    # above 1/sqrt(D) and logits_scaling below 1.
    ("granite-bias-tied-fp16", "GraniteConfig", "GraniteForCausalLM", "float16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=1, num_key_value_heads=1,
          rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          attention_bias=True, mlp_bias=True, embedding_multiplier=2.0, attention_multiplier=0.25,
          residual_multiplier=0.5, logits_scaling=0.5, tie_word_embeddings=True)),
    # OLMo 2: post-norm blocks, q_norm/k_norm over the whole projections; GQA 2 over 1.
    ("olmo2-gqa2-d64-bf16", "Olmo2Config", "Olmo2ForCausalLM", "bfloat16", True,
     dict(hidden_size=128, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=500000.0),
          tie_word_embeddings=False)),
    # OLMo 2 with attention biases, MHA, tied embeddings, float32.
    ("olmo2-bias-tied-fp32", "Olmo2Config", "Olmo2ForCausalLM", "float32", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=1, num_key_value_heads=1,
          rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=10000.0),
          attention_bias=True, tie_word_embeddings=True)),
    # Gemma 3 text: a sliding layer (window 16 < the prompt) and a global one, each with
    # its RoPE (local base 10000; global base 1e6 with linear scaling 2, as the 4b+ have),
    # per-head q/k norms (1 + w), four norms a layer, query_pre_attn_scalar 32 != head_dim.
    # transformers 5's nested rope_parameters.
    ("gemma3-swa16-qpas32-bf16", "Gemma3TextConfig", "Gemma3ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-6, sliding_window=16, query_pre_attn_scalar=32,
          layer_types=["sliding_attention", "full_attention"],
          rope_parameters=dict(full_attention=dict(rope_type="linear", factor=2.0, rope_theta=1000000.0),
                               sliding_attention=dict(rope_type="default", rope_theta=10000.0)),
          tie_word_embeddings=True)),
    # The same family as gemma-3-1b's config.json spells it (transformers 4.5x): rope_theta,
    # rope_local_base_freq, rope_scaling null, sliding_window_pattern; query_pre_attn_scalar
    # = head_dim; GQA 4 over 2, head_dim 32; the global layer first.
    ("gemma3-legacy-gqa2-d32-bf16", "Gemma3TextConfig", "Gemma3ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
          head_dim=32, rms_norm_eps=1e-6, sliding_window=16, query_pre_attn_scalar=32,
          rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=None,
          layer_types=["full_attention", "sliding_attention"], tie_word_embeddings=True)),
    # Mixtral: a sparse MoE block in every layer, 8 experts, top-2 (softmax, top-k,
    # renormalised); GQA 3 (6 heads over 2), head_dim 64.
    ("mixtral-e8top2-gqa3-bf16", "MixtralConfig", "MixtralForCausalLM", "bfloat16", True,
     dict(hidden_size=48, intermediate_size=32, num_attention_heads=6, num_key_value_heads=2,
          head_dim=64, rms_norm_eps=1e-5, num_local_experts=8, num_experts_per_tok=2,
          rope_parameters=dict(rope_type="default", rope_theta=1000000.0), sliding_window=None,
          tie_word_embeddings=False)),
    # Qwen2-MoE (Qwen1.5-MoE): 4 experts, top-2 without renormalising (norm_topk_prob
    # false), a shared expert behind a sigmoid gate, q/k/v biases; layer 1 a dense MLP
    # (mlp_only_layers) of its own width; fp16.
    ("qwen2moe-e4top2-shared-fp16", "Qwen2MoeConfig", "Qwen2MoeForCausalLM", "float16", True,
     dict(hidden_size=128, intermediate_size=40, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-6, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
          moe_intermediate_size=32, shared_expert_intermediate_size=48, decoder_sparse_step=1,
          mlp_only_layers=[1], rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
          use_sliding_window=False, tie_word_embeddings=False)),
    # Qwen3-MoE (Qwen3-30B-A3B's shape in small): q/k norms, 8 experts, top-2
    # renormalised, GQA 3 (6 heads over 2), explicit head_dim 128, tied embeddings.
    ("qwen3moe-e8top2-gqa3-d128-bf16", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", "bfloat16", True,
     dict(hidden_size=48, intermediate_size=64, num_attention_heads=6, num_key_value_heads=2,
          head_dim=128, rms_norm_eps=1e-6, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
          moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[],
          rope_parameters=dict(rope_type="default", rope_theta=1000000.0), attention_bias=False,
          use_sliding_window=False, tie_word_embeddings=True)),
    # YaRN RoPE (the rule Qwen2.5's and Qwen3's model cards add to config.json for
    # long contexts, OLMo 3's and SmolLM3's): inverse frequencies blended between
    # extrapolation and interpolation by factor over a ramp between beta_fast and
    # beta_slow rotations of the original context; cos and sin scaled by the attention
    # factor (0.1 ln factor + 1 by default). Qwen3 shape, GQA 2, head_dim 128.
    ("qwen3-yarn-gqa2-d128-bf16", "Qwen3Config", "Qwen3ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
          head_dim=128, rms_norm_eps=1e-6,
          rope_parameters=dict(rope_type="yarn", rope_theta=1000000.0, factor=4.0,
                               original_max_position_embeddings=64),
          tie_word_embeddings=True, attention_bias=False, use_sliding_window=False)),
    # YaRN with DeepSeek's mscale and mscale_all_dim (the attention factor their
    # ratio), beta_fast and beta_slow given, fp16, Llama with head_dim 64.
    ("llama-yarn-mscale-d64-fp16", "LlamaConfig", "LlamaForCausalLM", "float16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-5,
          rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=8.0, beta_fast=16.0,
                               beta_slow=2.0, mscale=1.0, mscale_all_dim=0.5,
                               original_max_position_embeddings=32),
          tie_word_embeddings=False)),
    # YaRN with the attention factor given and truncate false (gpt-oss's spelling), on
    # Qwen2 with biases, MQA.
    ("qwen2-yarn-af-notrunc-bf16", "Qwen2Config", "Qwen2ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, rms_norm_eps=1e-6,
          rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=2.0, attention_factor=1.25,
                               truncate=False, original_max_position_embeddings=128),
          tie_word_embeddings=False, use_sliding_window=False)),
    # SmolLM3: Llama with NoPE layers (no_rope_layers[i] = 0: layer i applies no RoPE).
    ("smollm3-nope-gqa2-bf16", "SmolLM3Config", "SmolLM3ForCausalLM", "bfloat16", True,
     dict(hidden_size=128, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=5000000.0),
          no_rope_layers=[1, 0], use_sliding_window=False, tie_word_embeddings=True)),
    # OLMo 3: OLMo 2's post-norm blocks and whole-projection q/k norms, with sliding
    # layers (window 16 < the prompt) beside full ones (layer_types), each kind with
    # its RoPE (rope_parameters by layer type): the full layers' yarn-scaled, as
    # OLMo 3's long-context checkpoints have them.
    ("olmo3-swa16-yarn-gqa2-bf16", "Olmo3Config", "Olmo3ForCausalLM", "bfloat16", True,
     dict(hidden_size=128, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
          rms_norm_eps=1e-6,
          rope_parameters=dict(full_attention=dict(rope_type="yarn", rope_theta=500000.0, factor=4.0,
                                                   original_max_position_embeddings=32),
                               sliding_attention=dict(rope_type="default", rope_theta=500000.0)),
          sliding_window=16, layer_types=["sliding_attention", "full_attention"],
          tie_word_embeddings=False)),
    # Seed-OSS: Llama with q/k/v biases but none on o_proj (attention_out_bias).
    ("seedoss-bias-gqa2-bf16", "SeedOssConfig", "SeedOssForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
          head_dim=64, rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=10000000.0),
          attention_bias=True, attention_out_bias=False, mlp_bias=False, tie_word_embeddings=False)),
    # Multimodal checkpoints whose text model bitdecode runs (the vision tower and
    # projector ignored): Gemma 3 4B-27B (Gemma3ForConditionalGeneration) and Mistral
    # Small 3.1/3.2 (Mistral3ForConditionalGeneration). text_config takes COMMON; tiny
    # vision towers; the image tokens out of the vocabulary (random prompts never
    # hold them). The reference is the conditional model run on token ids alone.
    ("gemma3mm-swa16-gqa2-bf16", "Gemma3Config", "Gemma3ForConditionalGeneration", "bfloat16", True,
     dict(text_config=dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=64, rms_norm_eps=1e-6, sliding_window=16, query_pre_attn_scalar=64,
                           layer_types=["sliding_attention", "full_attention"],
                           rope_parameters=dict(full_attention=dict(rope_type="linear", factor=8.0, rope_theta=1000000.0),
                                                sliding_attention=dict(rope_type="default", rope_theta=10000.0)),
                           tie_word_embeddings=True),
          vision_config=dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=1,
                             image_size=28, patch_size=14),
          mm_tokens_per_image=4, image_token_index=1000, boi_token_index=1001, eoi_token_index=1002)),
    ("mistral3mm-gqa2-d128-bf16", "Mistral3Config", "Mistral3ForConditionalGeneration", "bfloat16", True,
     dict(text_config=dict(model_type="mistral", hidden_size=64, intermediate_size=32, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=128, rms_norm_eps=1e-5, sliding_window=None,
                           rope_parameters=dict(rope_type="default", rope_theta=1000000000.0),
                           tie_word_embeddings=False),
          vision_config=dict(model_type="pixtral", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                             num_attention_heads=1, head_dim=16, image_size=28, patch_size=14),
          image_token_index=1000, spatial_merge_size=1, projector_hidden_act="gelu",
          multimodal_projector_bias=False)),
    # Qwen2.5-VL and Qwen3-VL: their text models (Qwen2's and Qwen3's decoders) with
    # multimodal RoPE, which on text alone (all three position components equal) is
    # 1-D RoPE; tiny vision towers.
    ("qwen25vl-gqa2-bf16", "Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration", "bfloat16", True,
     dict(text_config=dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
                           rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=1000000.0,
                                                                   mrope_section=[2, 3, 3]),
                           tie_word_embeddings=False, use_sliding_window=False),
          vision_config=dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=1, out_hidden_size=64,
                             patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                             fullatt_block_indexes=[0]),
          image_token_id=1000, video_token_id=1001, vision_start_token_id=1002, vision_end_token_id=1003)),
    ("qwen3vl-gqa2-d64-bf16", "Qwen3VLConfig", "Qwen3VLForConditionalGeneration", "bfloat16", True,
     dict(text_config=dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=64, rms_norm_eps=1e-6,
                           rope_parameters=dict(rope_type="default", rope_theta=5000000.0, mrope_section=[12, 10, 10],
                                                mrope_interleaved=True),
                           tie_word_embeddings=False),
          vision_config=dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=1, out_hidden_size=64,
                             patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                             deepstack_visual_indexes=[0]),
          image_token_id=1000, video_token_id=1001, vision_start_token_id=1002, vision_end_token_id=1003,
          tie_word_embeddings=False)),
    # GLM-4 (0414): four norms a layer as Gemma 3's (named post_self_attn_layernorm,
    # post_attention_layernorm before the MLP, post_mlp_layernorm), gate_up_proj
    # fused, q/k/v biases, RoPE on interleaved pairs of half of each head
    # (partial_rotary_factor 0.5).
    ("glm4-partial-gqa2-bf16", "Glm4Config", "Glm4ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
          rms_norm_eps=1e-5, attention_bias=True, partial_rotary_factor=0.5,
          rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5),
          tie_word_embeddings=False)),
    # EXAONE 4.0: OLMo 2's post-norm blocks, per-head q/k norms, a sliding layer with
    # RoPE (window 16) and a global one without (NoPE on the global layers).
    ("exaone4-swa16-nope-gqa2-bf16", "Exaone4Config", "Exaone4ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
          rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
          sliding_window=16, layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=False)),
    # ERNIE 4.5 (0.3B's family): biases on every projection (use_bias), RoPE on the
    # interleaved pairs of the whole head, tied embeddings.
    ("ernie45-bias-gqa2-bf16", "Ernie4_5Config", "Ernie4_5ForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
          rms_norm_eps=1e-5, use_bias=True, rope_parameters=dict(rope_type="default", rope_theta=500000.0),
          tie_word_embeddings=True)),
    # Helium (Kyutai): Llama with RoPE on interleaved pairs, q/k/v and MLP biases, none on o
    # (whose input HeliumAttention sizes by hidden_size: heads·head_dim = hidden).
    ("helium-bias-gqa2-bf16", "HeliumConfig", "HeliumForCausalLM", "bfloat16", True,
     dict(hidden_size=128, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
          rms_norm_eps=1e-6, attention_bias=True, mlp_bias=True,
          rope_parameters=dict(rope_type="default", rope_theta=100000.0), tie_word_embeddings=False)),
    # Ministral: Mistral with layer_types (a sliding layer, window 16, and a full one)
    # and RoPE by layer type.
    ("ministral-swa16-gqa2-bf16", "MinistralConfig", "MinistralForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
          rms_norm_eps=1e-5, sliding_window=16, layer_types=["sliding_attention", "full_attention"],
          tie_word_embeddings=False)),
    # CWM (Meta's Code World Model): Llama 3 with full and sliding layers (window 16),
    # llama3 RoPE scaling, no biases.
    ("cwm-swa16-gqa2-bf16", "CwmConfig", "CwmForCausalLM", "bfloat16", True,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
          rms_norm_eps=1e-5, sliding_window=16, layer_types=["full_attention", "sliding_attention"],
          rope_parameters=dict(rope_type="llama3", rope_theta=1000000.0, factor=16.0, high_freq_factor=4.0,
                               low_freq_factor=1.0, original_max_position_embeddings=64),
          bos_token_id=1001, eos_token_id=[1002], tie_word_embeddings=False)),  # outside the vocabulary
    # SmolLM3 with use_sliding_window: its NoPE layer slides (window 16 < the prompt).
    ("smollm3-nope-swa16-bf16", "SmolLM3Config", "SmolLM3ForCausalLM", "bfloat16", True,
     dict(hidden_size=128, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
          rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=2000000.0),
          no_rope_layers=[1, 0], use_sliding_window=True, sliding_window=16, tie_word_embeddings=False)),
]

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def log(*a):
    print(*a, flush=True)


def init_weights(model, seed, gemma_norm):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith(".bias"):
                p.copy_(BIAS_STD * n)
            elif p.dim() == 1:  # a norm's weight
                p.copy_((0.0 if gemma_norm else 1.0) + NORM_STD * n)
            elif "embed_tokens" in name:
                tcfg = getattr(model.config, "text_config", None) or model.config
                tied = getattr(tcfg, "tie_word_embeddings", False)
                p.copy_((HEAD_GAIN / math.sqrt(p.shape[1]) if tied else EMBED_STD) * n)
            elif name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight"):
                p.copy_(ROUTER_GAIN / math.sqrt(p.shape[-1]) * n)
            elif "lm_head" in name:
                p.copy_(HEAD_GAIN / math.sqrt(p.shape[1]) * n)
            else:  # fan_in is the last dimension (2-D linear weights; 3-D fused experts)
                p.copy_(LINEAR_GAIN / math.sqrt(p.shape[-1]) * n)


def load_ref(d, attn, cls=None, **kw):
    cls = getattr(transformers, cls) if cls else AutoModelForCausalLM
    m = cls.from_pretrained(d, dtype=torch.float32, attn_implementation=attn, **kw)
    m.eval()
    return m


@torch.no_grad()
def logits_of(m, ids):
    return m(input_ids=ids, use_cache=False).logits[0].float()


def gen_one(out, idx, name, cfg_cls, model_cls, dtype, supported, kw):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    seed = 1000 + idx
    torch.manual_seed(seed)
    if "text_config" in kw:  # a multimodal model: COMMON is its text model's
        kw = dict(kw, text_config={**COMMON, **kw["text_config"]})
        cfg = getattr(transformers, cfg_cls)(**kw)
    else:  # the fixture's own keys over COMMON's (CwmConfig wants integer special tokens)
        cfg = getattr(transformers, cfg_cls)(**{**COMMON, **kw})
    tcfg = getattr(cfg, "text_config", None) or cfg
    import inspect
    known = set(inspect.signature(getattr(transformers, cfg_cls).__init__).parameters)
    unknown = sorted(k for k in kw if k not in known)
    if unknown:  # taken through **kwargs: the base class's, or ignored if misspelled
        log(f"{name}: {cfg_cls}.__init__ does not name {unknown}")
    model = getattr(transformers, model_cls)(cfg).float()
    init_weights(model, seed, cfg_cls.startswith("Gemma"))
    notes = {}
    lm = getattr(model.model, "language_model", model.model)  # the text model
    attn0 = lm.layers[0].self_attn
    notes["head_dim_used"] = int(getattr(attn0, "head_dim", -1))
    if "head_dim" in kw and notes["head_dim_used"] != kw["head_dim"]:
        raise RuntimeError(f"{name}: transformers used head_dim {notes['head_dim_used']}, not the config's {kw['head_dim']}")
    notes["layer_types"] = list(getattr(tcfg, "layer_types", None) or [])
    model = model.to(DTYPES[dtype])
    model.save_pretrained(d)
    files = sorted(os.listdir(d))
    log(f"{name}: saved {files}")
    with open(os.path.join(d, "config.json")) as f:
        saved_cfg = json.load(f)

    ref = load_ref(d, "eager", model_cls)
    ref_lm = getattr(ref.model, "language_model", ref.model)
    rot = getattr(ref_lm, "rotary_emb", None)
    if rot is not None and hasattr(rot, "inv_freq"):
        notes["inv_freq"] = [float(x) for x in rot.inv_freq.float().tolist()]
        notes["rope_type"] = str(getattr(rot, "rope_type", ""))
        notes["attention_scaling"] = float(getattr(rot, "attention_scaling", 1.0))
    elif rot is not None:  # per-layer-type RoPE (Gemma 3): every inv_freq buffer
        notes["inv_freq_buffers"] = {n: [float(x) for x in b.float().tolist()]
                                     for n, b in rot.named_buffers() if "inv_freq" in n}
        notes["rope_type"] = repr(getattr(rot, "rope_type", ""))
    attn_scaling = getattr(ref_lm.layers[0].self_attn, "scaling", None)
    if attn_scaling is not None:
        notes["attn_scaling_layer0"] = float(attn_scaling)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, VOCAB, (1, PROMPT), generator=g)
    with torch.no_grad():
        out_gen = ref.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=GEN,
                               do_sample=False, use_cache=True, output_logits=True,
                               return_dict_in_generate=True, pad_token_id=0)
    greedy = out_gen.sequences[0, PROMPT:].tolist()
    if len(greedy) != GEN:
        raise RuntimeError(f"{name}: generate gave {len(greedy)} tokens, want {GEN}")
    full = torch.cat([ids, torch.tensor([greedy[:-1]])], dim=1)
    # A mixture of experts: each router's logits over the one-pass forward, for the
    # margin of every token's top-k choice (the k-th largest logit minus the next).
    routers = []
    hooks = [mod.register_forward_hook(lambda mod, inp, out: routers.append(out[0].detach().float()))
             for n, mod in ref.named_modules() if n.endswith(("mlp.gate", "block_sparse_moe.gate"))
             and hasattr(mod, "top_k")]
    lg = logits_of(ref, full)  # [PROMPT+GEN-1, V]
    for h in hooks:
        h.remove()
    if routers:
        k = int(ref.config.num_experts_per_tok)
        gaps = torch.stack([(r.topk(k + 1, dim=-1).values[:, k - 1] - r.topk(k + 1, dim=-1).values[:, k])
                            for r in routers])  # [sparse layers, rows]
        notes["router_topk_gap_min"] = float(gaps.min())
        notes["router_topk_gap_min_per_row"] = [float(x) for x in gaps.min(dim=0).values]
        notes["router_logit_std"] = float(torch.cat(routers).std())
    rows = lg.shape[0]
    # generate (with its KV cache) against the one-pass forward.
    gen_diff = 0.0
    for j, step in enumerate(out_gen.logits):
        gen_diff = max(gen_diff, float((step[0].float() - lg[PROMPT - 1 + j]).abs().max()))
        if int(lg[PROMPT - 1 + j].argmax()) != greedy[j]:
            notes.setdefault("forward_argmax_differs_at", []).append(j)
    notes["generate_vs_forward_max_abs"] = gen_diff
    # sdpa against eager.
    try:
        lg_sdpa = logits_of(load_ref(d, "sdpa", model_cls), full)
        notes["sdpa_vs_eager_max_abs"] = float((lg_sdpa - lg).abs().max())
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        notes["sdpa_error"] = repr(e)
    # Does the sliding window change anything (eager and sdpa)? The same weights with
    # a window longer than the sequence.
    if kw.get("sliding_window"):
        for attn in ("eager", "sdpa"):
            try:
                base = lg if attn == "eager" else logits_of(load_ref(d, attn, model_cls), full)
                wide = AutoConfig.from_pretrained(d)
                wide.sliding_window = WIDE_WINDOW
                nowin = logits_of(load_ref(d, attn, model_cls, config=wide), full)
                notes[f"window_changes_logits_{attn}_max_abs"] = float((nowin - base).abs().max())
            except Exception as e:  # noqa: BLE001
                notes[f"window_check_error_{attn}"] = repr(e)
    top2 = lg.topk(2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1])[PROMPT - 1:]
    stats = dict(logit_std=float(lg.std()), logit_max_abs=float(lg.abs().max()),
                 greedy_min_top2_margin=float(margins.min()), distinct_greedy=len(set(greedy)))
    lg.contiguous().numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
    golden = dict(
        name=name, architecture=model_cls, model_type=saved_cfg.get("model_type"), dtype=dtype,
        supported=supported, prompt_ids=ids[0].tolist(), greedy_ids=greedy,
        logits_file="logits.f32", rows=rows, vocab=VOCAB, seed=seed,
        reference="transformers float32, eager attention, from the saved checkpoint",
        versions=dict(transformers=transformers.__version__, torch=torch.__version__),
        stats=stats, notes=notes)
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    log(f"{name}: ok; stats {stats}; notes " +
        json.dumps({k: v for k, v in notes.items() if k not in ("inv_freq", "inv_freq_buffers", "router_topk_gap_min_per_row")}))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(4)
    log(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = []
    for idx, fx in enumerate(FIXTURES):
        if only and fx[0] not in only:
            continue
        try:
            gen_one(out, idx, *fx)
        except Exception:  # noqa: BLE001 - one family's failure must not hide the others
            traceback.print_exc()
            failed.append(fx[0])
    if failed:
        log("FAILED:", " ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
