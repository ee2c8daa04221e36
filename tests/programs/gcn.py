"""A two-layer graph convolutional network (Kipf & Welling) for semi-supervised node
classification, written the way pure-PyTorch GCN tutorials do without PyTorch Geometric: a
synthetic stochastic-block-model graph given as an edge_index (2, E) tensor, self-loops added
with torch.arange, degrees by scatter_add_ / torch.bincount, symmetric normalisation
deg^-1/2 with inf -> 0 via masked_fill, message passing by index_add_ (and, for a second
layer type, a dense normalised adjacency built with index_put_ and used with torch.mm / @),
plus a GAT-style attention layer using scatter_reduce(amax) / index_select / leaky_relu for
an edge softmax.  Train/val/test masks as bool tensors, Adam with weight_decay on the first
layer only (parameter groups), early stopping on validation loss with copy.deepcopy of the
best state_dict."""
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--epochs', type=int, default=120)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


def make_graph(n=300, classes=4, feats=24, p_in=0.06, p_out=0.008, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    same = y[:, None] == y[None, :]
    prob = np.where(same, p_in, p_out)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    src, dst = np.nonzero(upper)
    edge_index = np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1)
    centers = rng.normal(0, 1, (classes, feats))
    x = centers[y] * 0.35 + rng.normal(0, 1, (n, feats))       # weakly informative features
    x = (rng.random((n, feats)) < 0.5) * x                       # sparse-ish bag of features
    return x.astype(np.float32), y.astype(np.int64), edge_index.astype(np.int64)


x_np, y_np, ei_np = make_graph()
x = torch.from_numpy(x_np).to(device)
y = torch.from_numpy(y_np).to(device)
edge_index = torch.from_numpy(ei_np).to(device)
N = x.size(0)
perm = torch.from_numpy(np.random.default_rng(0).permutation(N))   # the same split in both frameworks
train_mask = torch.zeros(N, dtype=torch.bool)
val_mask = torch.zeros(N, dtype=torch.bool)
test_mask = torch.zeros(N, dtype=torch.bool)
train_mask[perm[:40]] = True
val_mask[perm[40:120]] = True
test_mask[perm[120:]] = True


def add_self_loops(edge_index, num_nodes):
    loop = torch.arange(num_nodes, device=edge_index.device).unsqueeze(0).repeat(2, 1)
    return torch.cat([edge_index, loop], dim=1)


def gcn_norm(edge_index, num_nodes):
    edge_index = add_self_loops(edge_index, num_nodes)
    row, col = edge_index[0], edge_index[1]
    deg = torch.zeros(num_nodes, device=edge_index.device).scatter_add_(0, col, torch.ones(col.size(0)))
    assert torch.equal(deg.long(), torch.bincount(col, minlength=num_nodes))
    deg_inv_sqrt = deg.pow(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float('inf'), 0)
    norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
    return edge_index, norm


class GCNConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x, edge_index, norm):
        x = self.lin(x)
        row, col = edge_index
        msg = norm.view(-1, 1) * x[row]                       # message from source to target
        out = torch.zeros_like(x).index_add_(0, col, msg)     # aggregate at the target
        return out + self.bias


class DenseGCNConv(nn.Module):
    """The same layer with a dense normalised adjacency: A_hat @ X W."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, x, adj):
        return torch.mm(adj, x @ self.weight) + self.bias


class GATConv(nn.Module):
    def __init__(self, in_channels, out_channels, heads=2):
        super().__init__()
        self.heads, self.out_channels = heads, out_channels
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def forward(self, x, edge_index):
        H, C = self.heads, self.out_channels
        x = self.lin(x).view(-1, H, C)
        src, dst = edge_index
        alpha = (x * self.att_src).sum(-1).index_select(0, src) + (x * self.att_dst).sum(-1).index_select(0, dst)
        alpha = F.leaky_relu(alpha, 0.2)
        amax = torch.full((x.size(0), H), float('-inf')).scatter_reduce(
            0, dst.unsqueeze(-1).expand(-1, H), alpha, reduce='amax', include_self=True)
        alpha = torch.exp(alpha - amax[dst])
        denom = torch.zeros(x.size(0), H).index_add_(0, dst, alpha)
        alpha = alpha / (denom[dst] + 1e-16)
        alpha = F.dropout(alpha, p=0.2, training=self.training)
        out = torch.zeros_like(x).index_add_(0, dst, alpha.unsqueeze(-1) * x[src])
        return out.mean(dim=1)


class GCN(nn.Module):
    def __init__(self, in_channels, hidden, out_channels, kind='sparse'):
        super().__init__()
        self.kind = kind
        if kind == 'dense':
            self.conv1, self.conv2 = DenseGCNConv(in_channels, hidden), DenseGCNConv(hidden, out_channels)
        elif kind == 'gat':
            self.conv1, self.conv2 = GATConv(in_channels, hidden), GATConv(hidden, out_channels, heads=1)
        else:
            self.conv1, self.conv2 = GCNConv(in_channels, hidden), GCNConv(hidden, out_channels)

    def forward(self, x, graph):
        x = F.dropout(x, p=0.5, training=self.training)
        x = F.relu(self.conv1(x, *graph))
        x = F.dropout(x, p=0.5, training=self.training)
        return F.log_softmax(self.conv2(x, *graph), dim=1)


ei, norm = gcn_norm(edge_index, N)
adj = torch.zeros(N, N)
adj.index_put_((ei[1], ei[0]), norm, accumulate=True)
graphs = {'sparse': (ei, norm), 'dense': (adj,), 'gat': (add_self_loops(edge_index, N),)}

# the sparse and dense layers compute the same function
m1, m2 = GCNConv(24, 8), DenseGCNConv(24, 8)
with torch.no_grad():
    m2.weight.copy_(m1.lin.weight.t())
    assert torch.allclose(m1(x, ei, norm), m2(x, adj), atol=1e-5)

results = {}
for kind in ('sparse', 'dense', 'gat'):
    model = GCN(24, 16, 4, kind).to(device)
    optimizer = torch.optim.Adam([
        dict(params=model.conv1.parameters(), weight_decay=5e-4),
        dict(params=model.conv2.parameters(), weight_decay=0)], lr=0.01)
    best_val, best_state, patience = float('inf'), None, 0
    for epoch in range(args.epochs):
        model.train()
        optimizer.zero_grad()
        out = model(x, graphs[kind])
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            out = model(x, graphs[kind])
            val_loss = F.nll_loss(out[val_mask], y[val_mask]).item()
        if val_loss < best_val:
            best_val, best_state, patience = val_loss, copy.deepcopy(model.state_dict()), 0
        else:
            patience += 1
            if patience >= 30:
                break
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        out = model(x, graphs[kind])
        test_loss = F.nll_loss(out[test_mask], y[test_mask]).item()
        pred = out.argmax(dim=1)
        acc = int((pred[test_mask] == y[test_mask]).sum()) / int(test_mask.sum())
    results[kind] = test_loss
    print(f"{kind:6s}: stopped at epoch {epoch}  best val {best_val:.4f}  test loss {test_loss:.4f}  acc {acc:.3f}")
print(f"final_loss: {np.mean(list(results.values())):.6f}")
