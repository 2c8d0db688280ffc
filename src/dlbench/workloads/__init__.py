"""One package per workload (task), holding everything that knows it: its spec, framework-free pieces, data
readers, evaluation and one module per framework (torch.py, tensorflow.py, mxnet.py). Each package
registers itself (dlbench.workloads.registry) when imported; nothing here imports one."""
