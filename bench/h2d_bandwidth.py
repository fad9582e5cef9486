import torch, time
for pin in (False, True):
    x = torch.empty(77*1024*1024, dtype=torch.uint8, pin_memory=pin)
    x.fill_(1)
    y = torch.empty_like(x, device="cuda")
    for _ in range(3): y.copy_(x, non_blocking=True)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20): y.copy_(x, non_blocking=True)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t) / 20
    print(f"H2D pinned={pin}: {x.numel()/dt/1e9:.1f} GB/s ({dt*1e3:.2f} ms per 77 MiB)")
