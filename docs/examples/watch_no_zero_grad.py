import torch
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(512, 16)
y = (x @ torch.randn(16, 4)).argmax(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(200):
    i = torch.randint(0, 512, (64,))
    loss = torch.nn.functional.cross_entropy(model(x[i]), y[i])
    loss.backward()                       # optimizer.zero_grad() forgotten
    opt.step()
