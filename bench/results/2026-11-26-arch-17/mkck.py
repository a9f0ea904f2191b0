# Writes random checkpoints (bf16) with gotiny's tokenizer for bitdecode run.
import json, random, struct, sys, os, math, shutil
def bf16(x):
    b = struct.unpack('<I', struct.pack('<f', x))[0]
    b = (b + 0x7fff + ((b >> 16) & 1)) >> 16
    return struct.pack('<H', b)
def write(d, cfg, tensors, seed):
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(d+'/config.json','w'))
    r = random.Random(seed)
    hdr, blobs, off = {}, [], 0
    for name, shape in sorted(tensors.items()):
        n = 1
        for s in shape: n *= s
        if len(shape) == 1: vals = [ (0.2 if cfg['model_type']=='gemma' else 1.0)*0+ (r.gauss(0,0.2) if cfg['model_type']=='gemma' else 1+r.gauss(0,0.2)) for _ in range(n)]
        elif 'embed' in name or 'lm_head' in name: vals = [r.gauss(0,1) for _ in range(n)]
        else:
            sd = 1.5/math.sqrt(shape[1]); vals = [r.gauss(0,sd) for _ in range(n)]
        data = b''.join(bf16(v) for v in vals)
        hdr[name] = {'dtype':'BF16','shape':shape,'data_offsets':[off, off+len(data)]}
        blobs.append(data); off += len(data)
    h = json.dumps(hdr).encode(); h += b' '*((8-len(h)%8)%8)
    with open(d+'/model.safetensors','wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h)
        for b in blobs: f.write(b)
def layers(L, H, I, QD, KVD, fused, tied, V):
    ts = {'model.embed_tokens.weight':[V,H], 'model.norm.weight':[H]}
    if not tied: ts['lm_head.weight'] = [V,H]
    for l in range(L):
        p = 'model.layers.%d.' % l
        ts[p+'input_layernorm.weight']=[H]; ts[p+'post_attention_layernorm.weight']=[H]
        if fused:
            ts[p+'self_attn.qkv_proj.weight']=[QD+2*KVD,H]; ts[p+'mlp.gate_up_proj.weight']=[2*I,H]
        else:
            for n,s in [('self_attn.q_proj',QD),('self_attn.k_proj',KVD),('self_attn.v_proj',KVD),('mlp.gate_proj',I),('mlp.up_proj',I)]:
                ts[p+n+'.weight']=[s,H]
        ts[p+'self_attn.o_proj.weight']=[H,QD]; ts[p+'mlp.down_proj.weight']=[H,I]
    return ts
V=2048
g = {"architectures":["GemmaForCausalLM"],"model_type":"gemma","hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
     "num_attention_heads":2,"num_key_value_heads":1,"head_dim":256,"vocab_size":V,"rms_norm_eps":1e-6,"rope_theta":10000.0,
     "hidden_act":"gelu","hidden_activation":"gelu_pytorch_tanh","tie_word_embeddings":True,"torch_dtype":"bfloat16",
     "max_position_embeddings":8192,"bos_token_id":0,"eos_token_id":1}
write(sys.argv[1]+'/gemma', g, layers(2,256,512,512,256,False,True,V), 1)
p = {"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
     "num_attention_heads":2,"num_key_value_heads":2,"vocab_size":V,"rms_norm_eps":1e-5,"rope_theta":10000.0,"hidden_act":"silu",
     "sliding_window":2047,"max_position_embeddings":4096,"original_max_position_embeddings":4096,"tie_word_embeddings":False,
     "torch_dtype":"bfloat16","bos_token_id":0,"eos_token_id":1}
write(sys.argv[1]+'/phi3', p, layers(2,256,512,256,256,True,False,V), 2)
p96 = dict(p, hidden_size=192, num_attention_heads=2, num_key_value_heads=2)
write(sys.argv[1]+'/phi3d96', p96, layers(2,192,512,192,192,True,False,V), 3)
