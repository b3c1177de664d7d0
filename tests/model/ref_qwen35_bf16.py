# The bf16 floor of the CUDA engine's design on a fixture: tests/model/ref_qwen35.py (float64,
# the golden's own conventions) with each activation rounded to bf16 exactly where the CUDA engine
# rounds (normed inputs, projections, conv/l2norm q k v, GDN and attention outputs, gated norm,
# the residual stream after every add, the final norm). Prints, against the golden logits of the
# first T prompt positions, the error statistics test_cuda_engine.cpp's tolerances come from.
# Debug tool, not run by ctest. usage: ref_qwen35_bf16.py FIXTURE_DIR T [--no-round] [--exact-rope]
# FP8 checkpoints (F8_E4M3 weight + weight_scale_inv per 128x128 block) are dequantized exactly;
# --exact-rope keeps fp32 RoPE frequencies (the FP8 fixture's golden was made that way).
import json, struct, numpy as np, sys
d = sys.argv[1]; T = int(sys.argv[2])
EMU = '--no-round' not in sys.argv[3:]
EXACT_ROPE = '--exact-rope' in sys.argv[3:]
def e4m3(u8):
    # OCP FP8 E4M3 (bias 7, no infinities; 0x7F/0xFF are NaN)
    u = u8.astype(np.int64); sgn = np.where(u & 0x80, -1.0, 1.0); e = (u >> 3) & 0xF; m = u & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    return np.where((u & 0x7F) == 0x7F, np.nan, sgn * v)
f=open(d+'/model.safetensors','rb'); n=struct.unpack('<Q',f.read(8))[0]; h=json.loads(f.read(n)); base=8+n
raw=open(d+'/model.safetensors','rb').read()
W={}
for k,v in h.items():
    if k=='__metadata__': continue
    b,e=v['data_offsets']; buf=raw[base+b:base+e]
    if v['dtype']=='F8_E4M3': a=e4m3(np.frombuffer(buf,dtype=np.uint8))
    elif v['dtype']=='F32': a=np.frombuffer(buf,dtype='<f4').astype(np.float64)
    else: a=(np.frombuffer(buf,dtype=np.uint16).astype(np.uint32)<<16).view(np.float32).astype(np.float64)
    W[k.replace('model.language_model.','model.')]=a.reshape(v['shape'])
for k in [k for k in W if k.endswith('.weight_scale_inv')]:
    w=k[:-len('_scale_inv')]; s_=W.pop(k); o,i=W[w].shape
    W[w]=W[w]*np.repeat(np.repeat(s_,128,0),128,1)[:o,:i]
cfg=json.load(open(d+'/config.json')); cfg=cfg.get('text_config',cfg)
g=json.load(open(d+'/golden.json')); ids=g['prompt_ids'][:T]
H=cfg['hidden_size']; eps=cfg['rms_norm_eps']
def rms(x,w): 
    x32=x.astype(np.float32).astype(np.float64)
    return x32/np.sqrt((x32**2).mean(-1,keepdims=True)+eps)*(1+w)
silu=lambda x: x/(1+np.exp(-x))
def bf(a):
    if not EMU: return a
    a32=np.asarray(a,dtype=np.float32); u=a32.view(np.uint32).astype(np.uint64); u=((u+0x7FFF+((u>>16)&1))>>16)<<16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)
x=W['model.embed_tokens.weight'][ids]
Hk,Hv,dk,dv=cfg['linear_num_key_heads'],cfg['linear_num_value_heads'],cfg['linear_key_head_dim'],cfg['linear_value_head_dim']
Hq,Hkv,hd=cfg['num_attention_heads'],cfg['num_key_value_heads'],cfg['head_dim']
for l,kind in enumerate(cfg['layer_types']):
    p=f'model.layers.{l}.'
    xn=bf(rms(x,W[p+'input_layernorm.weight']))
    if kind=='linear_attention':
        a=p+'linear_attn.'
        qkv=bf(xn@W[a+'in_proj_qkv.weight'].T); z=bf(xn@W[a+'in_proj_z.weight'].T)
        b=bf(xn@W[a+'in_proj_b.weight'].T); aa=bf(xn@W[a+'in_proj_a.weight'].T)
        cw=W[a+'conv1d.weight'][:,0,:]; K=cw.shape[1]
        pad=np.concatenate([np.zeros((K-1,qkv.shape[1])),qkv])
        c=np.stack([ (pad[t:t+K]*cw.T).sum(0) for t in range(T)]); c=silu(c)
        Q=Hk*dk; q=c[:,:Q].reshape(T,Hk,dk); k=c[:,Q:2*Q].reshape(T,Hk,dk); v=c[:,2*Q:].reshape(T,Hv,dv)
        beta=1/(1+np.exp(-b)); sp=np.where(aa+W[a+'dt_bias']>20,aa+W[a+'dt_bias'],np.log1p(np.exp(aa+W[a+'dt_bias'])))
        gg=-np.exp(W[a+'A_log'])*sp
        r=Hv//Hk; q=np.repeat(q,r,1); k=np.repeat(k,r,1)
        q=q/np.sqrt((q*q).sum(-1,keepdims=True)+1e-6); k=k/np.sqrt((k*k).sum(-1,keepdims=True)+1e-6); q=bf(q*dk**-0.5); k=bf(k); v=bf(v)
        S=np.zeros((Hv,dk,dv)); o=np.zeros((T,Hv,dv))
        for t in range(T):
            S=S*np.exp(gg[t])[:,None,None]
            kv=np.einsum('hkv,hk->hv',S,k[t]); delta=(v[t]-kv)*beta[t][:,None]
            S=S+k[t][:,:,None]*delta[:,None,:]; o[t]=np.einsum('hkv,hk->hv',S,q[t])
        o32=bf(o)
        y=o32/np.sqrt((o32**2).mean(-1,keepdims=True)+eps); y=W[a+'norm.weight']*y; y=y*silu(z.reshape(T,Hv,dv))
        x=bf(x+bf(y).reshape(T,-1)@W[a+'out_proj.weight'].T)
    else:
        a=p+'self_attn.'
        qg=bf(xn@W[a+'q_proj.weight'].T).reshape(T,Hq,2*hd); q=qg[:,:,:hd]; gate=qg[:,:,hd:]
        k=bf(xn@W[a+'k_proj.weight'].T).reshape(T,Hkv,hd); v=bf(xn@W[a+'v_proj.weight'].T).reshape(T,Hkv,hd)
        q=rms(q,W[a+'q_norm.weight']); k=rms(k,W[a+'k_norm.weight'])
        rd=int(hd*cfg.get('partial_rotary_factor',cfg['rope_parameters']['partial_rotary_factor']))
        theta=cfg['rope_parameters']['rope_theta']
        inv=(1.0/(np.float32(theta)**(np.arange(0,rd,2).astype(np.float32)/np.float32(rd)))).astype(np.float32)
        # transformers' .to(bfloat16) also casts the inv_freq buffer: round to bf16 (ties to even)
        if not EXACT_ROPE:
            u=inv.view(np.uint32).astype(np.uint64); u=((u+0x7FFF+((u>>16)&1))>>16)<<16; inv=u.astype(np.uint32).view(np.float32)
        ang=(np.arange(T).astype(np.float32)[:,None]*inv[None,:]).astype(np.float32)
        cos=np.cos(np.concatenate([ang,ang],-1)).astype(np.float64); sin=np.sin(np.concatenate([ang,ang],-1)).astype(np.float64)
        def rope(x):
            xr=x[...,:rd]; x1=xr[...,:rd//2]; x2=xr[...,rd//2:]
            rot=np.concatenate([-x2,x1],-1)
            return np.concatenate([xr*cos[:,None,:]+rot*sin[:,None,:],x[...,rd:]],-1)
        q=bf(rope(q)); k=bf(rope(k))
        grp=Hq//Hkv; o=np.zeros((T,Hq,hd))
        for hh in range(Hq):
            s=q[:,hh]@k[:,hh//grp].T/np.sqrt(hd); s=s+np.triu(np.full((T,T),-np.inf),1)
            s=np.exp(s-s.max(-1,keepdims=True)); s/=s.sum(-1,keepdims=True); o[:,hh]=s@v[:,hh//grp]
        o=o*(1/(1+np.exp(-gate)))
        x=bf(x+bf(o).reshape(T,-1)@W[a+'o_proj.weight'].T)
    xn=bf(rms(x,W[p+'post_attention_layernorm.weight']))
    m=bf(silu(bf(xn@W[p+'mlp.gate_proj.weight'].T))*bf(xn@W[p+'mlp.up_proj.weight'].T))
    x=bf(x+m@W[p+'mlp.down_proj.weight'].T)
logits=bf(rms(x,W['model.norm.weight']))@W.get('lm_head.weight',W['model.embed_tokens.weight']).T
gl=np.fromfile(d+'/logits_prompt.f32',dtype='<f4').reshape(-1,g['vocab_size'])
r=[np.linalg.norm(logits[t]-gl[t])/np.linalg.norm(gl[t]) for t in range(T)]
m=np.sort(gl[:T],-1); marg=m[:,-1]-m[:,-2]
flip=[(t,marg[t]) for t in range(T) if marg[t]>0.05 and logits[t].argmax()!=gl[t].argmax()]
print('flips with margin>0.05:',len(flip),'of',int((marg[:T]>0.05).sum()), flip[:10])
print('positions over 3e-2:',sum(1 for x in r if x>0.03),'of',T, 'p50 %.4f p90 %.4f'%(np.percentile(r,50),np.percentile(r,90)))
print('bf16 rounding' if EMU else 'no rounding', 'rel L2 mean %.4f max %.4f'%(np.mean(r),np.max(r)))
