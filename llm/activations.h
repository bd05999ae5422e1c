// Views of the planned activation arena used by one block's forward/backward, and the
// scratch buffers shared by all blocks (never kept across blocks).
// All views are already cut to the current micro-batch: T tokens in the TP regions,
// Ts residual-stream tokens on this rank (see context.h); l = C/tp-split widths:
// NHl = NH/tp heads, NKVl = KV heads used by this rank, Fl = F/tp.
// Which of them alias across layers is decided by the recompute mode (backbone.cpp):
// none: everything per layer; selective: att/lse shared (recomputed in backward);
// full: only the residual stream h per layer, the rest shared (block recomputed).
#pragma once
#include "core/tensor.h"

namespace vlm {

struct AttentionActs {
  Tensor x_full;    // [T,C]   input after the column region (= ln output without SP)
  Tensor q;         // [T,NHl,HS]  after bias and RoPE
  Tensor k, v;      // [T,NKVl,HS]
  Tensor att;       // [T,NHl,HS]  attention core output ("core": selective recompute)
  Tensor lse;       // [T,NHl]     log-sum-exp of each row ("core")
};

struct MlpActs {
  Tensor x_full;  // [T,C]
  Tensor h1;      // [T,Fl] gpt2: fc before GELU; llama: gate projection
  Tensor h2;      // [T,Fl] llama: up projection (undefined for gpt2)
  Tensor act;     // [T,Fl] GELU(h1) or silu(gate)*up: input of down_proj
};

struct BlockActs {
  Tensor h_in;    // [Ts,C] residual stream into the block (per layer, always kept)
  Tensor h_out;   // [Ts,C] residual stream out of the block (= next block's h_in)
  Tensor ln1, ln1_mean, ln1_rstd;  // [Ts,C], [Ts], [Ts]
  AttentionActs attn;
  Tensor h_mid;   // [Ts,C] = h_in + attention branch
  Tensor ln2, ln2_mean, ln2_rstd;
  MlpActs mlp;
};

// Shared scratch (one set for the whole model).
struct Scratch {
  Tensor partial;         // [T,C]  row-parallel partial sums
  Tensor y;               // [Ts,C] row-parallel output (may alias partial without SP)
  Tensor dfull_a, dfull_b;  // [T,C]  full-width gradients in the TP regions
  Tensor dnorm;           // [Ts,C] gradient of a norm output (may alias dfull_b without SP)
  Tensor dtmp;            // [Ts,C] gradient of a norm input before it joins dres
  Tensor dq, datt;        // [T,NHl,HS]
  Tensor dk, dv;          // [T,NKVl,HS]
  Tensor dh1, dh2, dact;  // [T,Fl]
};

}  // namespace vlm
