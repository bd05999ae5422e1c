// The activation views one block's forward/backward works on, and the scratch shared by
// all blocks (never kept across blocks). Every field is bound once by the stack's
// activation plan (nn/stack.cpp, nn/act_plan.h) and cut to the current micro-batch:
// T tokens in the TP regions, Ts residual-stream tokens on this rank (nn/context.h);
// l = this rank's share (nn/block_config.h): NHl query heads, NKVl KV heads used, Fl
// MLP width.
// Lifetimes, by recompute mode (nn/block_config.h), decided by how many copies the
// stack plans (llm.c style: L copies or 1):
//   residual stream h[0..L]   always one per layer boundary;
//   BlockActs                 one per layer (none, selective) or one shared (full);
//   AttentionCore             one per layer (none) or one shared (selective, full);
//   MlpActs::act of SwiGLU    one shared (Scratch::act): its backward recomputes it
//                             (the fused SwiGLU, nn/mlp.h).
// Dtypes: the arena's activation dtype (f32; bf16 under train.precision=bf16; f64 for
// gradient checks), but the statistics (norm mean and rstd, lse): f32 (f64 in an f64
// arena).
#pragma once
#include "core/tensor.h"

namespace vlm {

struct AttentionActs {
  Tensor x_full;  // [T,C]       input after the column region (= the norm output without SP)
  Tensor q;       // [T,NHl,HS]  after bias and RoPE
  Tensor k, v;    // [T,NKVl,HS]
};

// The attention core's outputs (re-run in backward under selective recomputation).
struct AttentionCore {
  Tensor att;  // [T,NHl,HS]
  Tensor lse;  // [T,NHl] log-sum-exp of each row
};

struct MlpActs {
  Tensor x_full;  // [T,C]
  Tensor h1;      // [T,Fl] GELU: fc before the GELU; SwiGLU: gate projection
  Tensor h2;      // [T,Fl] SwiGLU: up projection (undefined for GELU)
  Tensor act;     // [T,Fl] GELU(h1) or silu(gate)*up: input of the down projection
                  //        (SwiGLU: Scratch::act, recomputed in backward)
};

// What one block keeps for backward besides its residual input/output.
struct BlockActs {
  Tensor ln1, ln1_mean, ln1_rstd;  // [Ts,C], [Ts] (LayerNorm only), [Ts]
  AttentionActs attn;
  Tensor h_mid;                    // [Ts,C] = h_in + attention branch
  Tensor ln2, ln2_mean, ln2_rstd;
  MlpActs mlp;
};

// Shared scratch (one set for the whole stack; the owner may use it between stacks).
struct Scratch {
  Tensor partial;           // [T,C]  row-parallel partial sums
  Tensor y;                 // [Ts,C] row-parallel output (aliases partial without SP)
  Tensor dfull_a, dfull_b;  // [T,C]  full-width gradients in the TP regions (dfull_a: SP only)
  Tensor dnorm;             // [Ts,C] gradient of a norm output (aliases dfull_b without SP)
  Tensor dq, datt;          // [T,NHl,HS]
  Tensor dk, dv;            // [T,NKVl,HS]
  Tensor dh1, dh2, dact;    // [T,Fl] (dh2: SwiGLU only)
  Tensor act;               // [T,Fl] SwiGLU: every layer's MlpActs::act (undefined for GELU)
};

}  // namespace vlm
