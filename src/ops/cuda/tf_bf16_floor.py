# The bf16 floor of the CUDA fixture test (fixture_gpu_test.cpp): transformers itself in bf16 on the GPU against
# the fp32 tests/fixtures/*/reference.json, with the metrics that test prints (max, p99, median |logprob diff|,
# positions > 5e-2, top-1 misses where the reference margin exceeds 0.1).
# Usage (device machine): python3 src/ops/cuda/tf_bf16_floor.py tests/fixtures
import json, sys, os
import torch
from transformers import AutoModelForCausalLM
root = sys.argv[1]
for name in ["v2_lite", "v2", "v3", "v32"]:
    d = os.path.join(root, name)
    ref = json.load(open(os.path.join(d, "reference.json")))
    try:
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16, device_map="cuda", attn_implementation="eager").eval()
    except Exception as ex:
        print(f"TF {name}: load failed {ex}")
        continue
    diffs, checked, wrong = [], 0, 0
    with torch.inference_mode():
        for e in ref["score"]:
            ids = e["input_ids"]
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids], device="cuda")).logits[0].float(), -1).cpu()
            for i in range(1, len(ids)):
                diffs.append(abs(lp[i - 1, ids[i]].item() - e["token_logprobs"][i]))
                t = e["top_logprobs"][i]
                if t[0][0] - t[1][0] > 0.1:
                    checked += 1
                    wrong += int(lp[i - 1].argmax().item() != t[0][1])
    d_ = torch.tensor(diffs)
    print(f"TF-bf16 {name:8s} max {d_.max():.4f} p99 {d_.quantile(0.99):.4f} median {d_.median():.5f}, "
          f"{int((d_ > 0.05).sum())} of {len(diffs)} positions > 0.05; top-1 wrong {wrong} of {checked}")
