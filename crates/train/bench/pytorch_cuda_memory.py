"""PyTorch + HF transformers side of the CUDA memory benchmark (see cuda_memory.sh).

usage: python pytorch_cuda_memory.py CASE...   CASE = SIZE:BATCH:f32|bf16:full|ckpt:LABELS
One warm-up training step (forward, loss, backward, AdamW; it allocates the moments), then
one measured step after torch.cuda.reset_peak_memory_stats(). Prints one JSON line per case:
max_memory_allocated and max_memory_reserved in bytes, and the step time."""
import json, sys, time
import torch
from transformers import SegformerConfig, SegformerForSemanticSegmentation

for spec in sys.argv[1:]:
    size, batch, prec, ckpt, labels = spec.split(":")
    size, batch, labels = int(size), int(batch), int(labels)
    torch.manual_seed(0)
    model = SegformerForSemanticSegmentation(SegformerConfig(num_labels=labels)).cuda().train()
    if ckpt == "ckpt":
        try:
            model.gradient_checkpointing_enable()
        except ValueError as e:  # a model without gradient checkpointing support
            print(json.dumps({"case": spec, "error": str(e)}))
            continue
    opt = torch.optim.AdamW(model.parameters(), lr=6e-5)
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = torch.randint(0, labels, (batch, size, size), device="cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=prec == "bf16")

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = model(pixel_values=x, labels=y).loss
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    step()
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    step()
    print(json.dumps({"case": spec, "allocated": torch.cuda.max_memory_allocated(),
                      "reserved": torch.cuda.max_memory_reserved(),
                      "step_s": round(time.perf_counter() - t, 4)}), flush=True)
    del model, opt, x, y
    torch.cuda.empty_cache()
