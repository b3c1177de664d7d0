"""The synthetic Qwen3.5 shapes the benches use, and their costs (FLOPs, fewest bytes moved).

Shared by baseline_hf.py (which builds the models) and report.py (which turns the costs into floors
with the ceilings measured in the same run, as in design/performance.md). Plain Python, no torch.
"""

BF16_BYTES = 2
FP32_BYTES = 4
# The chunk length of the chunked gated-delta-rule prefill (transformers and fla both use 64).
GDN_CHUNK = 64

# Qwen3.5 values shared by every real shape here (design/model-qwen35.md section 2).
COMMON_SHAPE = dict(
    vocab_size=248320,
    head_dim=256,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    linear_conv_kernel_dim=4,
    full_attention_interval=4,
    rms_norm_eps=1e-6,
    max_position_embeddings=262144,
)

SHAPES = {
    # The library's default Qwen3_5TextConfig, spelled out (performance.md "Baseline").
    "9b": dict(hidden_size=4096, num_hidden_layers=32, intermediate_size=12288, num_attention_heads=16,
               num_key_value_heads=4, linear_num_key_heads=16, linear_num_value_heads=32,
               tie_word_embeddings=False, **COMMON_SHAPE),
    "0.8b": dict(hidden_size=1024, num_hidden_layers=24, intermediate_size=3584, num_attention_heads=8,
                 num_key_value_heads=2, linear_num_key_heads=16, linear_num_value_heads=16,
                 tie_word_embeddings=True, **COMMON_SHAPE),
    # Tiny shape for --smoke (logic check on CPU; its numbers mean nothing).
    "smoke": dict(hidden_size=64, num_hidden_layers=4, intermediate_size=128, num_attention_heads=2,
                  num_key_value_heads=1, linear_num_key_heads=2, linear_num_value_heads=4,
                  tie_word_embeddings=True, vocab_size=512, head_dim=32, linear_key_head_dim=16,
                  linear_value_head_dim=16, linear_conv_kernel_dim=4, full_attention_interval=4,
                  rms_norm_eps=1e-6, max_position_embeddings=4096),
}


class Costs:
    """Parameter counts and per-workload costs of one shape (config dict as in SHAPES)."""

    def __init__(self, cfg):
        self.H = cfg["hidden_size"]
        self.L = cfg["num_hidden_layers"]
        self.interval = cfg["full_attention_interval"]
        self.n_full = self.L // self.interval
        self.n_lin = self.L - self.n_full
        self.F = cfg["intermediate_size"]
        self.V = cfg["vocab_size"]
        self.Hq, self.Hkv, self.d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.Hk, self.Hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
        self.dk, self.dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
        self.K = cfg["linear_conv_kernel_dim"]
        self.tied = cfg["tie_word_embeddings"]
        H = self.H
        conv_ch = 2 * self.Hk * self.dk + self.Hv * self.dv
        mlp = 3 * H * self.F
        # qkv, z, b, a, out projections + depthwise conv (weights a token's forward multiplies by).
        lin = H * conv_ch + H * self.Hv * self.dv + 2 * H * self.Hv + self.Hv * self.dv * H + conv_ch * self.K
        # q (with its output gate), k, v, o.
        full = H * 2 * self.Hq * self.d + 2 * H * self.Hkv * self.d + self.Hq * self.d * H
        self.layer_params = self.n_lin * (lin + mlp) + self.n_full * (full + mlp)
        self.head_params = self.V * H
        self.params = self.layer_params + self.head_params + (0 if self.tied else self.V * H)
        self.conv_ch = conv_ch

    def weight_bytes(self):
        return self.params * BF16_BYTES

    def state_bytes(self):
        """Recurrent (fp32) + conv state of every linear layer, per sequence."""
        rec = self.n_lin * self.Hv * self.dk * self.dv * FP32_BYTES
        conv = self.n_lin * self.conv_ch * (self.K - 1) * BF16_BYTES
        return rec + conv

    def kv_bytes(self, context):
        return self.n_full * 2 * self.Hkv * self.d * context * BF16_BYTES

    def decode_bytes(self, context):
        """Fewest bytes one decode step at `context` must move: every weight it multiplies by (the
        embedding table contributes one row), the KV read, the state read and written."""
        return (self.layer_params + self.head_params) * BF16_BYTES + self.kv_bytes(context) + 2 * self.state_bytes()

    def prefill_flops(self, tokens, tail_chunk=0):
        """FLOPs of a cold prefill of `tokens` + the first token's logits (lm_head on one row).

        tail_chunk > 0: as Frost runs it, in chunks of that many tokens, each with its own logits row
        and its last layer past the state-writing ops on its last row only (the prefill tail,
        docs/design/architecture.md); 0: every row of every layer once (the model's FLOPs, as
        transformers runs them)."""
        if tail_chunk <= 0:
            return self.extend_flops(0, tokens)
        total, pos = 0.0, 0
        while pos < tokens:
            take = min(tail_chunk, tokens - pos)
            total += self.extend_flops(pos, take) - self.tail_saving(pos, take)
            pos += take
        return total

    def tail_saving(self, prefix, tokens):
        """FLOPs the prefill tail leaves out of a chunk of `tokens` after `prefix`: the last layer's
        MLP and output projection on all rows but the last, and for a full-attention last layer the
        other rows' attention (the input projections, the GDN rule and the KV append still run on
        every row)."""
        T = tokens
        if T <= 1:
            return 0.0
        saved = 2.0 * 3 * self.H * self.F * (T - 1)
        if self.L % self.interval == 0:  # the last layer is a full-attention one
            saved += 2.0 * self.Hq * self.d * self.H * (T - 1)
            saved += 4.0 * self.Hq * self.d * (T * (prefix + T / 2) - (prefix + T))
        else:
            saved += 2.0 * self.Hv * self.dv * self.H * (T - 1)
        return saved

    def extend_flops(self, prefix, tokens):
        """FLOPs of appending `tokens` after `prefix` cached ones, + the first new token's logits."""
        T = tokens
        gemm = 2.0 * self.layer_params * T + 2.0 * self.head_params
        # Attention: QK^T and PV of each new row over the prefix and the causal half of the new
        # T x T square, per q head, per full layer.
        attn = self.n_full * 4.0 * self.Hq * self.d * T * (prefix + T / 2)
        # Chunked gated delta rule, per token per head: state read/update/output (~6 dk dv) and the
        # intra-chunk products (~8 C dk); small next to the GEMMs, counted so the floor is honest.
        gdn = self.n_lin * self.Hv * T * (6.0 * self.dk * self.dv + 8.0 * GDN_CHUNK * self.dk)
        return gemm + attn + gdn

    def prefill_bytes(self, tokens):
        return self.extend_bytes(0, tokens)

    def extend_bytes(self, prefix, tokens):
        """Every weight multiplied once (plus the embedding rows looked up), the prefix KV read, the
        new KV written, the state written (and read when there is a prefix)."""
        weights = (self.layer_params + self.head_params + tokens * self.H) * BF16_BYTES
        return weights + self.kv_bytes(prefix + tokens) + (2 if prefix else 1) * self.state_bytes()
