#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz harnesses (tests/fuzz/<harness>/).

Seeds are small: valid inputs that reach deep into each parser, hand-made
damaged ones, and the regression inputs an outside review found (named
regress_*). Standard library only; the binary formats are written from their
specifications (README: llm.c shards, safetensors), not by train_gpt.
Re-running rewrites the same files.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(harness, name, data):
    d = os.path.join(HERE, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- config: the file's text, then "\n--set KEY=VALUE" segments ----
def config_seeds():
    with open(os.path.join(HERE, "..", "..", "configs", "tiny.json"), "rb") as f:
        put("config", "tiny.json", f.read())
    put("config", "empty_object.json", "{}")
    put("config", "sets.json", '{"model": {"n_layer": 2}}\n--set train.lr=1e-3\n--set parallel.sp=true'
        "\n--set parallel.tp=2\n--set data.train=x_*.bin")
    put("config", "layout.json", json.dumps({
        "model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "seq_len": 32, "dropout": 0.1},
        "train": {"micro_batch": 2, "global_batch": 8, "recompute": "selective", "precision": "bf16"},
        "parallel": {"tp": 2, "dp": 2, "sp": True, "zero": 1, "numa": "off"},
        "interconnect": {"bus_gbps": 100, "latency_us": 5}, "device_peak_tflops": 100}))
    put("config", "strings.json", '{"out": {"dir": "runs/\\u00e9\\n\\"x"}, "data": {"val": ""}}')
    put("config", "regress_duplicate_key.json", '{"model": {"n_layer": 2, "n_layer": 3}}')
    put("config", "regress_duplicate_section.json", '{"train": {"lr": 1e-3}, "train": {"lr": 2e-3}}')
    put("config", "regress_trailing_garbage.json", '{"model": {"n_layer": 2}} garbage')
    put("config", "regress_garbage_after_nul.json", b'{"model": {"n_layer": 2}}\x00garbage')
    put("config", "regress_sp_rows_overflow.json", json.dumps({
        "model": {"seq_len": 1048576}, "train": {"micro_batch": 1048576, "global_batch": 1048576},
        "parallel": {"tp": 2, "sp": True}}))
    # Found by hand, next to the one above: train.micro_batch x parallel.dp in the global batch check.
    put("config", "regress_micro_batch_dp_overflow.json", json.dumps({
        "train": {"micro_batch": 1048576, "global_batch": 1048576}, "parallel": {"dp": 1048576}}))
    put("config", "regress_sp_rows_overflow_set.json", "{}\n--set model.seq_len=1048576\n--set train.micro_batch=1048576"
        "\n--set train.global_batch=1048576\n--set parallel.tp=4\n--set parallel.sp=1")


# ---- state.json, against the default config ----
def state(step, **over):
    s = {"format": "train_gpt checkpoint", "version": 1, "step": step, "data_epoch": 0, "data_index": 5,
         "seed": 1337, "config": {"train": {"global_batch": 4, "seed": 1337}, "model": {"seq_len": 1024},
                                   "data": {"shuffle": False}}}
    s.update(over)
    return json.dumps(s, indent=2)


def state_seeds():
    put("state", "valid.json", state(5))
    # Version 2: the training set and each file's checksum besides (checked by the loads, not by the state).
    put("state", "valid_v2.json", state(5, version=2,
                                        train_data=[{"name": "train_000000.bin", "bytes": 5024, "tokens": 2000}],
                                        files={"model.safetensors": {"bytes": 170224,
                                                                     "xxh3_128": "607991e4b89a913febb4d81d9e49e8da"}}))
    put("state", "other_seed.json", state(5, config={"train": {"global_batch": 4, "seed": 1},
                                                     "model": {"seq_len": 1024}, "data": {"shuffle": False}}))
    put("state", "regress_step_1e10.json", state(5).replace('"step": 5', '"step": 1e10'))
    put("state", "regress_step_1e19.json", state(5).replace('"step": 5', '"step": 1e19'))
    put("state", "regress_step_2.9.json", state(5).replace('"step": 5', '"step": 2.9'))
    put("state", "regress_index_1e19.json", state(5).replace('"data_index": 5', '"data_index": 1e19'))
    # Found by this harness's JSON oracle: read_json (checkpoint.c) uses cJSON_Parse, which stops after
    # the first value, and takes the first of two equal names.
    put("state", "regress_trailing_garbage.json", state(5) + " garbage")
    put("state", "regress_garbage_after_nul.json", state(5).encode() + b"\x00garbage")
    put("state", "regress_duplicate_step.json", state(5).replace('"step": 5', '"step": 5, "step": 7'))


# ---- config.json of a Hugging Face checkpoint, against the tiny model ----
def hf_seeds():
    tiny = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 8, "n_positions": 4,
            "n_ctx": 4, "n_embd": 4, "n_layer": 1, "n_head": 1, "n_inner": None}
    put("hf_config", "tiny.json", json.dumps(tiny, indent=2))
    put("hf_config", "gpt2.json", json.dumps(dict(tiny, vocab_size=50257, n_positions=1024, n_embd=768,
                                                  n_layer=12, n_head=12), indent=2))
    put("hf_config", "regress_n_layer_1e20.json", json.dumps(dict(tiny, n_layer=1e20)))
    put("hf_config", "regress_n_positions_inf.json", json.dumps(tiny).replace('"n_positions": 4', '"n_positions": 1e999'))
    # Found by this harness: read_json accepts trailing text, text after a NUL, a repeated key (the check
    # reads the first n_layer, transformers' json.load the last) and a config.json that is not an object.
    put("hf_config", "regress_trailing_garbage.json", json.dumps(tiny) + " garbage")
    put("hf_config", "regress_garbage_after_nul.json", json.dumps(tiny).encode() + b"\x00garbage")
    put("hf_config", "regress_duplicate_n_layer.json", json.dumps(tiny).replace('"n_layer": 1', '"n_layer": 1, "n_layer": 12'))
    put("hf_config", "regress_not_object.json", "[1, 2]")
    put("hf_config", "regress_n_layer_fraction.json", json.dumps(tiny).replace('"n_layer": 1', '"n_layer": 1.5'))


# ---- safetensors: the tiny model's tensors (L=1, C=4, V=8, T=4) ----
def tiny_shapes():
    C, V, T = 4, 8, 4
    s = [("wte.weight", [V, C]), ("wpe.weight", [T, C])]
    h = "h.0."
    s += [(h + "ln_1.weight", [C]), (h + "ln_1.bias", [C]), (h + "attn.c_attn.weight", [C, 3 * C]),
          (h + "attn.c_attn.bias", [3 * C]), (h + "attn.c_proj.weight", [C, C]), (h + "attn.c_proj.bias", [C]),
          (h + "ln_2.weight", [C]), (h + "ln_2.bias", [C]), (h + "mlp.c_fc.weight", [C, 4 * C]),
          (h + "mlp.c_fc.bias", [4 * C]), (h + "mlp.c_proj.weight", [4 * C, C]), (h + "mlp.c_proj.bias", [C]),
          ("ln_f.weight", [C]), ("ln_f.bias", [C])]
    return s


def safetensors(tensors, dtype="F32"):
    """tensors: [(name, shape)]; values i/64 in the given dtype."""
    size = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        vals = [((i % 13) - 6) / 64 for i in range(n)]
        if dtype == "F32":
            raw = struct.pack("<%df" % n, *vals)
        elif dtype == "F16":
            raw = struct.pack("<%de" % n, *vals)
        else:  # bf16: the top half of the float32
            raw = b"".join(struct.pack("<f", v)[2:] for v in vals)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n * size]}
        data += raw
    return raw_safetensors(json.dumps(header, separators=(",", ":")), data)


def raw_safetensors(header_json, data=b""):
    h = header_json.encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    shapes = tiny_shapes()
    put("safetensors", "model_f32.safetensors", safetensors(shapes))
    put("safetensors", "model_f16.safetensors", safetensors(shapes, "F16"))
    put("safetensors", "model_bf16_hf.safetensors", safetensors(
        [("transformer." + n, [6, 4] if n == "wpe.weight" else s) for n, s in shapes], "BF16"))
    put("safetensors", "optimizer.safetensors", safetensors(
        [("exp_avg." + n, s) for n, s in shapes] + [("exp_avg_sq." + n, s) for n, s in shapes]))
    put("safetensors", "regress_shape_1e20.safetensors",
        raw_safetensors('{"wte.weight":{"dtype":"F32","shape":[1e20],"data_offsets":[0,4]}}', b"\0" * 4))
    put("safetensors", "regress_shape_numel_overflow.safetensors", raw_safetensors(
        '{"wpe.weight":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,0]}}'))
    # Found by hand, reasoning from regress_shape_numel_overflow: the element count fits, count x 4 bytes does not.
    put("safetensors", "regress_bytes_overflow.safetensors", raw_safetensors(
        '{"wpe.weight":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,0]}}'))
    put("safetensors", "regress_offsets_1e999.safetensors",
        raw_safetensors('{"wte.weight":{"dtype":"F32","shape":[8,4],"data_offsets":[0,1e999]}}', b"\0" * 128))


# ---- token shards: 256 int32 header (magic, version, count), uint16 tokens ----
def shard(tokens, magic=20240520, version=1, count=None):
    head = struct.pack("<3i", magic, version, len(tokens) if count is None else count) + b"\0" * (1024 - 12)
    return head + struct.pack("<%dH" % len(tokens), *tokens)


def shard_seeds():
    put("shards", "valid_300.bin", shard([(i * 7919) % 50257 for i in range(300)]))
    put("shards", "valid_eot.bin", shard([50256] + list(range(64)) + [50256] * 8))
    put("shards", "token_out_of_vocab.bin", shard([1, 2, 3, 65535] + [4] * 60))
    put("shards", "count_mismatch.bin", shard(list(range(40)), count=41))
    put("shards", "bad_magic.bin", shard(list(range(10)), magic=20240521))
    put("shards", "bad_version.bin", shard(list(range(10)), version=2))
    put("shards", "header_only.bin", shard([]))
    put("shards", "short.bin", shard(list(range(10)))[:600])


# ---- tokenizer: UTF-8 text (and some that is not) ----
def tokenizer_seeds():
    put("tokenizer", "kjv.txt", "In the beginning God created the heaven and the earth.\n"
        "And the earth was without form, and void; and darkness was upon the face of the deep.\n")
    put("tokenizer", "contractions.txt", "I'm sure they've said he'd go, we'll see 'S 'LL x'y ''s '''")
    put("tokenizer", "eot.txt", "<|endoftext|> <|endoftext|>x<|endoftext|")
    put("tokenizer", "whitespace.txt", "a  b   c \t\n\n\r\n  \u00a0 \u3000x    ")
    put("tokenizer", "unicode.txt", "na\u00efve caf\u00e9 \u65e5\u672c\u8a9e \U0001F600\U0001F468\u200d\U0001F469 "
        "\u0661\u0662 \u216b \uff11 e\u0301 \U0010FFFF")
    put("tokenizer", "digits.txt", "1234567890123456789 3.14 1,000 0x1F 4th")
    put("tokenizer", "invalid_overlong.bin", b"ok \xc0\xaf")
    put("tokenizer", "invalid_surrogate.bin", b"x\xed\xa0\x80y")
    put("tokenizer", "invalid_truncated.bin", b"abc\xe2\x82")
    put("tokenizer", "invalid_above_max.bin", b"\xf4\x90\x80\x80")
    put("tokenizer", "nul_bytes.bin", b"a\x00b\x00\x00 c")


# ---- hellaswag: JSON Lines of ctx, endings, label (the dataset's fields) ----
def hellaswag_seeds():
    ex = {"ind": 4, "activity_label": "Removing ice from car", "ctx": "Then, the man writes over the snow covering"
          " the window of a car, and a woman wearing winter clothes smiles. then",
          "endings": [", the man adds wax to the windshield and cuts it.", ", a person board a ski lift.",
                      ", the man puts on a christmas coat, knitted with netting.",
                      ", the man continues removing the snow on his car."], "label": 3, "split": "val"}
    line = json.dumps(ex)
    put("hellaswag", "valid.jsonl", line + "\n\n" + json.dumps(dict(ex, label=0, ctx="A \u00e9 \u65e5 x")) + "\n")
    put("hellaswag", "no_final_newline.jsonl", line)
    put("hellaswag", "unicode_endings.jsonl", json.dumps(dict(ex, endings=["\U0001F600", "", "  a", "\t"])) + "\n")
    put("hellaswag", "test_split_no_label.jsonl", json.dumps({k: v for k, v in ex.items() if k != "label"}) + "\n")
    put("hellaswag", "three_endings.jsonl", json.dumps(dict(ex, endings=ex["endings"][:3])) + "\n")
    put("hellaswag", "label_string.jsonl", json.dumps(dict(ex, label="3")) + "\n")
    put("hellaswag", "label_huge.jsonl", line.replace('"label": 3', '"label": 1e300') + "\n")
    put("hellaswag", "key_twice.jsonl", line.replace('"label": 3', '"label": 3, "label": 1') + "\n")
    put("hellaswag", "trailing_text.jsonl", line + " x\n")
    put("hellaswag", "nul_in_line.jsonl", line.encode() + b"\x00x\n")
    put("hellaswag", "invalid_utf8.jsonl", line.replace("snow", "sn\udcff").encode("utf-8", "surrogateescape") + b"\n")
    put("hellaswag", "nul_escape.jsonl", json.dumps(dict(ex, ctx="a\u0000b")) + "\n")


if __name__ == "__main__":
    config_seeds()
    state_seeds()
    hf_seeds()
    safetensors_seeds()
    shard_seeds()
    tokenizer_seeds()
    hellaswag_seeds()
