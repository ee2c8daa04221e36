"""A sparse mixture-of-experts classifier pre-trained, then fine-tuned with LoRA, in the style of
the widely read from-scratch implementations (Mixtral-style top-k routing as in "makeMoE" and
the switch-transformer load-balancing loss; LoRA as in "LoRA from scratch" / minLoRA).
MoE: a router's topk + softmax over the chosen logits, per-expert token selection with
torch.where, expert outputs accumulated with index_add_, a load-balancing loss built from
F.one_hot and scatter_add_, and gather for the chosen-expert probabilities.  LoRA: the frozen
model (requires_grad_(False)), nn.Linear layers swapped for LinearWithLoRA via named_modules +
setattr, kaiming_uniform_(a=sqrt(5)) / zeros initialisation, named_parameters filtering, and
two AdamW parameter groups with their own learning rate and weight decay.
Offline synthetic sequence-classification tasks (NumPy) replace the datasets."""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--steps', type=int, default=60)
args = parser.parse_args()
torch.manual_seed(args.seed)

VOCAB, SEQ, DIM, N_EXPERTS, TOP_K, N_CLASSES = 32, 12, 32, 4, 2, 4


def task(n, seed, variant):
    """Label = which quarter of the vocabulary is most frequent in the sequence (variant 0), or
    the most frequent quarter after rotating the tokens by 8 (variant 1: the fine-tuning task)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, VOCAB, (n, SEQ))
    bias = rng.integers(0, N_CLASSES, n)
    extra = rng.integers(0, 8, (n, 4)) + bias[:, None] * 8
    x[:, :4] = extra
    rng.permuted(x, axis=1, out=x)
    q = ((x + 8 * variant) % VOCAB) // 8
    y = np.array([np.bincount(r, minlength=N_CLASSES).argmax() for r in q])
    return torch.from_numpy(x), torch.from_numpy(y)


class Expert(nn.Module):
    def __init__(self, n_embed):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_embed, 2 * n_embed), nn.ReLU(), nn.Linear(2 * n_embed, n_embed))

    def forward(self, x):
        return self.net(x)


class TopkRouter(nn.Module):
    def __init__(self, n_embed, num_experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.linear = nn.Linear(n_embed, num_experts)

    def forward(self, mh_output):
        logits = self.linear(mh_output)
        top_k_logits, indices = logits.topk(self.top_k, dim=-1)
        zeros = torch.full_like(logits, float('-inf'))
        sparse_logits = zeros.scatter(-1, indices, top_k_logits)
        router_output = F.softmax(sparse_logits, dim=-1)
        return router_output, indices, logits


class SparseMoE(nn.Module):
    def __init__(self, n_embed, num_experts, top_k):
        super().__init__()
        self.router = TopkRouter(n_embed, num_experts, top_k)
        self.experts = nn.ModuleList([Expert(n_embed) for _ in range(num_experts)])
        self.top_k = top_k
        self.num_experts = num_experts

    def forward(self, x):
        gating_output, indices, logits = self.router(x)
        final_output = torch.zeros_like(x)
        flat_x = x.view(-1, x.size(-1))
        flat_gating_output = gating_output.view(-1, gating_output.size(-1))
        out_flat = final_output.view(-1, x.size(-1))
        for i, expert in enumerate(self.experts):
            expert_mask = (indices == i).any(dim=-1)
            flat_mask = expert_mask.view(-1)
            if flat_mask.any():
                idx = torch.where(flat_mask)[0]
                expert_output = expert(flat_x[idx])
                gating_scores = flat_gating_output[idx, i].unsqueeze(1)
                out_flat = out_flat.index_add(0, idx, expert_output * gating_scores)
        final_output = out_flat.view_as(x)

        # switch-transformer load balancing: fraction of tokens routed to each expert (one_hot of
        # the first choice, counted with scatter_add_) times the mean router probability
        probs = F.softmax(logits, dim=-1).view(-1, self.num_experts)
        first = indices[..., 0].reshape(-1)
        counts = torch.zeros(self.num_experts).scatter_add_(0, first, torch.ones_like(first, dtype=torch.float))
        assert torch.equal(counts, F.one_hot(first, self.num_experts).sum(0).float())
        chosen_p = probs.gather(1, first.unsqueeze(1)).squeeze(1)
        aux = self.num_experts * (counts / first.numel() * probs.mean(0)).sum()
        return final_output, aux, chosen_p.mean()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, DIM))
        self.ln1 = nn.LayerNorm(DIM)
        self.moe = SparseMoE(DIM, N_EXPERTS, TOP_K)
        self.ln2 = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, N_CLASSES)

    def forward(self, x):
        h = self.tok(x) + self.pos
        m, aux, conf = self.moe(self.ln1(h))
        h = h + m
        return self.head(self.ln2(h).mean(1)), aux, conf


class LoRALayer(nn.Module):
    def __init__(self, in_dim, out_dim, rank, alpha):
        super().__init__()
        self.A = nn.Parameter(torch.empty(in_dim, rank))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(rank, out_dim))
        self.alpha = alpha
        self.rank = rank

    def forward(self, x):
        return self.alpha / self.rank * (x @ self.A @ self.B)


class LinearWithLoRA(nn.Module):
    def __init__(self, linear, rank, alpha):
        super().__init__()
        self.linear = linear
        self.lora = LoRALayer(linear.in_features, linear.out_features, rank, alpha)

    def forward(self, x):
        return self.linear(x) + self.lora(x)


def run(model, params_or_groups, x, y, xv, yv, steps, lr):
    opt = torch.optim.AdamW(params_or_groups, lr=lr)
    for step in range(steps):
        idx = torch.randint(0, len(x), (64,))
        logits, aux, conf = model(x[idx])
        loss = F.cross_entropy(logits, y[idx]) + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f'step {step:3d} loss {loss.item():.4f} aux {aux.item():.3f} router confidence {conf.item():.3f}')
    model.eval()
    with torch.no_grad():
        logits, _, _ = model(xv)
        val = F.cross_entropy(logits, yv).item()
        acc = (logits.argmax(1) == yv).float().mean().item()
    model.train()
    return val, acc


model = Classifier()
xa, ya = task(1024, 0, 0)
xav, yav = task(256, 1, 0)
val, acc = run(model, model.parameters(), xa, ya, xav, yav, args.steps, 3e-3)
print(f'pre-training: val loss {val:.4f} acc {acc:.3f}')

# LoRA fine-tuning on the rotated task: freeze everything, wrap the experts' and head's Linears
xb, yb = task(1024, 2, 1)
xbv, ybv = task(256, 3, 1)
model.requires_grad_(False)
for name, module in list(model.named_modules()):
    for child_name, child in list(module.named_children()):
        if isinstance(child, nn.Linear) and (name.startswith('moe.experts') or child_name == 'head'):
            setattr(module, child_name, LinearWithLoRA(child, rank=4, alpha=8))
model.tok.weight.requires_grad = True          # the embedding is fine-tuned in full
total = sum(p.numel() for p in model.parameters())
trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(f'trainable parameters: {trainable} of {total}')
lora_params = [p for n, p in model.named_parameters() if 'lora' in n and p.requires_grad]
other_params = [p for n, p in model.named_parameters() if 'lora' not in n and p.requires_grad]
assert len(other_params) == 1 and all(n.endswith(('.A', '.B')) for n, p in model.named_parameters() if 'lora' in n)
frozen_before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
val0, acc0 = run(model, lora_params, xb, yb, xbv, ybv, 0, 1e-3)    # before fine-tuning
val, acc = run(model, [{'params': lora_params, 'weight_decay': 0.0},
                       {'params': other_params, 'lr': 1e-3}], xb, yb, xbv, ybv, args.steps, 1e-2)
assert all(torch.equal(p, frozen_before[n]) for n, p in model.named_parameters() if not p.requires_grad)
print(f'LoRA fine-tuning: val loss {val0:.4f} -> {val:.4f}, acc {acc0:.3f} -> {acc:.3f}')
print(f"final_loss: {val:.6f}")
