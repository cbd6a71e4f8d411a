"""What the Python benchmarks run on the GPU (shared by end_to_end.py and record_replay_log.py)."""


def conv_net(torch):
    """A small convolutional network for 3x64x64 images and 10 classes, on the GPU, with its Adam
    optimizer and loss: (model, optimizer, loss_fn)."""
    torch.manual_seed(27)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
        torch.nn.Linear(64 * 16, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    ).cuda()
    return model, torch.optim.Adam(model.parameters(), lr=1e-3), torch.nn.CrossEntropyLoss()


def logged_pool(log):
    """Sets a LoggingResourceAdaptor over a 1 GiB pool as the current device resource, logging to
    `log`.raw (the adaptor keeps it open until the process ends, so callers copy it to `log` once
    the workload is done); returns (adaptor, raw path)."""
    import os

    import rmm.mr

    raw = log + ".raw"
    for stale in (raw, log):
        if os.path.exists(stale):
            os.remove(stale)
    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=1 << 30)
    logged = rmm.mr.LoggingResourceAdaptor(pool, log_file_name=raw)
    rmm.mr.set_current_device_resource(logged)
    return logged, raw
