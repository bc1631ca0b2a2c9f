"""Reference files for dew's formats layer: GGUF files and dequantized values from the PyPI `gguf` package
(0.19), and a safetensors file of every dtype from the PyPI `safetensors` package.

Writes under tests/fixtures/gguf/:
  types_v3.gguf        gguf-py's GGUFWriter (version 3): one tensor per ggml type dew dequantizes, named by
                       the type ("q4_k", ...), shape [4, 256] for the K quants and [4, 64] for the others
                       (PyTorch order; GGUF dims are the reverse), plus metadata of every value type.
                       Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16 and BF16 hold gguf-py's quantization of float data;
                       the K quants (which gguf-py cannot quantize) hold random blocks whose half scales are
                       replaced by finite values, so every bit pattern of the quants is exercised.
  types_v2.gguf        the same bytes with the version field set to 2 (v2 and v3 share one layout; v3 only
                       added big-endian files).
  expected.safetensors for each tensor NAME: NAME (float32, gguf.quants.dequantize of its bytes) and, for the
                       types gguf-py quantizes, NAME.source (the float32 input it quantized).
  metadata.json        [[key, type name as dew's GgufValue::type_name() gives it, value], ...] in file order.

Under tests/fixtures/safetensors/:
  dtypes.safetensors   safetensors.torch.save_file of one tensor per dtype, named by the dtype ("F8_E4M3", ...),
                       shape [3, 4]: arange(12) - 5 converted to it (arange(12) for unsigned types, % 2 for BOOL).

And, when tests/fixtures/gguf/dew_written.gguf exists (written by dew's GgufWriter in the test
GgufWriter.MatchesCommittedFile, see docs/formats.md), checks that gguf.GGUFReader reads it: its metadata and
tensors must equal what that test wrote (the formulas are repeated below). The script fails if not.

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_gguf_fixtures.py
Deterministic (fixed seed).
"""
import json
import pathlib

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, GGMLQuantizationType as Q, quants
from safetensors.numpy import save_file

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "gguf"
ROWS = 4

QUANTIZED = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]
RANDOM_BLOCKS = [Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]
# Byte offsets of the half-precision scales in each K-quant block (ggml-common.h).
HALF_FIELDS = {Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}

METADATA = [
    ("test.uint8", GGUFValueType.UINT8, 200, "uint8"),
    ("test.int8", GGUFValueType.INT8, -100, "int8"),
    ("test.uint16", GGUFValueType.UINT16, 60000, "uint16"),
    ("test.int16", GGUFValueType.INT16, -30000, "int16"),
    ("test.uint32", GGUFValueType.UINT32, 4000000000, "uint32"),
    ("test.int32", GGUFValueType.INT32, -2000000000, "int32"),
    ("test.float32", GGUFValueType.FLOAT32, 0.1, "float32"),
    ("test.bool_true", GGUFValueType.BOOL, True, "bool"),
    ("test.bool_false", GGUFValueType.BOOL, False, "bool"),
    ("test.string", GGUFValueType.STRING, "héllo, GGUF ✓", "string"),
    ("test.empty_string", GGUFValueType.STRING, "", "string"),
    ("test.uint64", GGUFValueType.UINT64, 18000000000000000000, "uint64"),
    ("test.int64", GGUFValueType.INT64, -9000000000000000000, "int64"),
    ("test.float64", GGUFValueType.FLOAT64, 1e300, "float64"),
    ("test.array_strings", GGUFValueType.ARRAY, ["<s>", "</s>", "a b", ""], "array[string]"),
    ("test.array_int32", GGUFValueType.ARRAY, [1, -2, 3], "array[int32]"),
    ("test.array_float32", GGUFValueType.ARRAY, [0.5, -1.25], "array[float32]"),
    ("test.array_bool", GGUFValueType.ARRAY, [True, False, True], "array[bool]"),
    ("test.array_nested", GGUFValueType.ARRAY, [[1, 2], [3], [4, 5, 6]], "array[array[int32]]"),
]


def source_data(rng: np.random.Generator, cols: int) -> np.ndarray:
    data = rng.standard_normal((ROWS, cols)).astype(np.float32)
    data[0, :8] = 0.0  # an all-zero start exercises d == 0 paths in part of a block
    data[1, 0] = 3.5
    return data


def random_blocks(rng: np.random.Generator, qtype: Q) -> np.ndarray:
    block_size, block_bytes = quants.GGML_QUANT_SIZES[qtype]
    n_blocks = ROWS * 256 // block_size
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for offset in HALF_FIELDS[qtype]:
        halves = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        blocks[:, offset:offset + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(ROWS, -1)


def write_types(path: pathlib.Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240607)
    writer = GGUFWriter(str(path), "llama")  # writes general.architecture first
    for key, vtype, value, _ in METADATA:
        writer.add_key_value(key, value, vtype)
    expected: dict[str, np.ndarray] = {}
    for qtype in QUANTIZED:
        name = qtype.name.lower()
        source = source_data(rng, 64)
        raw = quants.quantize(source, qtype)
        writer.add_tensor(name, raw, raw_dtype=qtype)
        expected[name] = quants.dequantize(raw, qtype).astype(np.float32)
        expected[name + ".source"] = source
    for qtype in RANDOM_BLOCKS:
        name = qtype.name.lower()
        raw = random_blocks(rng, qtype)
        writer.add_tensor(name, raw, raw_dtype=qtype)
        expected[name] = quants.dequantize(raw, qtype).astype(np.float32)
        assert np.isfinite(expected[name]).all()
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return expected


def json_value(value, type_name: str):
    """The value as dew reads it: float32 values rounded to float32, the rest as written."""
    if type_name == "float32":
        return float(np.float32(value))
    if type_name == "array[float32]":
        return [float(np.float32(v)) for v in value]
    return value


def check_dew_written(path: pathlib.Path) -> None:
    """The file GgufWriter.MatchesCommittedFile writes; the formulas here repeat that test's."""
    reader = GGUFReader(str(path))
    assert reader.fields["GGUF.version"].parts[-1][0] == 3
    fields = {name: f for name, f in reader.fields.items() if not name.startswith("GGUF.")}
    assert list(fields)[:4] == ["general.architecture", "general.alignment", "test.count", "test.scale"], list(fields)
    assert fields["general.architecture"].contents() == "llama"
    assert fields["general.alignment"].contents() == 64
    assert fields["test.count"].contents() == 7
    assert abs(fields["test.scale"].contents() - 0.25) < 1e-9
    assert fields["test.flag"].contents() is True
    assert fields["test.tokens"].contents() == ["<s>", "</s>", "hello"]
    assert fields["test.ids"].contents() == [3, -1, 2]
    assert fields["test.scores"].contents() == [0.5, -0.25]
    cols = 64
    values = (((np.arange(3 * cols) * 37) % 101 - 50) / 16).astype(np.float32).reshape(3, cols)
    tensors = {t.name: t for t in reader.tensors}
    assert [t.name for t in reader.tensors] == ["w_f32", "w_f16", "w_q8_0"]
    for name, qtype in [("w_f32", Q.F32), ("w_f16", Q.F16), ("w_q8_0", Q.Q8_0)]:
        t = tensors[name]
        assert t.tensor_type == qtype, (name, t.tensor_type)
        assert list(t.shape) == [cols, 3], (name, list(t.shape))  # GGUF order
        assert t.data_offset % 64 == 0
        got = quants.dequantize(np.asarray(t.data), qtype).reshape(3, cols)
        want = quants.dequantize(quants.quantize(values, qtype), qtype)
        assert np.array_equal(got, want), name
        assert np.array_equal(np.asarray(t.data).view(np.uint8).reshape(-1), quants.quantize(values, qtype).view(np.uint8).reshape(-1)), name
    print(f"{path.name}: gguf.GGUFReader reads dew's output as written")


def write_safetensors_dtypes() -> None:
    import torch
    from safetensors.torch import save_file as save_torch

    dtypes = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
              "BOOL": torch.bool, "U16": torch.uint16, "U32": torch.uint32, "U64": torch.uint64,
              "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}
    tensors = {}
    for name, dtype in dtypes.items():
        base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
        if name == "BOOL":
            base = base.remainder(2)
        elif not name.startswith("U"):
            base = base - 5
        tensors[name] = base.to(dtype)
    out = OUT.parent / "safetensors"
    out.mkdir(parents=True, exist_ok=True)
    save_torch(tensors, str(out / "dtypes.safetensors"), metadata={"format": "pt"})


def main() -> None:
    write_safetensors_dtypes()
    OUT.mkdir(parents=True, exist_ok=True)
    v3 = OUT / "types_v3.gguf"
    expected = write_types(v3)
    data = bytearray(v3.read_bytes())
    assert data[4:8] == (3).to_bytes(4, "little")
    data[4:8] = (2).to_bytes(4, "little")
    (OUT / "types_v2.gguf").write_bytes(bytes(data))
    save_file(expected, str(OUT / "expected.safetensors"))

    reader = GGUFReader(str(v3))
    meta = [["general.architecture", "string", "llama"]]
    for key, _, value, type_name in METADATA:
        got = reader.fields[key].contents()
        if type_name == "array[array[int32]]":  # GGUFReader.contents() flattens nested arrays
            assert got == [v for part in value for v in part], (key, got)
            got = value
        assert json_value(got, type_name) == json_value(value, type_name), (key, got, value)
        meta.append([key, type_name, json_value(value, type_name)])
    (OUT / "metadata.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    for t in reader.tensors:
        got = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(expected[t.name].shape)
        assert np.array_equal(got, expected[t.name]), t.name
    print(f"wrote {v3.name} ({v3.stat().st_size} bytes), types_v2.gguf, expected.safetensors, metadata.json")

    dew_written = OUT / "dew_written.gguf"
    if dew_written.exists():
        check_dew_written(dew_written)
    else:
        print("no dew_written.gguf yet: run the test with DEW_UPDATE_FIXTURES=1 first")


if __name__ == "__main__":
    main()
