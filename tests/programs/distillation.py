"""Knowledge distillation as in the PyTorch tutorial (beginner/knowledge_distillation_tutorial.py):
a teacher CNN trained on synthetic digit images, then a light student trained with the
Hinton soft-target loss (nn.KLDivLoss(reduction='batchmean') between log_softmax(student / T)
and softmax(teacher / T), scaled by T**2) plus cross-entropy on the hard labels, and a second
student with the tutorial's cosine-similarity hidden-feature loss (nn.CosineEmbeddingLoss,
avg_pool1d to match widths).  Also: the teacher frozen in eval() under torch.no_grad(), the
tutorial's soft-targets written with torch.sum(soft_targets * (soft_targets.log() -
soft_prob)), label_smoothing in CrossEntropyLoss and an accuracy helper."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

from _synthetic import digits

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=42)
parser.add_argument('--epochs', type=int, default=3)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = "cuda" if torch.cuda.is_available() else "cpu"

x, y = digits(900, seed=3, size=16, block=4)
x_train, y_train = torch.from_numpy(x[:600]), torch.from_numpy(y[:600])
x_test, y_test = torch.from_numpy(x[600:]), torch.from_numpy(y[600:])
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=50, shuffle=True)
test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=100, shuffle=False)


class DeepNN(nn.Module):
    def __init__(self, num_classes=10):
        super(DeepNN, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(32, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 4 * 4, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


class LightNN(nn.Module):
    def __init__(self, num_classes=10):
        super(LightNN, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(16, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        self.classifier = nn.Sequential(nn.Linear(16 * 4 * 4, 64), nn.ReLU(), nn.Dropout(0.1),
                                        nn.Linear(64, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


class ModifiedDeepNNCosine(DeepNN):
    def forward(self, x):
        x = self.features(x)
        flattened_conv_output = torch.flatten(x, 1)
        x = self.classifier(flattened_conv_output)
        flattened_conv_output_after_pooling = torch.nn.functional.avg_pool1d(flattened_conv_output, 2)
        return x, flattened_conv_output_after_pooling


class ModifiedLightNNCosine(LightNN):
    def forward(self, x):
        x = self.features(x)
        flattened_conv_output = torch.flatten(x, 1)
        x = self.classifier(flattened_conv_output)
        return x, flattened_conv_output[:, :128]


def train(model, train_loader, epochs, learning_rate, device):
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    for epoch in range(epochs):
        running_loss = 0.0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        print(f"Epoch {epoch+1}/{epochs}, Loss: {running_loss / len(train_loader)}")
    return running_loss / len(train_loader)


def test(model, test_loader, device):
    model.to(device)
    model.eval()
    correct, total, loss = 0, 0, 0.0
    with torch.no_grad():
        for inputs, labels in test_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            outputs = model(inputs)
            if isinstance(outputs, tuple):
                outputs = outputs[0]
            loss += F.cross_entropy(outputs, labels, reduction='sum').item()
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    accuracy = 100 * correct / total
    print(f"Test Accuracy: {accuracy:.2f}%  loss {loss / total:.4f}")
    return loss / total


def train_knowledge_distillation(teacher, student, train_loader, epochs, learning_rate, T,
                                 soft_target_loss_weight, ce_loss_weight, device):
    ce_loss = nn.CrossEntropyLoss(label_smoothing=0.05)
    kl = nn.KLDivLoss(reduction="batchmean")
    optimizer = optim.Adam(student.parameters(), lr=learning_rate)
    teacher.eval()  # Teacher set to evaluation mode
    student.train()  # Student to train mode
    for epoch in range(epochs):
        running_loss = 0.0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            with torch.no_grad():
                teacher_logits = teacher(inputs)
            student_logits = student(inputs)
            soft_targets = nn.functional.softmax(teacher_logits / T, dim=-1)
            soft_prob = nn.functional.log_softmax(student_logits / T, dim=-1)
            # the tutorial's own formula and KLDivLoss agree
            soft_targets_loss = torch.sum(soft_targets * (soft_targets.log() - soft_prob)) / soft_prob.size()[0] * (T**2)
            kd = kl(soft_prob, soft_targets) * (T ** 2)
            assert torch.allclose(kd, soft_targets_loss, rtol=1e-4, atol=1e-6), (kd.item(), soft_targets_loss.item())
            label_loss = ce_loss(student_logits, labels)
            loss = soft_target_loss_weight * kd + ce_loss_weight * label_loss
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        print(f"Epoch {epoch+1}/{epochs}, Loss: {running_loss / len(train_loader)}")
    return running_loss / len(train_loader)


def train_cosine_loss(teacher, student, train_loader, epochs, learning_rate, hidden_rep_loss_weight,
                      ce_loss_weight, device):
    ce_loss = nn.CrossEntropyLoss()
    cosine_loss = nn.CosineEmbeddingLoss()
    optimizer = optim.Adam(student.parameters(), lr=learning_rate)
    teacher.to(device)
    student.to(device)
    teacher.eval()
    student.train()
    for epoch in range(epochs):
        running_loss = 0.0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            with torch.no_grad():
                _, teacher_hidden_representation = teacher(inputs)
            student_logits, student_hidden_representation = student(inputs)
            hidden_rep_loss = cosine_loss(student_hidden_representation, teacher_hidden_representation,
                                          target=torch.ones(inputs.size(0)).to(device))
            label_loss = ce_loss(student_logits, labels)
            loss = hidden_rep_loss_weight * hidden_rep_loss + ce_loss_weight * label_loss
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        print(f"Epoch {epoch+1}/{epochs}, Loss: {running_loss / len(train_loader)}")
    return running_loss / len(train_loader)


nn_deep = DeepNN(num_classes=10).to(device)
l_deep = train(nn_deep, train_loader, epochs=args.epochs, learning_rate=3e-3, device=device)
test_deep = test(nn_deep, test_loader, device)

torch.manual_seed(args.seed)
new_nn_light = LightNN(num_classes=10).to(device)
l_kd = train_knowledge_distillation(teacher=nn_deep, student=new_nn_light, train_loader=train_loader, epochs=2 * args.epochs,
                             learning_rate=3e-3, T=2, soft_target_loss_weight=0.25, ce_loss_weight=0.75,
                             device=device)
test_kd = test(new_nn_light, test_loader, device)

modified_nn_deep = ModifiedDeepNNCosine(num_classes=10).to(device)
modified_nn_deep.load_state_dict(nn_deep.state_dict())
modified_nn_light = ModifiedLightNNCosine(num_classes=10).to(device)
l_cos = train_cosine_loss(teacher=modified_nn_deep, student=modified_nn_light, train_loader=train_loader,
                  epochs=2 * args.epochs, learning_rate=3e-3, hidden_rep_loss_weight=0.25, ce_loss_weight=0.75,
                  device=device)
test_cos = test(modified_nn_light, test_loader, device)
total_params_deep = "{:,}".format(sum(p.numel() for p in nn_deep.parameters()))
total_params_light = "{:,}".format(sum(p.numel() for p in new_nn_light.parameters()))
print(f"DeepNN parameters: {total_params_deep}  LightNN parameters: {total_params_light}")
# the reported loss: the last epoch's mean training loss of the three runs (the test losses of
# 300 images are noisier)
print(f"test losses: teacher {test_deep:.4f}  KD student {test_kd:.4f}  cosine student {test_cos:.4f}")
print(f"final_loss: {(l_deep + l_kd + l_cos) / 3:.6f}")
